#!/usr/bin/env node
'use strict'
// The Node end of bench/suites/handshake.lua: a two-node hyperdht testnet on
// loopback (hyperdht from spec/interop/node_modules) and a server listening
// on the second node with the key of keySeed. Prints
// {"event":"ready","port":P,"publicKey":hex}; then each stdin line "cpu" gets
// {"event":"cpu","ms":user+system ms,"handshakes":connections}.
const path = require('path')
const root = path.join(__dirname, '..', '..', 'spec', 'interop', 'node_modules')
const HyperDHT = require(path.join(root, 'hyperdht'))
const createTestnet = require(path.join(root, '@hyperswarm', 'testnet'))

const opts = JSON.parse(process.argv[2] || '{}')

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

async function main() {
  const testnet = await createTestnet(2, { host: '127.0.0.1' })
  const node = testnet.nodes[1]
  let handshakes = 0
  const server = node.createServer((socket) => {
    socket.on('error', () => {})
    socket.destroy()
  })
  const kp = HyperDHT.keyPair(Buffer.from(opts.keySeed || '11'.repeat(32), 'hex'))
  await server.listen(kp)
  // every answered first message is a handshake (the server dedupes none here)
  const onhs = server._addHandshake.bind(server)
  server._addHandshake = async (...args) => {
    const hs = await onhs(...args)
    if (hs) handshakes++
    return hs
  }
  let pending = ''
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', (chunk) => {
    pending += chunk
    let nl
    while ((nl = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, nl).trim()
      pending = pending.slice(nl + 1)
      if (line === 'cpu') {
        const u = process.cpuUsage()
        emit({ event: 'cpu', ms: (u.user + u.system) / 1000, handshakes })
      }
    }
  })
  process.stdin.on('end', () => process.exit(0))
  emit({ event: 'ready', port: node.address().port, publicKey: kp.publicKey.toString('hex') })
}

main().catch((e) => {
  emit({ event: 'error', message: String(e && e.stack) })
  process.exit(1)
})
