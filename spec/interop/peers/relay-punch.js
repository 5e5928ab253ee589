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
  fresh: false, // new server and client nodes for every run (as hyperdht's tests do)
  pinFirewall: true, // keep both nodes firewalled (else dht-rpc may find loopback open)
  shareLocalAddress: false,
  traceFile: '', // when set: every PEER_HANDSHAKE / PEER_HOLEPUNCH message the peers receive, JSON lines
  fastOpen: false, // false: no fast-open probe, so the second round (punching) runs; 'mixed': every other run
  timeout: 15000, // per holepunch: the client's open and the server's connection
  watchStdin: true
}

function parseBootstrap(list) {
  return list.split(',').map((s) => {
    const i = s.lastIndexOf(':')
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) }
  })
}

// A receive-side capture of the relay traffic at both peers.
function trace(file) {
  const fs = require('fs')
  const c = require('compact-encoding')
  const IO = require('dht-rpc/lib/io')
  const peer = require('dht-rpc/lib/peer')
  const m = require('hyperdht/lib/messages')
  const out = fs.createWriteStream(file)
  const t0 = Date.now()
  const addr = (a) => (a ? a.host + ':' + a.port : null)
  const onmessage = IO.prototype.onmessage
  IO.prototype.onmessage = function (socket, buffer, rinfo) {
    try {
      const state = { start: 1, end: buffer.byteLength, buffer }
      const request = buffer[0] === 0x03
      const flags = c.uint.decode(state)
      const tid = c.uint16.decode(state)
      const to = peer.ipv4.decode(state)
      if (flags & 1) c.fixed32.decode(state)
      if (flags & 2) c.fixed32.decode(state)
      let command = null
      let value = null
      if (request) {
        command = c.uint.decode(state)
        if (flags & 8) c.fixed32.decode(state)
        if (flags & 16) value = c.buffer.decode(state)
      } else {
        if (flags & 4) peer.ipv4Array.decode(state)
        if (flags & 8) c.uint.decode(state)
        if (flags & 16) value = c.buffer.decode(state)
      }
      const internal = request && (flags & 4) !== 0
      if (!internal && value && (command === 0 || command === 1 || !request)) {
        let v = null
        try {
          v = c.decode(command === 1 ? m.holepunch : m.handshake, value)
        } catch {
          try {
            v = c.decode(m.holepunch, value)
          } catch {}
        }
        if (v && v.mode !== undefined) {
          out.write(JSON.stringify({
            t: Date.now() - t0, at: this._traceName || '?', sock: socket.address().port, from: addr(rinfo),
            kind: request ? 'req' : 'res', tid, to: addr(to), command, mode: v.mode, id: v.id,
            peerAddress: addr(v.peerAddress), relayAddress: addr(v.relayAddress)
          }) + '\n')
        }
      }
    } catch {}
    return onmessage.call(this, socket, buffer, rinfo)
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  if (o.watchStdin) watchStdin(() => {})
  if (o.traceFile) trace(o.traceFile)
  const bootstrap = parseBootstrap(o.bootstrap)
  const mk = () => {
    const node = new HyperDHT({ bootstrap, host: o.host, port: [0, 0], firewalled: true, ephemeral: true, quickFirewall: false })
    // loopback answers every probe: keep both peers firewalled (as behind a
    // NAT) so the connection has to holepunch through a relay
    if (o.pinFirewall) node._checkIfFirewalled = async () => true
    return node
  }

  const serverSeen = new Map() // remote public key (hex) -> resolve
  const waiters = new Map()
  async function pair(i) {
    const sn = mk()
    const cn = mk()
    sn.io._traceName = 'server' + i
    cn.io._traceName = 'client' + i
    await sn.fullyBootstrapped()
    await cn.fullyBootstrapped()
    const server = sn.createServer({ shareLocalAddress: o.shareLocalAddress }, (socket) => {
      socket.on('error', () => {})
      const k = socket.remotePublicKey.toString('hex')
      serverSeen.set(k, true)
      const w = waiters.get(k)
      if (w) w()
      socket.end()
    })
    await server.listen(HyperDHT.keyPair(Buffer.alloc(32, 7 + (i % 200))))
    return { sn, cn, server }
  }
  const shared = o.fresh ? null : await pair(0)
  emit({ event: 'ready', firewalled: shared ? [shared.sn.firewalled, shared.cn.firewalled] : null })

  const punches = {}
  const stats = { runs: 0, both: 0, clientOnly: 0, serverOnly: 0, neither: 0 }
  const times = []

  async function one(i) {
    const { sn, cn, server } = shared || (await pair(i))
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
    const socket = cn.connect(server.publicKey, { keyPair: kp, localConnection: o.localConnection, fastOpen: o.fastOpen === 'mixed' ? i % 2 === 0 : o.fastOpen })
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
    emit({ event: 'run', run: i, client, server: srv, ms, error: err, firewalled: [sn.firewalled, cn.firewalled] })
    if (!shared) {
      await server.close()
      await cn.destroy()
      await sn.destroy()
    } else {
      punches.client = cn.stats.punches
      punches.server = sn.stats.punches
    }
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
  emit({ event: 'done', ...stats, p50: p(0.5), p99: p(0.99), punches })
  if (shared) {
    await shared.server.close()
    await shared.cn.destroy()
    await shared.sn.destroy()
  }
  exit(0)
}

main().catch((e) => {
  emit({ event: 'error', ...errorInfo(e) })
  exit(1)
})
