#!/usr/bin/env node
'use strict'
// A hyperdht client in the mid-connect NAT race (issue 13): it punches as
// firewalled, and its firewall check "ends" (dht.firewalled -> false) as its
// first holepunch round leaves, so its round 2 says firewall OPEN with
// addresses null. spec/dht_punch_race_spec.lua runs it against a ludx server.
//   node race-client.js '{"bootstrap":"127.0.0.1:PORT","publicKey":"hex","runs":3}'
// Prints {"event":"ready"}, then per run {"event":"round",...} for each
// holepunch payload the client seals and {"event":"run","run":i,"open":bool,
// "echo":bool,"error":?}, then {"event":"done"}.

const HyperDHT = require('hyperdht')
const HolepunchPayload = require('hyperdht/lib/secure-payload')
const { parseArgs, emit, exit, errorInfo, watchStdin } = require('./common')

const DEFAULTS = {
  bootstrap: '',
  host: '127.0.0.1',
  publicKey: '',
  runs: 3,
  timeout: 20000, // per run: open and echo
  watchStdin: true
}

async function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  if (o.watchStdin) watchStdin(() => {})
  const bootstrap = o.bootstrap.split(',').map((s) => {
    const i = s.lastIndexOf(':')
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) }
  })
  const pk = Buffer.from(o.publicKey, 'hex')

  // the plaintext of every holepunch round this process seals
  let run = -1
  const encrypt = HolepunchPayload.prototype.encrypt
  HolepunchPayload.prototype.encrypt = function (p) {
    emit({ event: 'round', run, firewall: p.firewall, addresses: p.addresses ? p.addresses.length : null, punching: p.punching, error: p.error })
    return encrypt.call(this, p)
  }

  emit({ event: 'ready' })
  for (let i = 0; i < o.runs; i++) {
    run = i
    const node = new HyperDHT({ bootstrap, host: o.host, port: [0, 0], firewalled: true, ephemeral: true, quickFirewall: false })
    // loopback answers every probe: stay firewalled until the race flips it
    node._checkIfFirewalled = async () => true
    await node.fullyBootstrapped()
    const peerHolepunch = node._router.peerHolepunch
    node._router.peerHolepunch = function (...args) {
      // the quick firewall check ends now (dht-rpc sets both)
      node.firewalled = node.io.firewalled = false
      return peerHolepunch.apply(this, args)
    }
    const socket = node.connect(pk, { fastOpen: false })
    let err = null
    const timer = (ms) => new Promise((resolve) => setTimeout(resolve, ms, false).unref())
    const opened = new Promise((resolve) => {
      socket.once('open', () => resolve(true))
      socket.once('error', (e) => {
        err = errorInfo(e)
        resolve(false)
      })
    })
    const open = await Promise.race([opened, timer(o.timeout)])
    let echo = false
    if (open) {
      const got = new Promise((resolve) => socket.once('data', (d) => resolve(d.toString() === 'race ' + i)))
      socket.write('race ' + i)
      echo = await Promise.race([got, timer(o.timeout)])
    }
    emit({ event: 'run', run: i, open, echo, error: err })
    socket.on('error', () => {})
    socket.destroy()
    await node.destroy()
  }
  emit({ event: 'done' })
  exit(0)
}

main().catch((e) => {
  emit({ event: 'error', ...errorInfo(e) })
  exit(1)
})
