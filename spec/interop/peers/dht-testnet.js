#!/usr/bin/env node
'use strict'
// A local HyperDHT (@hyperswarm/testnet) driven by JSON commands on stdin:
//   node dht-testnet.js [--size 5]                    its own testnet; node 1 is the bootstrap
//   node dht-testnet.js --bootstrap 127.0.0.1:PORT    join a given bootstrap (e.g. a ludx node)
// Prints {"event":"ready","bootstrap":[...],"nodes":[...]}, then one reply per
// command. The command set is documented in ../README.md.

const HyperDHT = require('hyperdht')
const createTestnet = require('@hyperswarm/testnet')
const { parseArgs, emit, exit, errorInfo, watchStdin, udxStats, hexKey } = require('./common')
const { run, MODES, TRANSFER_DEFAULTS } = require('./transfer')

const DEFAULTS = {
  size: -1, // persistent nodes to start: -1 = 5 with no bootstrap, 0 with one
  bootstrap: '', // host:port[,host:port...]; '' = start a testnet whose node 1 is the bootstrap
  host: '127.0.0.1',
  watchStdin: true
}

// Every DHT socket binds port 0 (hyperdht turns a plain 0 into 49737+, the
// range form [0, 0] means "any port").
const ANY_PORT = [0, 0]

const nodes = new Map() // name -> Promise<HyperDHT>
let testnet = null
let connSeq = 0

function parseBootstrap(list) {
  return list.split(',').map((s) => {
    const i = s.lastIndexOf(':')
    const port = Number(s.slice(i + 1))
    if (i < 1 || !(port > 0 && port < 65536)) throw new Error('bad bootstrap address ' + s)
    return { host: s.slice(0, i), port }
  })
}

function describe(node) {
  const a = node.address()
  return {
    host: a.host,
    port: a.port,
    persistent: !node.ephemeral,
    firewalled: node.firewalled,
    id: node.id ? node.id.toString('hex') : null
  }
}

