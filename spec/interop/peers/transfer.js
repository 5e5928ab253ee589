'use strict'
// The transfer modes shared by udx-peer.js and secretstream-peer.js. They run
// over any streamx duplex that also has send()/'message' (a udx-native stream
// or a SecretStream on top of one). See ../README.md for the protocol.

const { emit: emitLine, errorInfo, Prng, Counter, hashOf, now, cpuSince } = require('./common')

const MODES = ['send', 'recv', 'both', 'echo', 'messages', 'destroy-after']

// The options of run(), with their defaults.
const TRANSFER_DEFAULTS = {
  mode: 'recv',
  bytes: 1048576, // send / both: bytes to send
  seed: 1, // data generator seed (xorshift32)
  writeSize: 65536, // bytes per write(); 0 = one write of all bytes
  after: 65536, // destroy-after: destroy once this many bytes are sent / received
  role: 'recv', // destroy-after: 'send' writes then destroys, 'recv' reads then destroys
  count: 10, // messages: how many to send
  size: 100, // messages: bytes per message
  expect: -1, // messages: how many to wait for (-1 = count)
  echoMessages: false, // messages: send every received message back
  waitMs: 2000, // messages: end this long after the last send even if some are missing
  expectError: '' // an error code that counts as success (e.g. ECONNRESET)
}

// Writes opts.bytes of the seed's data in opts.writeSize pieces (0 = one
// write), waiting for 'drain' when write() says so. Resolves when all
// writes are queued.
async function writeData(stream, total, o, counter) {
  const prng = new Prng(o.seed)
  const size = o.writeSize > 0 ? o.writeSize : total
  let left = total
  while (left > 0) {
    const n = Math.min(size, left)
    const chunk = prng.bytes(n)
    counter.update(chunk)
    left -= n
    if (!stream.write(chunk)) await drained(stream)
    if (stream.destroying) return
  }
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

// Runs opts.mode on `stream` and resolves with the summary at 'close'.
// hooks.stats() gives the udx stats; hooks.flush() resolves once all writes
// are acked; hooks.send(buf) sends a MESSAGE; hooks.closed (optional) is a
// promise for the close of the udx stream underneath.
function run(stream, o, hooks) {
  const tag = hooks.tag || {} // merged into every line (e.g. {conn: 3})
  const emit = (obj) => emitLine({ ...obj, ...tag })
  const sent = new Counter()
  const received = new Counter()
  const cpu0 = process.cpuUsage()
  const t0 = now()
  let tFirst = null
  let tEnd = null
  let error = null
  let messagesSent = 0
  let messagesReceived = 0
  let lastStats = null

  return new Promise((resolve) => {
    stream.on('error', (err) => {
      if (error === null) error = err
      emit({ event: 'error', ...errorInfo(err), expected: o.expectError !== '' && o.expectError === err.code })
    })

    stream.on('close', async () => {
      const t1 = now()
      // a SecretStream closes before its raw stream has flushed: wait for it
      if (hooks.closed) await hooks.closed
      const stats = hooks.stats ? hooks.stats() : null
      const primary = o.mode === 'send' || (o.mode === 'destroy-after' && o.role === 'send') ? sent : received
      resolve({
        event: 'done',
        ...tag,
        mode: o.mode,
        bytes: primary.bytes,
        hash: primary.digest(),
        sent: sent.bytes,
        sentHash: sent.digest(),
        received: received.bytes,
        receivedHash: received.digest(),
        messagesSent,
        messagesReceived,
        ms: t1 - t0,
        t_start: t0,
        t_first_byte: tFirst,
        t_end: tEnd !== null ? tEnd : t1,
        ...cpuSince(cpu0),
        error: error ? error.code || 'ERROR' : null,
        stats: stats || lastStats
      })
    })

    const onData = (chunk, then) => {
      if (tFirst === null) tFirst = now()
      received.update(chunk)
      if (then) then(chunk)
    }

    switch (o.mode) {
      case 'send':
        stream.on('data', (c) => onData(c))
        stream.on('end', () => (tEnd = now()))
        writeData(stream, o.bytes, o, sent).then(() => stream.end())
        return

      case 'recv':
        stream.on('data', (c) => onData(c))
        stream.on('end', () => {
          tEnd = now()
          stream.end()
        })
        return

      case 'both':
        stream.on('data', (c) => onData(c))
        stream.on('end', () => (tEnd = now()))
        writeData(stream, o.bytes, o, sent).then(() => stream.end())
        return

      case 'echo':
        stream.on('data', (c) =>
          onData(c, () => {
            sent.update(c)
            if (!stream.write(c)) {
              stream.pause()
              drained(stream).then(() => stream.resume())
            }
          })
        )
        stream.on('end', () => {
          tEnd = now()
          stream.end()
        })
        return

      case 'destroy-after':
        if (o.role === 'send') {
          stream.on('data', (c) => onData(c))
          writeData(stream, o.after, o, sent)
            .then(() => (hooks.flush ? hooks.flush() : null))
            .then(() => {
              emit({ event: 'destroying', sent: sent.bytes })
              lastStats = hooks.stats ? hooks.stats() : null
              stream.destroy()
            })
        } else {
          let destroyed = false
          stream.on('data', (c) =>
            onData(c, () => {
              if (!destroyed && received.bytes >= o.after) {
                destroyed = true
                emit({ event: 'destroying', received: received.bytes })
                lastStats = hooks.stats ? hooks.stats() : null
                stream.destroy()
              }
            })
          )
        }
        return

      case 'messages':
        runMessages(stream, o, hooks, emit, sent, received, {
          sent: () => messagesSent++,
          received: () => messagesReceived++,
          counts: () => [messagesSent, messagesReceived]
        })
        return

      default:
        throw new Error('unknown mode ' + o.mode)
    }
  })
}

// messages: a one-byte barrier on the stream first (each side writes 0x01
// and waits for the remote's byte, so both ends are connected and past any
// handshake), then `count` MESSAGE datagrams of `size` bytes from the seed's
// data; every received one is reported (and sent back if echoMessages).
// The stream is ended once all are sent and `expect` were received, or
// waitMs after the last send.
function runMessages(stream, o, hooks, emit, sent, received, tally) {
  const expect = o.expect >= 0 ? o.expect : o.count
  let synced = false
  let sending = false
  let doneSending = false
  let ended = false
  let timer = null

  const finish = () => {
    if (ended) return
    ended = true
    if (timer) clearTimeout(timer)
    stream.end()
  }
  const check = () => {
    if (doneSending && tally.counts()[1] >= expect) finish()
  }

  stream.on('message', (buf) => {
    tally.received()
    const line = { event: 'message', len: buf.length, hash: hashOf(buf) }
    if (buf.length <= 256) line.hex = buf.toString('hex')
    emit(line)
    if (o.echoMessages) hooks.send(Buffer.from(buf))
    check()
  })

  stream.on('data', (c) => {
    received.update(c)
    if (!synced && received.bytes >= 1) {
      synced = true
      startSending()
    }
  })
  stream.on('end', () => {
    if (!ended) finish()
  })

  const sync = Buffer.from([1])
  sent.update(sync)
  stream.write(sync)

  async function startSending() {
    if (sending) return
    sending = true
    const prng = new Prng(o.seed)
    for (let i = 0; i < o.count; i++) {
      await hooks.send(prng.bytes(o.size))
      tally.sent()
    }
    doneSending = true
    emit({ event: 'messages-sent', count: o.count })
    timer = setTimeout(finish, o.waitMs)
    check()
  }
}

module.exports = { run, MODES, TRANSFER_DEFAULTS }
