#!/usr/bin/env node
'use strict'
// A protomux 3.x channel over @hyperswarm/secret-stream over udx-native:
//   node protomux-peer.js --initiator true|false --role open|pair --count N --closer node|ludx [--cork]
// The channel is "chat/1" with a string handshake and two message types
// (string, uint). Node sends `count` messages (odd i: the string "node i",
// even i: the uint i) and checks the `count` it receives ("ludx i" / i).
// role open: Node opens first; role pair: Node waits for the remote's open
// (mux.pair). closer node: Node closes the channel once both directions are
// done; closer ludx: it waits for the remote's close.
// --cork sends them all in one batch frame.
// role ids: channels told apart by id instead (see runIds).
// Prints JSON lines: ready, connect, handshake, opened, received, closed, done.

const SecretStream = require('@hyperswarm/secret-stream')
const Protomux = require('protomux')
const c = require('compact-encoding')
const { parseArgs, emit } = require('./common')
const { TRANSPORT_DEFAULTS, openUdx, finish, fail } = require('./udx-transport')

const DEFAULTS = {
  ...TRANSPORT_DEFAULTS,
  initiator: true,
  role: 'open', // open | pair | ids
  count: 300,
  closer: 'node', // node | ludx
  cork: false, // send every message inside one mux.cork()/uncork() (one batch frame)
  expectError: ''
}

function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  const keyPair = SecretStream.keyPair(Buffer.alloc(32, o.id & 0xff))
  openUdx(o, (raw) => {
    const ss = new SecretStream(o.initiator, raw, { keyPair })
    ss.on('error', (err) => emit({ event: 'stream-error', code: err.code || 'ERROR', message: err.message }))
    ss.once('connect', () => {
      emit({ event: 'handshake', remotePublicKey: ss.remotePublicKey.toString('hex') })
      if (o.role === 'ids') runIds(ss)
      else run(ss, o)
    })
  })
}

function run(ss, o) {
  const mux = Protomux.from(ss)
  let got = 0
  let bad = null
  let ch = null
  let sentAll = false

  const maybeClose = () => {
    if (o.closer === 'node' && sentAll && got === o.count && !ch.closed) ch.close()
  }

  const create = () => {
    ch = mux.createChannel({
      protocol: 'chat/1',
      handshake: c.string,
      messages: [
        {
          encoding: c.string,
          onmessage: (m) => check(m)
        },
        {
          encoding: c.uint,
          onmessage: (m) => check(m)
        }
      ],
      onopen: (hs) => {
        emit({ event: 'opened', handshake: hs })
        if (o.cork) mux.cork()
        for (let i = 1; i <= o.count; i++) {
          if (i % 2 === 1) ch.messages[0].send('node ' + i)
          else ch.messages[1].send(i)
        }
        if (o.cork) mux.uncork()
        sentAll = true
        maybeClose()
      },
      onclose: (isRemote) => {
        emit({ event: 'closed', remote: isRemote, received: got, bad })
        ss.end()
      }
    })
    ch.open('node-hs')
  }

  const check = (m) => {
    got++
    const want = got % 2 === 1 ? 'ludx ' + got : got
    if (bad === null && m !== want) bad = { at: got, got: m, want }
    if (got === o.count) emit({ event: 'received', count: got, bad })
    maybeClose()
  }

  if (o.role === 'pair') mux.pair({ protocol: 'chat/1' }, create)
  else create()

  ss.on('close', () => finish({ event: 'done', received: got, bad, error: null }, o))
}

// Channel ids: "chat/1" channels with ids (string handshake, one string
// message type). Node pairs only id "room-a" (so a remote "room-b" is
// rejected) and opens "room-c" itself. Each channel, once open, sends
// "node to <id>"; a "bye" received closes that channel from here. Prints
// opened / message / closed with the channel's id.
function runIds(ss) {
  const mux = Protomux.from(ss)
  const make = (name) => {
    const ch = mux.createChannel({
      protocol: 'chat/1',
      id: Buffer.from(name),
      handshake: c.string,
      onopen: (hs) => {
        emit({ event: 'opened', channel: name, handshake: hs })
        ch.messages[0].send('node to ' + name)
      },
      onclose: (isRemote) => emit({ event: 'closed', channel: name, remote: isRemote })
    })
    // as protomux users write it: the message type added after createChannel
    ch.addMessage({
      encoding: c.string,
      onmessage: (m) => {
        emit({ event: 'message', channel: name, value: m })
        if (m === 'bye') ch.close()
      }
    })
    ch.open('node ' + name)
  }
  mux.pair({ protocol: 'chat/1', id: Buffer.from('room-a') }, () => make('room-a'))
  make('room-c')
  ss.on('close', () => finish({ event: 'done', error: null }, { expectError: '' }))
}

try {
  main()
} catch (err) {
  fail(err)
}