async function start(o) {
  testnet = await createTestnet(0, { host: o.host })
  testnet.host = o.host // nodes made later bind here too
  const given = o.bootstrap ? parseBootstrap(o.bootstrap) : []
  const size = o.size >= 0 ? o.size : given.length ? 0 : 5
  if (given.length) testnet.bootstrap.push(...given)
  // the same construction as createTestnet(size), with port 0 for every node
  for (let i = 0; i < size; i++) {
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
  emit({ event: 'ready', bootstrap: testnet.bootstrap, nodes: testnet.nodes.map(describe) })
}

function getNode(name = 'default', opts = {}) {
  if (!nodes.has(name)) {
    const node = testnet.createNode({
      host: testnet.host || '127.0.0.1',
      port: ANY_PORT,
      firewalled: opts.firewalled === undefined ? false : opts.firewalled,
      ephemeral: opts.ephemeral === undefined ? true : opts.ephemeral
    })
    nodes.set(
      name,
      node.fullyBootstrapped().then(() => node)
    )
  }
  return nodes.get(name)
}

function keyPairOf(cmd) {
  return HyperDHT.keyPair(cmd.keySeed ? hexKey(cmd.keySeed, 32, 'keySeed') : undefined)
}

function valueOf(cmd) {
  if (typeof cmd.value === 'string') return Buffer.from(cmd.value, 'hex')
  if (typeof cmd.text === 'string') return Buffer.from(cmd.text, 'utf8')
  throw new Error('value (hex) or text is required')
}

function transferOpts(cmd, mode) {
  const o = { ...TRANSFER_DEFAULTS, mode }
  for (const k of Object.keys(TRANSFER_DEFAULTS)) if (k in cmd) o[k] = cmd[k]
  if (!MODES.includes(o.mode)) throw new Error('mode must be one of ' + MODES.join(', '))
  return o
}

// Runs a transfer mode on a hyperdht connection (a SecretStream over udx).
function serve(socket, o, tag) {
  const raw = socket.rawStream
  const closed = new Promise((resolve) => raw.once('close', resolve))
  return run(socket, o, {
    tag,
    stats: () => udxStats(raw),
    flush: () => socket.flush(),
    send: (buf) => socket.send(buf),
    closed
  })
}

const COMMANDS = {
  async node(cmd) {
    const node = await getNode(cmd.name, cmd)
    return { event: 'node', name: cmd.name || 'default', ...describe(node) }
  },

  async listen(cmd) {
    const node = await getNode(cmd.node)
    const o = transferOpts(cmd, cmd.mode || 'echo')
    const server = node.createServer((socket) => {
      const conn = ++connSeq
      socket.on('error', () => {}) // reported by run()
      emit({
        event: 'connection',
        req: cmd.req,
        conn,
        publicKey: socket.publicKey.toString('hex'),
        remotePublicKey: socket.remotePublicKey.toString('hex'),
        handshakeHash: socket.handshakeHash.toString('hex')
      })
      serve(socket, o, { req: cmd.req, conn }).then((s) => emit({ ...s, event: 'connection-done' }))
    })
    await server.listen(keyPairOf(cmd))
    const a = server.address()
    return { event: 'listening', publicKey: a.publicKey.toString('hex'), host: a.host, port: a.port }
  },

  async unlisten(cmd) {
    const node = await getNode(cmd.node)
    const pk = hexKey(cmd.publicKey, 32, 'publicKey')
    for (const server of node.listening) {
      if (server.publicKey && server.publicKey.equals(pk)) await server.close()
    }
    return { event: 'unlistened' }
  },

  async connect(cmd) {
    const node = await getNode(cmd.node)
    const o = transferOpts(cmd, cmd.mode || 'both')
    const pk = hexKey(cmd.publicKey, 32, 'publicKey')
    const socket = node.connect(pk, { keyPair: keyPairOf(cmd) })
    const failed = new Promise((resolve, reject) => socket.once('error', reject))
    await Promise.race([socket.opened, failed])
    emit({
      event: 'connected',
      req: cmd.req,
      publicKey: socket.publicKey.toString('hex'),
      remotePublicKey: socket.remotePublicKey.toString('hex'),
      handshakeHash: socket.handshakeHash.toString('hex'),
      remoteHost: socket.rawStream.remoteHost,
      remotePort: socket.rawStream.remotePort
    })
    failed.catch(() => {}) // later errors are reported by run()
    const s = await serve(socket, o, { req: cmd.req })
    return { ...s, event: 'connect-done' }
  },

  async announce(cmd) {
    const node = await getNode(cmd.node)
    const kp = keyPairOf(cmd)
    const q = node.announce(hexKey(cmd.topic, 32, 'topic'), kp)
    await q.finished()
    return { event: 'announced', publicKey: kp.publicKey.toString('hex'), closestNodes: q.closestNodes.length }
  },

  async unannounce(cmd) {
    const node = await getNode(cmd.node)
    const kp = keyPairOf(cmd)
    await node.unannounce(hexKey(cmd.topic, 32, 'topic'), kp)
    return { event: 'unannounced', publicKey: kp.publicKey.toString('hex') }
  },

  async lookup(cmd) {
    const node = await getNode(cmd.node)
    const peers = new Map()
    let replies = 0
    for await (const data of node.lookup(hexKey(cmd.topic, 32, 'topic'))) {
      replies++
      for (const p of data.peers) {
        const key = p.publicKey.toString('hex')
        const known = peers.get(key) || { publicKey: key, relayAddresses: [], from: [] }
        known.from.push({ host: data.from.host, port: data.from.port })
        for (const r of p.relayAddresses) {
          if (!known.relayAddresses.some((x) => x.host === r.host && x.port === r.port)) {
            known.relayAddresses.push({ host: r.host, port: r.port })
          }
        }
        peers.set(key, known)
      }
    }
    return { event: 'lookup', replies, peers: [...peers.values()] }
  },

  async 'mutable-put'(cmd) {
    const node = await getNode(cmd.node)
    const r = await node.mutablePut(keyPairOf(cmd), valueOf(cmd), { seq: cmd.seq || 0 })
    return {
      event: 'mutable-put',
      publicKey: r.publicKey.toString('hex'),
      seq: r.seq,
      signature: r.signature.toString('hex'),
      closestNodes: r.closestNodes.length
    }
  },

  async 'mutable-get'(cmd) {
    const node = await getNode(cmd.node)
    const pk = hexKey(cmd.publicKey, 32, 'publicKey')
    const r = await node.mutableGet(pk, { seq: cmd.seq || 0, latest: cmd.latest !== false })
    if (!r) return { event: 'mutable-get', found: false }
    return {
      event: 'mutable-get',
      found: true,
      seq: r.seq,
      value: r.value.toString('hex'),
      signature: r.signature.toString('hex'),
      from: r.from ? { host: r.from.host, port: r.from.port } : null
    }
  },

  async 'immutable-put'(cmd) {
    const node = await getNode(cmd.node)
    const r = await node.immutablePut(valueOf(cmd))
    return { event: 'immutable-put', hash: r.hash.toString('hex'), closestNodes: r.closestNodes.length }
  },

  async 'immutable-get'(cmd) {
    const node = await getNode(cmd.node)
    const r = await node.immutableGet(hexKey(cmd.hash, 32, 'hash'))
    if (!r) return { event: 'immutable-get', found: false }
    return {
      event: 'immutable-get',
      found: true,
      value: r.value.toString('hex'),
      from: r.from ? { host: r.from.host, port: r.from.port } : null
    }
  },

  async 'destroy-node'(cmd) {
    const name = cmd.name || 'default'
    if (!nodes.has(name)) throw new Error('no node ' + name)
    const node = await nodes.get(name)
    nodes.delete(name)
    for (const server of node.listening) await server.close()
    await node.destroy()
    return { event: 'node-destroyed', name }
  },

  async nodes() {
    const named = {}
    for (const [name, p] of nodes) named[name] = describe(await p)
    return { event: 'nodes', bootstrap: testnet.bootstrap, testnet: testnet.nodes.map(describe), named }
  },

  async exit() {
    await testnet.destroy()
    emit({ event: 'exit' })
    exit(0)
  }
}

function onCommand(cmd) {
  const fn = COMMANDS[cmd.cmd]
  if (!fn) {
    emit({ event: 'error', req: cmd.req, cmd: cmd.cmd, code: 'EINVAL', message: 'unknown command ' + cmd.cmd })
    return
  }
  Promise.resolve()
    .then(() => fn(cmd))
    .then(
      (reply) => reply && emit({ ...reply, req: cmd.req }),
      (err) => emit({ event: 'error', req: cmd.req, cmd: cmd.cmd, ...errorInfo(err) })
    )
}

async function main() {
  const o = parseArgs(process.argv.slice(2), DEFAULTS)
  // commands that arrive while the testnet starts wait for it
  const queue = []
  let started = false
  watchStdin((cmd) => (started ? onCommand(cmd) : queue.push(cmd)), o.watchStdin)
  await start(o)
  started = true
  for (const cmd of queue) onCommand(cmd)
}

main().catch((err) => {
  emit({ event: 'error', code: err.code || 'EINVAL', message: err.message })
  process.stderr.write((err && err.stack) + '\n')
  exit(2)
})
