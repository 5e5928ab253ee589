#!/usr/bin/env node
'use strict'
// Relayed holepunches between two firewalled Node hyperdht nodes, through
// whatever relays the given bootstrap network has (spec/interop/
// dht_relay_punch_spec.lua runs it over ludx relays).
//   node relay-punch.js '{"bootstrap":"127.0.0.1:PORT","runs":100,"concurrency":4}'
// Prints {"event":"ready"} once the server listens, one
// {"event":"run","run":i,"client":bool,"server":bool,"ms":n,"error":?} per
// holepunch, then {"event":"done","runs":n,"both":n,"clientOnly":n,...}.

const HyperDHT = require('hyperdht')
const { parseArgs, emit, exit, errorInfo, watchStdin } = require('./common')

const DEFAULTS = {
  bootstrap: '',
  host: '127.0.0.1',
  runs: 100,
  concurrency: 4,
  localConnection: false,
  fastOpen: false, // false: no fast-open probe, so the second round (punching) runs
  timeout: 15000, // per holepunch: the client's open and the server's connection
  watchStdin: true
}

function parseBootstrap(list) {
  return list.split(',').map((s) => {
    const i = s.lastIndexOf(':')
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) }
  })
}

async function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  if (o.watchStdin) watchStdin(() => {})
  const bootstrap = parseBootstrap(o.bootstrap)
  const mk = () => {
    const node = new HyperDHT({ bootstrap, host: o.host, port: [0, 0], firewalled: true, ephemeral: true })
    // loopback answers every probe: keep both peers firewalled (as behind a
    // NAT) so the connection has to holepunch through a relay
    node._checkIfFirewalled = async () => true
    return node
  }
  const sn = mk()
  const cn = mk()
  await sn.fullyBootstrapped()
  await cn.fullyBootstrapped()

  const serverSeen = new Map() // remote public key (hex) -> resolve
  const waiters = new Map()
  const server = sn.createServer((socket) => {
    socket.on('error', () => {})
    const k = socket.remotePublicKey.toString('hex')
    serverSeen.set(k, true)
    const w = waiters.get(k)
    if (w) w()
    socket.end()
  })
  await server.listen(HyperDHT.keyPair(Buffer.alloc(32, 7)))
  emit({ event: 'ready', firewalled: [sn.firewalled, cn.firewalled] })

  const stats = { runs: 0, both: 0, clientOnly: 0, serverOnly: 0, neither: 0 }
  const times = []

  async function one(i) {
    const seed = Buffer.alloc(32)
    seed.writeUInt32LE(i + 1, 0)
    seed[31] = 0x5a
    const kp = HyperDHT.keyPair(seed)
    const k = kp.publicKey.toString('hex')
    const start = Date.now()
    const serverGot = new Promise((resolve) => {
      if (serverSeen.get(k)) return resolve(true)
      waiters.set(k, () => resolve(true))
    })
    const socket = cn.connect(server.publicKey, { keyPair: kp, localConnection: o.localConnection, fastOpen: o.fastOpen })
    let err = null
    const opened = new Promise((resolve) => {
      socket.once('open', () => resolve(true))
      socket.once('error', (e) => {
        err = errorInfo(e)
        resolve(false)
      })
    })
    const timer = (ms) => new Promise((resolve) => setTimeout(resolve, ms, false).unref())
    const client = await Promise.race([opened, timer(o.timeout)])
    const left = Math.max(1000, o.timeout - (Date.now() - start))
    const srv = await Promise.race([serverGot, timer(left)])
    waiters.delete(k)
    const ms = Date.now() - start
    socket.on('error', () => {})
    socket.destroy()
    stats.runs++
    if (client && srv) stats.both++
    else if (client) stats.clientOnly++
    else if (srv) stats.serverOnly++
    else stats.neither++
    if (client && srv) times.push(ms)
    emit({ event: 'run', run: i, client, server: srv, ms, error: err })
  }

  let next = 0
  async function worker() {
    while (next < o.runs) await one(next++)
  }
  const workers = []
  for (let w = 0; w < o.concurrency; w++) workers.push(worker())
  await Promise.all(workers)
  times.sort((a, b) => a - b)
  const p = (q) => (times.length ? times[Math.min(times.length - 1, Math.floor(q * times.length))] : null)
  emit({ event: 'done', ...stats, p50: p(0.5), p99: p(0.99), punches: cn.stats.punches, serverPunches: sn.stats.punches, firewalled: [sn.firewalled, cn.firewalled] })
  await server.close()
  await cn.destroy()
  await sn.destroy()
  exit(0)
}

main().catch((e) => {
  emit({ event: 'error', ...errorInfo(e) })
  exit(1)
})
