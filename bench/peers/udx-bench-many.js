#!/usr/bin/env node
'use strict'
// One end of a timed transfer over N concurrent udx-native streams sharing
// one socket: node udx-bench-many.js '{"role":"send","streams":100,...}'.
// The lines of udx-bench.js (ready, connect, start, done). Stream i (from 0)
// is id 1+2i on the sender and 2+2i on the receiver; each carries bytes/N.
// The hash is BLAKE2b-512 of the per-stream BLAKE2b-512 hex digests in
// stream order, so it matches only if every stream delivered its bytes.

const crypto = require('crypto')
const UDX = require('udx-native')
const { emit, exit, now, prngBytes } = require('./common')

const DEFAULTS = {
  role: 'send',
  bytes: 100 * 1024 * 1024,
  chunk: 65536,
  seed: 1,
  streams: 100,
  hash: 'after',
  host: '127.0.0.1',
  port: 0,
  remoteHost: '127.0.0.1',
  remotePort: 0,
  timeoutMs: 120000,
  watchStdin: true
}

function combine(hashes) {
  const h = crypto.createHash('blake2b512')
  for (const x of hashes) h.update(x)
  return h.digest('hex')
}

function parse(argv) {
  const o = { ...DEFAULTS }
  if (argv.length === 1 && argv[0].trim().startsWith('{')) {
    const given = JSON.parse(argv[0])
    for (const k of Object.keys(given)) {
      if (!(k in DEFAULTS)) throw new Error('unknown option ' + k)
      o[k] = given[k]
    }
  } else if (argv.length > 0) {
    throw new Error('options are one JSON object')
  }
  return o
}

function main() {
  const o = parse(process.argv.slice(2))
  const sender = o.role === 'send'
  if (!sender && o.role !== 'recv') throw new Error('role must be send or recv')
  const n = o.streams
  const per = Math.floor(o.bytes / n)
  const udx = new UDX()
  const socket = udx.createSocket()
  socket.bind(o.port, o.host)
  const streams = []
  for (let i = 0; i < n; i++) streams.push(udx.createStream(sender ? 1 + 2 * i : 2 + 2 * i))
  let error = null
  for (const s of streams) s.on('error', (err) => { if (error === null) error = err })
  setTimeout(() => {
    emit({ event: 'error', code: 'ETIMEDOUT', message: 'gave up after ' + o.timeoutMs + ' ms' })
    exit(1)
  }, o.timeoutMs).unref()

  let connected = false
  const connect = async (port, host) => {
    if (connected) return
    connected = true
    streams.forEach((s, i) => s.connect(socket, sender ? 2 + 2 * i : 1 + 2 * i, port, host || o.remoteHost))
    emit({ event: 'connect', remotePort: port, streams: n })
    const closed = Promise.all(streams.map((s) => new Promise((resolve) => s.once('close', resolve))))
    const cpu0 = process.cpuUsage()
    const t0 = now()
    let result
    if (sender) {
      const buf = prngBytes(o.seed, o.chunk)
      const h = crypto.createHash('blake2b512')
      const full = Math.floor(per / o.chunk)
      const tail = per - full * o.chunk
      for (let i = 0; i < full; i++) h.update(buf)
      if (tail) h.update(buf.subarray(0, tail))
      const one = h.digest('hex')
      emit({ event: 'start', t: t0 })
      await Promise.all(streams.map(async (s) => {
        for (let i = 0; i < full; i++) {
          if (!s.write(buf)) await new Promise((resolve) => { s.once('drain', resolve); s.once('close', resolve) })
        }
        if (tail) s.write(buf.subarray(0, tail))
        await s.flush()
      }))
      const t1 = now()
      const c = process.cpuUsage(cpu0)
      for (const s of streams) { s.end(); s.resume() }
      await closed
      result = { bytes: per * n, hash: combine(streams.map(() => one)), t_start: t0, t_end: t1, cpu_user_ms: c.user / 1000, cpu_sys_ms: c.system / 1000 }
    } else {
      let first = null
      let bytes = 0
      let t1 = null
      let last = null // when the last byte came (the ENDs follow the senders' flushes)
      let c = null
      const kept = streams.map(() => [])
      let ended = 0
      await new Promise((resolve) => {
        streams.forEach((s, i) => {
          s.on('data', (d) => {
            if (first === null) { first = now(); emit({ event: 'start', t: first }) }
            bytes += d.byteLength
            last = now()
            if (o.hash !== 'off') kept[i].push(d)
          })
          s.on('end', () => {
            s.end()
            if (++ended === n) { t1 = now(); c = process.cpuUsage(cpu0); resolve() }
          })
        })
      })
      await closed
      const hashes = kept.map((list) => {
        const h = crypto.createHash('blake2b512')
        for (const d of list) h.update(d)
        return h.digest('hex')
      })
      result = { bytes, hash: o.hash === 'off' ? null : combine(hashes), t_start: first || t0, t_end: t1, t_last: last || t1, cpu_user_ms: c.user / 1000, cpu_sys_ms: c.system / 1000 }
    }
    let retransmits = 0
    let rtoCount = 0
    for (const s of streams) { retransmits += s.retransmits; rtoCount += s.rtoCount }
    // every stream ended (all bytes came; the harness checks count and hash):
    // an ETIMEDOUT now is our END unanswered by a sender whose stream closed
    // when its ack was lost (udx-native keeps no TIME_WAIT), not a failed transfer
    let closeError = null
    if (o.role !== 'send' && error && error.code === 'ETIMEDOUT') {
      closeError = error.code
      error = null
    }
    emit({ event: 'done', role: o.role, streams: n, ...result, ms: result.t_end - result.t_start, retransmits, rtoCount, error: error ? error.code || 'ERROR' : null, closeError })
    exit(error ? 1 : 0)
  }

  if (o.watchStdin) {
    let pending = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', (d) => {
      pending += d
      let nl
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl).trim()
        pending = pending.slice(nl + 1)
        if (!line) continue
        const m = JSON.parse(line)
        if (typeof m.port === 'number') connect(m.port, m.host)
      }
    })
    process.stdin.on('end', () => exit(3))
  }
  const a = socket.address()
  emit({ event: 'ready', host: a.host, port: a.port, streams: n })
  if (o.remotePort > 0) connect(o.remotePort, o.remoteHost)
}

try {
  main()
} catch (err) {
  emit({ event: 'error', code: 'EINVAL', message: err.message })
  exit(2)
}
