'use strict'
// Preload (`node -r .../trace.js test/x.js`): writes every PEER_HANDSHAKE and
// PEER_HOLEPUNCH message a Node hyperdht node sends or receives to
// $LUDX_TRACE_FILE as JSON lines (time, local port, direction, peer, tid,
// mode, holepunch id, peer and relay addresses), plus {"test": name} marks.
const fs = require('fs')
const c = require('compact-encoding')
const IO = require('dht-rpc/lib/io')
const peer = require('dht-rpc/lib/peer')
const UDXSocket = require('udx-native/lib/socket')
const m = require('hyperdht/lib/messages')

const out = fs.createWriteStream(process.env.LUDX_TRACE_FILE || 'trace.jsonl')
const t0 = Date.now()
const addr = (a) => (a ? a.host + ':' + a.port : null)

function decode(buffer) {
  const state = { start: 1, end: buffer.byteLength, buffer }
  const request = buffer[0] === 0x03
  if (!request && buffer[0] !== 0x13) return null
  const flags = c.uint.decode(state)
  const tid = c.uint16.decode(state)
  const to = peer.ipv4.decode(state)
  if (flags & 1) c.fixed32.decode(state)
  if (flags & 2) c.fixed32.decode(state)
  let command = null
  let value = null
  let error = 0
  if (request) {
    command = c.uint.decode(state)
    if (flags & 8) c.fixed32.decode(state)
    if (flags & 16) value = c.buffer.decode(state)
  } else {
    if (flags & 4) peer.ipv4Array.decode(state)
    if (flags & 8) error = c.uint.decode(state)
    if (flags & 16) value = c.buffer.decode(state)
  }
  if (request && (flags & 4) !== 0) return null // dht-rpc internal command
  const r = { kind: request ? 'req' : 'res', tid, to: addr(to), command, error }
  if (request && command !== 0 && command !== 1) return null
  if (!value) return request ? null : r
  for (const [name, enc] of [['hs', m.handshake], ['hp', m.holepunch]]) {
    if (request && name !== (command === 0 ? 'hs' : 'hp')) continue
    try {
      const v = c.decode(enc, value)
      if (v.mode === undefined) continue
      Object.assign(r, { msg: name, mode: v.mode, id: v.id, peerAddress: addr(v.peerAddress), relayAddress: addr(v.relayAddress) })
      return r
    } catch {}
  }
  return request ? null : r
}

function log(dir, socket, buffer, host, port) {
  try {
    const r = decode(buffer)
    if (!r) return
    let local = null
    try {
      local = socket.address().port
    } catch {}
    out.write(JSON.stringify({ t: Date.now() - t0, dir, sock: local, peer: host + ':' + port, ...r }) + '\n')
  } catch {}
}

const onmessage = IO.prototype.onmessage
IO.prototype.onmessage = function (socket, buffer, rinfo) {
  log('in', socket, buffer, rinfo.host, rinfo.port)
  return onmessage.call(this, socket, buffer, rinfo)
}
for (const fn of ['trySend']) {
  const orig = UDXSocket.prototype[fn]
  UDXSocket.prototype[fn] = function (buffer, port, host, ttl) {
    if (buffer && buffer.byteLength > 0) log('out', this, buffer, host, port)
    return orig.apply(this, arguments)
  }
}
// raw receipts (before hyperdht's socket pool) and socket closes
const emit = UDXSocket.prototype.emit
UDXSocket.prototype.emit = function (name, a, b) {
  if (name === 'listening') {
    try {
      this._tracePort = this.address().port
    } catch {}
  } else if (name === 'message') {
    log('rx', this, a, b.host, b.port)
  } else if (name === 'close') {
    out.write(JSON.stringify({ t: Date.now() - t0, dir: 'close', sock: this._tracePort || null }) + '\n')
  }
  return emit.apply(this, arguments)
}
// why a server aborts a holepunch (the caller's line)
try {
  const Server = require(require('path').resolve('lib/server.js'))
  const abort = Server.prototype._abort
  Server.prototype._abort = function (h, error) {
    const where = (new Error().stack.split('\n')[2] || '').trim()
    const p = h && h.puncher
    out.write(JSON.stringify({ t: Date.now() - t0, dir: 'abort', error: error === undefined ? null : error, where,
      puncher: p ? { destroyed: p.destroyed, socket: p.socket ? p.socket._tracePort || null : null, firewall: p.nat && p.nat.firewall, remoteFirewall: p.remoteFirewall } : null }) + '\n')
    return abort.apply(this, arguments)
  }
} catch {}
// the client's NAT view when it commits to punching (Nat.freeze)
try {
  const Nat = require(require('path').resolve('lib/nat.js'))
  const freeze = Nat.prototype.freeze
  Nat.prototype.freeze = function () {
    const d = this.dht
    let ra = null
    try {
      ra = d.remoteAddress()
    } catch {}
    out.write(JSON.stringify({ t: Date.now() - t0, dir: 'freeze', sock: this.socket && this.socket._tracePort, firewalled: d.firewalled,
      ephemeral: d.ephemeral, bootstrapped: d.bootstrapped, natFirewall: this.firewall, addresses: this.addresses, sampled: this.sampled,
      remoteAddress: ra, dhtNat: [d.host, d.port], serverPort: d.io.serverSocket && d.io.serverSocket.address().port,
      clientPort: d.io.clientSocket && d.io.clientSocket.address().port }) + '\n')
    return freeze.apply(this, arguments)
  }
  // firewalled flips of every DHT (dht-rpc sets the property directly)
  const DHT = require(require('path').resolve('index.js'))
  const DHTRPC = Object.getPrototypeOf(DHT.prototype).constructor
  const upd = DHTRPC.prototype._updateNetworkState
  DHTRPC.prototype._updateNetworkState = async function (onlyFirewall) {
    const before = [this.firewalled, this.host, this.port]
    const r = await upd.apply(this, arguments)
    out.write(JSON.stringify({ t: Date.now() - t0, dir: 'netstate', onlyFirewall: !!onlyFirewall, result: r, before,
      after: [this.firewalled, this.host, this.port], serverPort: this.io.serverSocket.address().port, bootstrapped: this.bootstrapped }) + '\n')
    return r
  }
} catch (err) {
  out.write(JSON.stringify({ traceError: String(err) }) + '\n')
}
module.exports = { mark: (o) => out.write(JSON.stringify({ t: Date.now() - t0, ...o }) + '\n') }
