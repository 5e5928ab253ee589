'use strict'
// Shared pieces of the Node peers: argument parsing, JSON-line output, the
// stdin watchdog, the deterministic data generator and the byte hasher.
// The protocol each peer speaks is documented in ../README.md.

const crypto = require('crypto')

// Options come either as one JSON object argument ('{"mode":"send"}') or as
// --key value / --key=value pairs. Keys are camelCased (--write-size ->
// writeSize) and typed after the default's type. Unknown keys are an error.
function parseArgs(argv, defaults) {
  const opts = { ...defaults }
  if (argv.length === 1 && argv[0].trim().startsWith('{')) {
    const given = JSON.parse(argv[0])
    for (const k of Object.keys(given)) {
      if (!(k in defaults)) throw new Error('unknown option ' + k)
      opts[k] = given[k]
    }
    return opts
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) throw new Error('unexpected argument ' + a)
    let key = a.slice(2)
    let value = null
    const eq = key.indexOf('=')
    if (eq !== -1) {
      value = key.slice(eq + 1)
      key = key.slice(0, eq)
    }
    key = key.replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    if (!(key in defaults)) throw new Error('unknown option --' + a.slice(2).split('=')[0])
    const def = defaults[key]
    if (value === null) {
      const next = argv[i + 1]
      if (typeof def === 'boolean' && (next === undefined || next.startsWith('--'))) {
        value = 'true'
      } else {
        if (next === undefined) throw new Error('missing value for --' + a.slice(2))
        value = next
        i++
      }
    }
    opts[key] = convert(value, def, key)
  }
  return opts
}

function convert(value, def, key) {
  if (typeof def === 'number') {
    const n = Number(value)
    if (!Number.isFinite(n)) throw new Error('option ' + key + ' wants a number')
    return n
  }
  if (typeof def === 'boolean') {
    if (value === 'true' || value === '1') return true
    if (value === 'false' || value === '0') return false
    throw new Error('option ' + key + ' wants true or false')
  }
  return value
}

// One JSON object per line on stdout. Pipes are synchronous on Linux, so a
// line written before process.exit() is not lost.
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function exit(code) {
  process.stdout.write('', () => process.exit(code))
}

function errorInfo(err) {
  return {
    code: (err && err.code) || 'ERROR',
    message: (err && err.message) || String(err)
  }
}

// Calls onLine(obj) for each JSON line on stdin; when stdin closes the
// process exits (a parent that dies never leaves a peer running).
// watch=false: stdin is not read at all (for manual runs with </dev/null).
function watchStdin(onLine, watch = true) {
  if (!watch) return
  let pending = ''
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', (chunk) => {
    pending += chunk
    let nl
    while ((nl = pending.indexOf('\n')) !== -1) {
      const line = pending.slice(0, nl).trim()
      pending = pending.slice(nl + 1)
      if (line === '') continue
      let obj
      try {
        obj = JSON.parse(line)
      } catch (err) {
        process.stderr.write('bad stdin line: ' + line + '\n')
        continue
      }
      onLine(obj)
    }
  })
  process.stdin.on('end', () => {
    process.stderr.write('stdin closed, exiting\n')
    exit(3)
  })
}

// The data every peer sends: the byte stream of xorshift32 (x ^= x << 13;
// x ^= x >> 17; x ^= x << 5, on uint32) from state `seed` (0 is replaced by
// 0x9e3779b9), each output word written little-endian. Chunk boundaries do
// not change the stream.
class Prng {
  constructor(seed) {
    this.x = seed >>> 0 || 0x9e3779b9
    this.word = Buffer.alloc(4)
    this.used = 4
  }

  next() {
    let x = this.x
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    this.x = x >>> 0
    return this.x
  }

  fill(out) {
    const n = out.length
    let i = 0
    while (i < n && this.used < 4) out[i++] = this.word[this.used++]
    while (n - i >= 4) {
      const w = this.next()
      out[i] = w & 0xff
      out[i + 1] = (w >>> 8) & 0xff
      out[i + 2] = (w >>> 16) & 0xff
      out[i + 3] = w >>> 24
      i += 4
    }
    if (i < n) {
      this.word.writeUInt32LE(this.next(), 0)
      this.used = 0
      while (i < n) out[i++] = this.word[this.used++]
    }
    return out
  }

  bytes(n) {
    return this.fill(Buffer.allocUnsafe(n))
  }
}

// BLAKE2b-512 of every byte, hex (libsodium crypto_generichash with 64 bytes).
class Counter {
  constructor() {
    this.bytes = 0
    this.h = crypto.createHash('blake2b512')
    this.hex = null
  }

  update(buf) {
    this.bytes += buf.length
    this.h.update(buf)
  }

  digest() {
    if (this.hex === null) this.hex = this.h.digest('hex')
    return this.hex
  }
}

function hashOf(buf) {
  return crypto.createHash('blake2b512').update(buf).digest('hex')
}

function now() {
  return performance.timeOrigin + performance.now()
}

function cpuSince(start) {
  const d = process.cpuUsage(start)
  return { cpu_user_ms: d.user / 1000, cpu_sys_ms: d.system / 1000 }
}

function udxStats(s) {
  return {
    mtu: s.mtu,
    rtt: s.rtt,
    cwnd: s.cwnd,
    inflight: s.inflight,
    rtoCount: s.rtoCount,
    retransmits: s.retransmits,
    fastRecoveries: s.fastRecoveries,
    bbrState: s.bbrState,
    bbrBandwidth: s.bbrBandwidth,
    bytesTransmitted: s.bytesTransmitted,
    packetsTransmitted: s.packetsTransmitted,
    bytesReceived: s.bytesReceived,
    packetsReceived: s.packetsReceived
  }
}

function hexKey(hex, len, name) {
  if (typeof hex !== 'string' || !/^[0-9a-fA-F]*$/.test(hex) || hex.length !== len * 2) {
    throw new Error(name + ' must be ' + len + ' bytes of hex')
  }
  return Buffer.from(hex, 'hex')
}

module.exports = {
  parseArgs,
  emit,
  exit,
  errorInfo,
  watchStdin,
  Prng,
  Counter,
  hashOf,
  now,
  cpuSince,
  udxStats,
  hexKey
}
