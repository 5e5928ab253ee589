#!/usr/bin/env node
'use strict'
// A udx-native stream peer: node udx-peer.js --mode send|recv|both|echo|messages|destroy-after ...
// Prints JSON lines: ready, connect, [message...], [error], done. See ../README.md.

const { parseArgs } = require('./common')
const { run, MODES, TRANSFER_DEFAULTS } = require('./transfer')
const { TRANSPORT_DEFAULTS, openUdx, finish, fail } = require('./udx-transport')

const DEFAULTS = { ...TRANSPORT_DEFAULTS, ...TRANSFER_DEFAULTS }

function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  if (!MODES.includes(o.mode)) throw new Error('mode must be one of ' + MODES.join(', '))
  const t = openUdx(o, (stream) => {
    run(stream, o, {
      stats: t.stats,
      flush: () => stream.flush(),
      send: (buf) => stream.send(buf)
    }).then((summary) => finish(summary, o))
  })
}

try {
  main()
} catch (err) {
  fail(err)
}
