'use strict'
// A stand-in for hyperdht/testnet.js whose network is mostly ludx (issue 13):
// LUDX_TESTNET=1 makes a testnet of `size` (>= 2) nodes hold LUDX_NODE_NODES (3)
// Node hyperdht nodes and the rest ludx nodes (at least one, the bootstrap),
// started by `$LUDX_BIN tools/attack/ludx_testnet.lua N` in one child
// process. The Node nodes come first in `nodes` (tests use nodes[0..2] as
// servers and clients); the ludx nodes are not in `nodes`. Without
// LUDX_TESTNET every node is a Node node. At teardown the ludx counters
// (amplification, flood and relay drops) are appended as one JSON line to
// $LUDX_STATS_FILE when set. See README.md next to this file.
const path = require('path')
const fs = require('fs')
const { spawn } = require('child_process')
const DHT = require('./index.js')
if (process.env.LUDX_TESTNET_NODE === '1') process.env.HYPERDHT_DIR = process.env.HYPERDHT_DIR || __dirname

const LUDX = process.env.LUDX_TESTNET === '1'
const NODE_NODES = Number(process.env.LUDX_NODE_NODES || 3)
const ROOT = process.env.LUDX_ROOT || path.join(__dirname, '..', '..', '..')
const BIN = process.env.LUDX_BIN || path.join(ROOT, 'build', 'ludx')
const SCRIPT = path.join(ROOT, 'tools', 'attack', 'ludx_testnet.lua')

function startLudx(n) {
  // LUDX_TESTNET_NODE=1: the same network of Node nodes in a process of their own (the control)
  const cmd = process.env.LUDX_TESTNET_NODE === '1'
    ? [process.execPath, [path.join(__dirname, 'node_testnet.js'), String(n)]]
    : [BIN, [SCRIPT, String(n)]]
  const proc = spawn(cmd[0], cmd[1], { stdio: ['pipe', 'pipe', 'inherit'] })
  let buf = ''
  const waiting = []
  proc.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      const w = waiting.shift()
      if (w) w(JSON.parse(line))
    }
  })
  const next = () => new Promise((resolve) => waiting.push(resolve))
  return { proc, next }
}

module.exports = async function createTestnet(size = 10, opts = {}) {
  const teardown = typeof opts === 'function' ? opts : opts.teardown ? opts.teardown.bind(opts) : () => {}
  const host = opts.host || '127.0.0.1'
  const bootstrap = opts.bootstrap ? [...opts.bootstrap] : []
  const nodes = []
  let ludx = null

  if (size === 0) return new Testnet(nodes, bootstrap, null)

  let nodeCount = size
  if (LUDX && bootstrap.length === 0 && size >= 2) {
    const ludxCount = Math.max(1, size - NODE_NODES)
    nodeCount = Math.min(size, NODE_NODES)
    ludx = startLudx(ludxCount)
    const ready = await ludx.next()
    const i = ready.bootstrap.lastIndexOf(':')
    bootstrap.push({ host: ready.bootstrap.slice(0, i), port: Number(ready.bootstrap.slice(i + 1)) })
    if (process.env.LUDX_TRACE_FILE) require('./trace.js').mark({ testnet: ready.ports })
  }

  for (let i = 0; i < nodeCount; i++) {
    const first = i === 0 && bootstrap.length === 0
    const node = new DHT({
      ephemeral: false,
      firewalled: false,
      bootstrap,
      port: first ? opts.port || 0 : 0,
      host: host === '127.0.0.1' ? '127.0.0.1' : '0.0.0.0'
    })
    await node.fullyBootstrapped()
    if (first) bootstrap.push({ host, port: node.address().port })
    nodes.push(node)
  }

  const testnet = new Testnet(nodes, bootstrap, ludx)
  teardown(() => testnet.destroy(), { order: Infinity })
  return testnet
}

class Testnet {
  constructor(nodes, bootstrap, ludx) {
    this.nodes = nodes
    this.bootstrap = bootstrap
    this._ludx = ludx
  }

  createNode(opts = {}) {
    const node = new DHT({ ephemeral: true, bootstrap: this.bootstrap, host: '127.0.0.1', ...opts })
    this.nodes.push(node)
    return node
  }

  async destroy() {
    for (const node of this.nodes) {
      for (const server of node.listening) await server.close()
    }
    for (let i = this.nodes.length - 1; i >= 0; i--) await this.nodes[i].destroy()
    const ludx = this._ludx
    this._ludx = null
    if (!ludx) return
    ludx.proc.stdin.write('stats\n')
    const stats = await ludx.next()
    if (process.env.LUDX_STATS_FILE) {
      fs.appendFileSync(process.env.LUDX_STATS_FILE, JSON.stringify({ file: process.argv[1], ...stats }) + '\n')
    }
    const exited = new Promise((resolve) => ludx.proc.once('exit', resolve))
    ludx.proc.stdin.end()
    await exited
  }

  [Symbol.iterator]() {
    return this.nodes[Symbol.iterator]()
  }
}
