#!/usr/bin/env node
'use strict'
// One end of a timed bulk transfer over udx-native (optionally encrypted with
// @hyperswarm/secret-stream): node udx-bench.js --role send|recv [options].
// JSON lines on stdout: ready, connect, [handshake], start, done. The protocol
// is described in README.md next to this file.

const crypto = require('crypto')
const fs = require('fs')
const UDX = require('udx-native')
const { emit, exit, now, prngBytes } = require('./common')
const SecretStream = require('@hyperswarm/secret-stream')

const DEFAULTS = {
  role: 'send', // send or recv
  bytes: 200 * 1024 * 1024, // send: total bytes
  chunk: 65536, // send: bytes per write (one pre-generated buffer, written again and again)
  seed: 1, // data generator seed (the first `chunk` bytes of xorshift32 from it)
  secret: false, // wrap the stream in secret-stream (sender = Noise initiator)
  keySeed: '', // 32-byte hex seed of the key pair; '' = 32 bytes equal to the stream id
  // BLAKE2b-512 of the bytes. Sender: computed before the start. Receiver:
  // 'after' keeps the bytes (up to holdMb, then hashes as they come) and
  // hashes them once the transfer ended, so the timed part and its CPU
  // exclude hashing; 'inline' hashes while receiving; 'off'.
  hash: 'after',
  holdMb: 1024,
  id: 0, // local stream id; 0 = 1 for the sender, 2 for the receiver
  remoteId: 0, // 0 = 2 for the sender, 1 for the receiver
  host: '127.0.0.1',
  port: 0,
  remoteHost: '127.0.0.1',
  remotePort: 0, // 0 = read {"port":P} from stdin
  timeoutMs: 120000,
  watchStdin: true
}

function parseArgs(argv) {
  const o = { ...DEFAULTS }
  if (argv.length === 1 && argv[0].trim().startsWith('{')) {
    const given = JSON.parse(argv[0])
    for (const k of Object.keys(given)) {
      if (!(k in DEFAULTS)) throw new Error('unknown option ' + k)
      o[k] = given[k]
    }
    return o
  }
  for (let i = 0; i < argv.length; i++) {
    let [key, value] = argv[i].replace(/^--/, '').split('=')
    key = key.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (!argv[i].startsWith('--') || !(key in DEFAULTS)) throw new Error('unknown option ' + argv[i])
    if (value === undefined) {
      const next = argv[i + 1]
      if (typeof DEFAULTS[key] === 'boolean' && (next === undefined || next.startsWith('--'))) value = 'true'
      else value = argv[++i]
    }
    if (value === undefined) throw new Error('missing value for ' + argv[i - 1])
    if (typeof DEFAULTS[key] === 'number') o[key] = Number(value)
    else if (typeof DEFAULTS[key] === 'boolean') o[key] = value === 'true' || value === '1'
    else o[key] = value
    if (typeof o[key] === 'number' && !Number.isFinite(o[key])) throw new Error(key + ' wants a number')
  }
  return o
}

function stats(s) {
  return {
    mtu: s.mtu,
    rtt: s.rtt,
    cwnd: s.cwnd,
    rtoCount: s.rtoCount,
    retransmits: s.retransmits,
    fastRecoveries: s.fastRecoveries,
    packetsTransmitted: s.packetsTransmitted,
    packetsReceived: s.packetsReceived,
    bytesTransmitted: s.bytesTransmitted,
    bytesReceived: s.bytesReceived
  }
}

function cpu(since) {
  const d = process.cpuUsage(since)
  return { cpu_user_ms: d.user / 1000, cpu_sys_ms: d.system / 1000 }
}

function drained(stream) {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done)
      stream.off('close', done)
      resolve()
    }
    stream.on('drain', done)
    stream.on('close', done)
  })
}

// Sender: the whole timed part is write/drain; all data work happens before.
// The data is distinct per write (the xorshift32 stream cut into writes, up
// to 1 GiB of it, then the writes cycle), as the ludx end sends it: one
// block again and again lets a LuaJIT receiver intern whole-block reads.
const DISTINCT_MAX = 1024 * 1024 * 1024

// Memory of the transport: the process's RSS less the data the bench
// itself holds (the sender's blocks, the batches a receiver keeps for its
// hash), sampled every RSS_EVERY bytes, and the kernel's peak (VmHWM, reset
// when the transfer starts) less what is held at the end, which catches a
// peak between samples; the larger goes out as rssMb.
const RSS_EVERY = 4 * 1048576

