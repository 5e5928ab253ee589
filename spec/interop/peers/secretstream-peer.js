#!/usr/bin/env node
'use strict'
// A @hyperswarm/secret-stream peer over a udx-native stream:
//   node secretstream-peer.js --initiator true|false --mode send|recv|both|echo|messages|destroy-after ...
// Prints JSON lines: ready, connect, handshake, [message...], [error], done. See ../README.md.

const SecretStream = require('@hyperswarm/secret-stream')
const { parseArgs, emit, errorInfo, hexKey } = require('./common')
const { run, MODES, TRANSFER_DEFAULTS } = require('./transfer')
const { TRANSPORT_DEFAULTS, openUdx, finish, fail } = require('./udx-transport')

const DEFAULTS = {
  ...TRANSPORT_DEFAULTS,
  initiator: true, // Noise initiator (true) or responder (false)
  keySeed: '', // 32-byte hex seed of the Ed25519 key pair; '' = 32 bytes equal to the stream id
  remotePublicKey: '', // hex; XX: checked after the handshake; IK: required, preset
  pattern: 'XX', // 'XX' or 'IK'
  ssKeepalive: 0, // secret-stream setKeepAlive(ms) (empty messages); 0 = off
  ...TRANSFER_DEFAULTS,
  writeSize: 65536 // bytes per write() = one frame (at most 16777198); 0 = one write
}

function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  if (!MODES.includes(o.mode)) throw new Error('mode must be one of ' + MODES.join(', '))
  if (o.pattern !== 'XX' && o.pattern !== 'IK') throw new Error('pattern must be XX or IK')
  const seed = o.keySeed ? hexKey(o.keySeed, 32, 'keySeed') : Buffer.alloc(32, o.id & 0xff)
  const expected = o.remotePublicKey ? hexKey(o.remotePublicKey, 32, 'remotePublicKey') : null
  if (o.pattern === 'IK' && o.initiator && !expected) throw new Error('IK needs remotePublicKey')
  const keyPair = SecretStream.keyPair(seed)

  const t = openUdx(o, (raw) => {
    const rawClosed = new Promise((resolve) => raw.once('close', resolve))
    const ss = new SecretStream(o.initiator, raw, {
      keyPair,
      pattern: o.pattern,
      remotePublicKey: o.pattern === 'IK' ? expected : null
    })
    if (o.ssKeepalive > 0) ss.setKeepAlive(o.ssKeepalive)
    let summary = null
    let early = null
    // run() reports errors after 'connect'; these come before it
    ss.on('error', (err) => {
      if (summary !== null || early !== null) return
      early = err
      emit({ event: 'error', ...errorInfo(err), expected: o.expectError !== '' && o.expectError === err.code })
    })
    ss.on('close', () => {
      if (summary !== null) return // run() reports the close
      const code = early ? early.code || 'EHANDSHAKE' : 'EHANDSHAKE'
      finish({ event: 'done', mode: o.mode, error: code, stats: t.stats() }, o)
    })
    ss.once('connect', () => {
      emit({
        event: 'handshake',
        initiator: o.initiator,
        publicKey: ss.publicKey.toString('hex'),
        remotePublicKey: ss.remotePublicKey.toString('hex'),
        handshakeHash: ss.handshakeHash.toString('hex')
      })
      summary = run(ss, o, {
        stats: t.stats,
        flush: () => ss.flush(),
        send: (buf) => ss.send(buf),
        closed: rawClosed
      })
      summary.then((s) => finish(s, o))
      if (expected && !ss.remotePublicKey.equals(expected)) {
        const err = new Error('remote public key is not the expected one')
        err.code = 'EREMOTEKEY'
        ss.destroy(err)
      }
    })
  })
  emit({ event: 'keypair', publicKey: keyPair.publicKey.toString('hex') })
}

try {
  main()
} catch (err) {
  fail(err)
}
