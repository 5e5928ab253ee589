#!/usr/bin/env node
'use strict'
// A Node hyperswarm peer driven by JSON commands on stdin:
//   node swarm-peer.js '{"size":5}'                         its own testnet (node 1 is the bootstrap) + a swarm on it
//   node swarm-peer.js '{"bootstrap":"127.0.0.1:PORT"}'     a swarm on a given DHT (e.g. a ludx testnet)
// Prints {"event":"ready","bootstrap":[...],"publicKey":hex}, then one line per
// command and per connection event. The command set is in ../README.md.
//
// Each connection: with bytes >= 0 it sends `bytes` bytes of the test data
// (dataSeed), ends, reads to the end and prints "done" with both hashes;
// with bytes < 0 it holds the connection open and only reads. With mux > 0
// it speaks protomux instead: see muxConnection.

const Hyperswarm = require('hyperswarm')
const HyperDHT = require('hyperdht')
const createTestnet = require('@hyperswarm/testnet')
const Protomux = require('protomux')
const c = require('compact-encoding')
const { parseArgs, emit, exit, errorInfo, watchStdin, Prng, Counter, hexKey } = require('./common')

const DEFAULTS = {
  size: 5, // persistent nodes of our own testnet (when no bootstrap is given)
  bootstrap: '', // host:port[,host:port...]
  host: '127.0.0.1',
  seed: '', // 32-byte key seed, hex ('' = random)
  bytes: -1,
  dataSeed: 1,
  backoffs: '', // "s,m,l,x" ms, for quick reconnects in tests
  mux: 0, // > 0: a protomux channel per connection, this many messages of each type each way
  muxClose: false, // we close the channel once the remote's messages all came
  watchStdin: true
}

const ANY_PORT = [0, 0]
const o = parseArgs(process.argv.slice(2), DEFAULTS)
let swarm = null
let testnet = null
const discoveries = new Map()

function parseBootstrap(list) {
  return list.split(',').map((s) => {
    const i = s.lastIndexOf(':')
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) }
  })
}

// Protomux mode: one channel "swarm-interop/1" (handshake a string, message
// types string and uint). Once open it sends mux messages of each type,
// interleaved ("node line I" then I, for I = 1..mux), prints every message
// received as {"event":"mux-message","type","value"} (0-based type), and
// {"event":"mux-close","isRemote","received"} when the channel closes; with
// muxClose it closes the channel after the remote's 2*mux messages.
function muxConnection(conn, remote) {
  const mux = Protomux.from(conn)
  let received = 0
  const got = () => {
    received++
    if (o.muxClose && received === 2 * o.mux) channel.close()
  }
  const channel = mux.createChannel({
    protocol: 'swarm-interop/1',
    handshake: c.string,
    messages: [
      { encoding: c.string, onmessage: (value) => { emit({ event: 'mux-message', type: 0, value }); got() } },
      { encoding: c.uint, onmessage: (value) => { emit({ event: 'mux-message', type: 1, value }); got() } }
    ],
    onopen(handshake) {
      emit({ event: 'mux-open', remotePublicKey: remote, handshake })
      for (let i = 1; i <= o.mux; i++) {
        channel.messages[0].send('node line ' + i)
        channel.messages[1].send(i)
      }
    },
    onclose(isRemote) {
      emit({ event: 'mux-close', remotePublicKey: remote, isRemote, received })
    }
  })
  channel.open('node hello')
}

function onConnection(conn, info) {
  const remote = conn.remotePublicKey.toString('hex')
  emit({ event: 'connection', remotePublicKey: remote, isInitiator: conn.isInitiator, client: info.client })
  conn.on('error', (err) => emit({ event: 'conn-error', remotePublicKey: remote, expected: true, ...errorInfo(err) }))
  conn.on('close', () => emit({ event: 'close', remotePublicKey: remote }))
  if (o.mux > 0) return muxConnection(conn, remote)
  const got = new Counter()
  conn.on('data', (buf) => got.update(buf))
  if (o.bytes < 0) return
  const sent = new Counter()
  const prng = new Prng(o.dataSeed)
  let left = o.bytes
  while (left > 0) {
    const chunk = prng.bytes(Math.min(65536, left))
    sent.update(chunk)
    conn.write(chunk)
    left -= chunk.length
  }
  conn.end()
  conn.on('end', () => {
    emit({
      event: 'done',
      remotePublicKey: remote,
      sent: sent.bytes,
      sentHash: sent.digest(),
      received: got.bytes,
      receivedHash: got.digest()
    })
  })
}

const COMMANDS = {
  async join(cmd) {
    const topic = hexKey(cmd.topic, 32, 'topic')
    const d = swarm.join(topic, { server: cmd.server !== false, client: cmd.client !== false })
    discoveries.set(cmd.topic, d)
    await d.flushed()
    return { event: 'joined' }
  },
  async refresh(cmd) {
    const d = discoveries.get(cmd.topic)
    if (!d) throw new Error('not joined')
    await d.refresh({ server: cmd.server !== false, client: cmd.client !== false })
    return { event: 'refreshed' }
  },
  async flush() {
    await swarm.flush()
    return { event: 'flushed' }
  },
  async leave(cmd) {
    await swarm.leave(hexKey(cmd.topic, 32, 'topic'))
    return { event: 'left' }
  },
  async status() {
    return {
      event: 'status',
      connections: [...swarm.connections].map((c) => ({
        remotePublicKey: c.remotePublicKey.toString('hex'),
        handshakeHash: c.handshakeHash ? c.handshakeHash.toString('hex') : null,
        isInitiator: c.isInitiator
      })),
      peers: [...swarm.peers.keys()]
    }
  },
  async destroy() {
    await swarm.destroy()
    return { event: 'destroyed' }
  }
}

async function main() {
  let bootstrap
  if (o.bootstrap) {
    bootstrap = parseBootstrap(o.bootstrap)
  } else {
    testnet = await createTestnet(0, { host: o.host })
    for (let i = 0; i < o.size; i++) {
      const node = new HyperDHT({
        ephemeral: false,
        firewalled: false,
        bootstrap: testnet.bootstrap,
        port: ANY_PORT,
        host: o.host
      })
      await node.fullyBootstrapped()
      if (testnet.bootstrap.length === 0) testnet.bootstrap.push({ host: o.host, port: node.address().port })
      testnet.nodes.push(node)
    }
    bootstrap = testnet.bootstrap
  }
  const dht = new HyperDHT({ bootstrap, port: ANY_PORT, host: o.host, firewalled: false, ephemeral: true })
  await dht.fullyBootstrapped()
  const keyPair = HyperDHT.keyPair(o.seed ? hexKey(o.seed, 32, 'seed') : undefined)
  const sopts = { keyPair, dht }
  if (o.backoffs) sopts.backoffs = o.backoffs.split(',').map(Number)
  swarm = new Hyperswarm(sopts)
  swarm.on('connection', onConnection)
  emit({ event: 'ready', bootstrap, publicKey: keyPair.publicKey.toString('hex') })

  watchStdin(async (cmd) => {
    const fn = COMMANDS[cmd.cmd]
    try {
      if (!fn) throw new Error('unknown command ' + cmd.cmd)
      emit({ req: cmd.req, ...(await fn(cmd)) })
    } catch (err) {
      emit({ event: 'error', req: cmd.req, ...errorInfo(err) })
    }
  }, o.watchStdin)
}

main().catch((err) => {
  emit({ event: 'error', ...errorInfo(err) })
  exit(1)
})
