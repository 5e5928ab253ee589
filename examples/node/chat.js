#!/usr/bin/env node
'use strict'
// The Node side of examples/chat.lua: a topic chat on npm hyperswarm 4.x.
// Same protocol: the room's topic is BLAKE2b-256 of its name, and each
// message is one line of UTF-8 text ending in "\n".
//
//   node examples/node/chat.js --bootstrap HOST:PORT [ROOM]   (default room "lobby")
//   node examples/node/chat.js [ROOM]                         the public HyperDHT
//   --port N binds the DHT socket to N (0: any port)
//
// It needs hyperswarm and sodium-universal: `npm install hyperswarm@4
// sodium-universal` here, or NODE_PATH=spec/interop/node_modules.

const Hyperswarm = require('hyperswarm')
const sodium = require('sodium-universal')
const readline = require('readline')

const MAX_LINE = 64 * 1024

let bootstrap = null
let port
let room = 'lobby'
const args = process.argv.slice(2)
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--bootstrap') {
    const [host, port] = args[++i].split(':')
    bootstrap = [{ host, port: Number(port) }]
  } else if (args[i] === '--port') {
    const p = Number(args[++i])
    port = p === 0 ? [0, 0] : p // hyperdht reads a plain 0 as its default port
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
  peers.add(conn)
  console.log(who + ' joined')
  let buf = ''
  conn.setEncoding('utf8')
  conn.on('data', (data) => {
    buf += data
    let nl
    while ((nl = buf.indexOf('\n')) !== -1) {
      console.log(who + ': ' + buf.slice(0, nl))
      buf = buf.slice(nl + 1)
    }
    if (buf.length > MAX_LINE) conn.destroy()
  })
  conn.on('error', () => {})
  conn.on('close', () => {
    peers.delete(conn)
    console.log(who + ' left')
  })
})

swarm.join(topic)
console.log('joined ' + room + ' as ' + short(swarm.keyPair.publicKey))

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => {
  for (const conn of peers) conn.write(line + '\n')
})
rl.on('close', async () => {
  await swarm.destroy()
  process.exit(0)
})
