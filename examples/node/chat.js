#!/usr/bin/env node
'use strict'
// The Node side of examples/chat.lua: a topic chat on npm hyperswarm 4.x
// and protomux 3.x.
//
//   node examples/node/chat.js --bootstrap HOST:PORT [ROOM]   (default room "lobby")
//   node examples/node/chat.js [ROOM]                         the public HyperDHT
//   --port N binds the DHT socket to N (0: any port)
//   --nick NAME sent to the peers in the handshake (default: none)
//
// The protocol (the same as examples/chat.lua): the room's topic is
// BLAKE2b-256 of its name. On each swarm connection both sides open one
// protomux channel, protocol "ludx-chat/1", no id; its handshake is a
// compact-encoding string (the nickname, or empty) and it has one message
// type, a compact-encoding string: one chat line, without its newline. A
// receiver keeps at most 64 KiB of a line. Closing the channel leaves the
// chat with that peer.
//
// It needs hyperswarm, protomux, compact-encoding and sodium-universal:
// `npm install hyperswarm@4 protomux@3 compact-encoding sodium-universal`
// here, or NODE_PATH=spec/interop/node_modules.

const Hyperswarm = require('hyperswarm')
const Protomux = require('protomux')
const c = require('compact-encoding')
const sodium = require('sodium-universal')
const readline = require('readline')

const PROTOCOL = 'ludx-chat/1'
const MAX_LINE = 64 * 1024 // bytes of a line kept (sent and shown)

// At most MAX_LINE bytes of a line (a character cut in two shows as U+FFFD).
function cut(line) {
  const buf = Buffer.from(line)
  return buf.length <= MAX_LINE ? line : buf.subarray(0, MAX_LINE).toString()
}

let bootstrap = null
let port
let room = 'lobby'
let nick = ''
const args = process.argv.slice(2)
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--bootstrap') {
    const [host, port] = args[++i].split(':')
    bootstrap = [{ host, port: Number(port) }]
  } else if (args[i] === '--port') {
    const p = Number(args[++i])
    port = p === 0 ? [0, 0] : p // hyperdht reads a plain 0 as its default port
  } else if (args[i] === '--nick') {
    nick = args[++i]
  } else {
    room = args[i]
  }
}

const topic = Buffer.alloc(32)
sodium.crypto_generichash(topic, Buffer.from(room))

const swarm = new Hyperswarm({ bootstrap: bootstrap || undefined, port })
const peers = new Set()
const short = (key) => key.toString('hex').slice(0, 8)

swarm.on('connection', (conn, info) => {
  const who = short(info.publicKey)
  let opened = false
  conn.on('error', () => {})
  const mux = Protomux.from(conn)
  const channel = mux.createChannel({
    protocol: PROTOCOL,
    handshake: c.string,
    onopen(theirNick) {
      opened = true
      peers.add(channel)
      console.log(who + ' joined' + (theirNick ? ' (' + theirNick + ')' : ''))
    },
    onclose() {
      peers.delete(channel)
      if (opened) console.log(who + ' left')
      conn.destroy()
    }
  })
  if (!channel) return conn.destroy()
  channel.addMessage({
    encoding: c.string,
    onmessage(line) {
      console.log(who + ': ' + cut(line))
    }
  })
  channel.open(nick)
})

swarm.join(topic)
console.log('joined ' + room + ' as ' + short(swarm.keyPair.publicKey))

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => {
  for (const channel of peers) channel.messages[0].send(cut(line))
})
rl.on('close', async () => {
  await swarm.destroy()
  process.exit(0)
})