function statusKb(field) {
  try {
    const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(field + ':\\s*(\\d+)'))
    return m ? Number(m[1]) : 0
  } catch {
    return 0
  }
}

function rssMeter() {
  let peak = 0
  let next = 0
  const m = {
    sample(done, held, force) {
      if (!force && done < next) return
      next = done + RSS_EVERY
      const v = process.memoryUsage.rss() - held
      if (v > peak) peak = v
    },
    // the start: VmHWM from here (what setup took does not count)
    start(held) {
      try {
        fs.writeFileSync('/proc/self/clear_refs', '5')
      } catch {}
      m.sample(0, held, true)
    },
    // the end: held is what the bench holds now (its most)
    finish(held) {
      m.sample(0, held, true)
      const v = statusKb('VmHWM') * 1024 - held
      if (v > peak) peak = v
    },
    mb: () => peak / 1048576
  }
  return m
}

async function send(stream, raw, o) {
  const full = Math.floor(o.bytes / o.chunk)
  const tail = o.bytes - full * o.chunk
  const nblocks = Math.max(1, Math.min(full, Math.ceil(DISTINCT_MAX / o.chunk)))
  const data = prngBytes(o.seed, nblocks * o.chunk + (full < nblocks ? tail : 0))
  const block = (i) => data.subarray((i % nblocks) * o.chunk, (i % nblocks + 1) * o.chunk)
  const last = tail ? (full < nblocks ? data.subarray(nblocks * o.chunk) : block(full).subarray(0, tail)) : null
  let hash = null
  if (o.hash !== 'off') {
    const h = crypto.createHash('blake2b512')
    for (let i = 0; i < full; i++) h.update(block(i))
    if (last) h.update(last)
    hash = h.digest('hex')
  }
  const closed = new Promise((resolve) => raw.once('close', resolve))
  const rss = rssMeter()
  rss.start(data.byteLength)
  const cpu0 = process.cpuUsage()
  const t0 = now()
  emit({ event: 'start', t: t0 })
  for (let i = 0; i < full; i++) {
    if (!stream.write(block(i))) await drained(stream)
    if (stream.destroying) break
    rss.sample((i + 1) * o.chunk, data.byteLength)
  }
  if (last && !stream.destroying) stream.write(last)
  await stream.flush() // every byte acked
  const t1 = now()
  const c = cpu(cpu0)
  rss.finish(data.byteLength)
  stream.end()
  stream.resume()
  await closed
  return { bytes: o.bytes, hash, t_start: t0, t_end: t1, ms: t1 - t0, ...c, rssMb: rss.mb() }
}

// Receiver hashing. Chunks arrive one packet at a time (~1.4 KB), so they
// are first copied into 1 MiB batches: one hash call per MiB, not per packet.
// 'inline' hashes each full batch at once; 'after' keeps the batches and
// hashes them once the transfer has ended (memory = bytes received, up to
// `limit`; past it the kept batches are hashed and it goes on inline).
const BATCH = 1048576

class BatchHasher {
  constructor(keep, limit) {
    this.h = crypto.createHash('blake2b512')
    this.keep = keep
    this.limit = limit
    this.kept = []
    this.batch = Buffer.allocUnsafe(BATCH)
    this.used = 0
  }

  update(data) {
    let off = 0
    while (off < data.byteLength) {
      const n = Math.min(BATCH - this.used, data.byteLength - off)
      data.copy(this.batch, this.used, off, off + n)
      this.used += n
      off += n
      if (this.used === BATCH) this.flush()
    }
  }

  flush() {
    const full = this.batch.subarray(0, this.used)
    if (this.keep) {
      this.kept.push(full)
      this.batch = Buffer.allocUnsafe(BATCH)
      if (this.kept.length * BATCH >= this.limit) {
        for (const b of this.kept) this.h.update(b)
        this.kept = []
        this.keep = false
      }
    } else {
      this.h.update(full)
    }
    this.used = 0
  }

  // bytes held for the hash (kept batches and the one being filled)
  held() {
    return this.keep ? this.kept.length * BATCH + BATCH : 0
  }

  digest() {
    if (this.used > 0) this.flush()
    for (const b of this.kept) this.h.update(b)
    this.kept = []
    return this.h.digest('hex')
  }
}

