'use strict'
// The control for ludx_testnet.lua: the same line protocol, but N Node
// hyperdht nodes in a process of their own (LUDX_TESTNET_NODE=1 in
// testnet.js). Prints {"event":"ready","bootstrap":"127.0.0.1:P","ports":[..]},
// answers "stats" with zero ludx counters, exits when stdin closes.
const path = require('path')
const DHT = require(path.resolve(process.env.HYPERDHT_DIR || '.', 'index.js'))

async function main() {
  const n = Number(process.argv[2] || 30)
  const nodes = []
  const bootstrap = []
  for (let i = 0; i < n; i++) {
    const node = new DHT({ ephemeral: false, firewalled: false, bootstrap, host: '127.0.0.1' })
    await node.fullyBootstrapped()
    if (i === 0) bootstrap.push({ host: '127.0.0.1', port: node.address().port })
    nodes.push(node)
  }
  const ports = nodes.map((d) => d.address().port)
  process.stdout.write(JSON.stringify({ event: 'ready', bootstrap: '127.0.0.1:' + ports[0], ports }) + '\n')
  let buf = ''
  process.stdin.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      if (line === 'stats') process.stdout.write(JSON.stringify({ event: 'stats', node: true }) + '\n')
    }
  })
  process.stdin.on('end', async () => {
    for (const d of nodes) await d.destroy()
    process.exit(0)
  })
}
main()
