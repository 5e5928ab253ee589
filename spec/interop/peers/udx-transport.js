'use strict'
// The udx-native setup shared by the stream peers: bind a socket, create the
// stream, print "ready", learn the remote (from the arguments or one JSON
// line on stdin), connect, and exit on timeout or when stdin closes.

const UDX = require('udx-native')
const { emit, exit, errorInfo, watchStdin, udxStats } = require('./common')

const TRANSPORT_DEFAULTS = {
  host: '127.0.0.1', // local bind address
  port: 0, // local port (0 = any)
  id: 1, // local stream id
  remoteId: 2, // remote stream id
  remoteHost: '127.0.0.1',
  remotePort: 0, // 0 = read {"port":..} from stdin
  seq: 0, // initial send seq (createStream opts.seq; 0 = default)
  ack: 0, // initial ack (connect opts.ack; 0 = default)
  keepalive: 0, // udx stream.setKeepalive(ms); 0 = off
  timeoutMs: 60000, // give up (error ETIMEDOUT) after this long
  watchStdin: true // exit when stdin closes
}

// onConnect(stream, udx, socket) runs once the stream is connected.
function openUdx(o, onConnect) {
  const udx = new UDX()
  const socket = udx.createSocket()
  socket.bind(o.port, o.host)
  const stream = udx.createStream(o.id, o.seq ? { seq: o.seq >>> 0 } : {})
  let connected = false

  const timer = setTimeout(() => {
    emit({ event: 'error', code: 'ETIMEDOUT', message: 'peer gave up after ' + o.timeoutMs + ' ms' })
    exit(1)
  }, o.timeoutMs)
  timer.unref()

  const connect = (remote) => {
    if (connected) return
    connected = true
    const rid = remote.id !== undefined ? remote.id : o.remoteId
    const rhost = remote.host || o.remoteHost
    stream.connect(socket, rid >>> 0, remote.port, rhost, o.ack ? { ack: o.ack >>> 0 } : {})
    if (o.keepalive > 0) stream.setKeepalive(o.keepalive)
    emit({ event: 'connect', remoteId: rid, remoteHost: rhost, remotePort: remote.port })
    onConnect(stream, udx, socket)
  }

  watchStdin((line) => {
    if (!connected && typeof line.port === 'number') connect(line)
  }, o.watchStdin)

  const addr = socket.address()
  emit({ event: 'ready', host: addr.host, port: addr.port, id: o.id })
  if (o.remotePort > 0) connect({ port: o.remotePort })

  return { udx, socket, stream, stats: () => udxStats(stream) }
}

// Reports the summary and exits: 0 unless an error other than the expected
// one ended the stream.
function finish(summary, o) {
  emit(summary)
  const bad = summary.error !== null && summary.error !== o.expectError
  exit(bad ? 1 : 0)
}

// A bad argument or a crash before the transfer started: exit status 2.
function fail(err) {
  emit({ event: 'error', code: (err && err.code) || 'EINVAL', message: errorInfo(err).message })
  process.stderr.write((err && err.stack) || String(err))
  process.stderr.write('\n')
  exit(2)
}

module.exports = { TRANSPORT_DEFAULTS, openUdx, finish, fail }