function recv(stream, raw, o) {
  return new Promise((resolve) => {
    const h = o.hash === 'off' ? null : new BatchHasher(o.hash === 'after', o.holdMb * 1048576)
    const closed = new Promise((resolve) => raw.once('close', resolve))
    const cpu0 = process.cpuUsage()
    const t0 = now()
    let first = null
    let last = null // when the last byte came (the END follows the sender's flush)
    let bytes = 0
    const rss = rssMeter()
    rss.start(0)
    stream.on('data', (data) => {
      if (first === null) {
        first = now()
        emit({ event: 'start', t: first })
      }
      bytes += data.byteLength
      last = now()
      if (h) h.update(data)
      rss.sample(bytes, h ? h.held() : 0)
    })
    stream.on('end', async () => {
      const t1 = now()
      const c = cpu(cpu0)
      rss.finish(h ? h.held() : 0)
      stream.end()
      await closed
      resolve({
        bytes,
        hash: h ? h.digest() : null,
        t_start: first !== null ? first : t0,
        t_connect: t0,
        t_end: t1,
        t_last: last !== null ? last : t1,
        ms: t1 - (first !== null ? first : t0),
        ...c,
        rssMb: rss.mb()
      })
    })
  })
}

function main() {
  const o = parseArgs(process.argv.slice(2))
  if (o.role !== 'send' && o.role !== 'recv') throw new Error('role must be send or recv')
  if (!(o.chunk > 0)) throw new Error('chunk must be > 0')
  if (!['inline', 'after', 'off'].includes(o.hash)) throw new Error('hash must be inline, after or off')
  const sender = o.role === 'send'
  const id = o.id || (sender ? 1 : 2)
  const remoteId = o.remoteId || (sender ? 2 : 1)

  const udx = new UDX()
  const socket = udx.createSocket()
  socket.bind(o.port, o.host)
  const raw = udx.createStream(id)
  let error = null
  raw.on('error', (err) => {
    if (error === null) error = err
  })

  setTimeout(() => {
    emit({ event: 'error', code: 'ETIMEDOUT', message: 'gave up after ' + o.timeoutMs + ' ms' })
    exit(1)
  }, o.timeoutMs).unref()

  let connected = false
  const connect = (port, host) => {
    if (connected) return
    connected = true
    raw.connect(socket, remoteId, port, host || o.remoteHost)
    emit({ event: 'connect', remoteId, remotePort: port })
    let stream = raw
    if (o.secret) {
      const seed = o.keySeed ? Buffer.from(o.keySeed, 'hex') : Buffer.alloc(32, id & 0xff)
      stream = new SecretStream(sender, raw, { keyPair: SecretStream.keyPair(seed) })
      stream.on('error', (err) => {
        if (error === null) error = err
      })
    }
    const go = () => (sender ? send(stream, raw, o) : recv(stream, raw, o))
    const ready = o.secret
      ? new Promise((resolve) =>
          stream.once('connect', () => {
            emit({ event: 'handshake', handshakeHash: stream.handshakeHash.toString('hex') })
            resolve()
          })
        )
      : Promise.resolve()
    ready
      .then(go)
      .then((r) => {
        // udx-native keeps no TIME_WAIT: when the sender's ack of our END is
        // lost, its stream is already gone and our END goes unanswered until
        // ETIMEDOUT. Every byte had arrived ('end' was seen, the harness still
        // checks count and hash): a close fault of the peers, not a failed
        // transfer. Reported as closeError.
        let closeError = null
        if (!sender && error && error.code === 'ETIMEDOUT') {
          closeError = error.code
          error = null
        }
        emit({
          event: 'done',
          role: o.role,
          secret: o.secret,
          ...r,
          mb_per_s: r.bytes / 1e6 / (r.ms / 1000),
          retransmits: raw.retransmits,
          rtoCount: raw.rtoCount,
          error: error ? error.code || 'ERROR' : null,
          closeError,
          stats: stats(raw)
        })
        exit(error ? 1 : 0)
      })
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
        try {
          const m = JSON.parse(line)
          if (typeof m.port === 'number') connect(m.port, m.host)
        } catch {
          process.stderr.write('bad stdin line: ' + line + '\n')
        }
      }
    })
    process.stdin.on('end', () => {
      process.stderr.write('stdin closed, exiting\n')
      exit(3)
    })
  }

  const a = socket.address()
  emit({ event: 'ready', host: a.host, port: a.port, id })
  if (o.remotePort > 0) connect(o.remotePort, o.remoteHost)
}

try {
  main()
} catch (err) {
  emit({ event: 'error', code: 'EINVAL', message: err.message })
  exit(2)
}
