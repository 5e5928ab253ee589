'use strict'
// Preloaded with `node -r` ahead of hyperbeam's own bin.js, so that the real
// hyperbeam command line runs against a local DHT:
//   LUDX_BEAM_BOOTSTRAP=127.0.0.1:PORT node -r ./hyperbeam-testnet.js \
//     node_modules/hyperbeam/bin.js [PASSPHRASE] [-r]
// hyperbeam 3.x builds its node as `new DHT({ ephemeral: true })` and its
// command line takes no bootstrap, so the hyperdht module that hyperbeam
// loads is replaced in the require cache by a subclass that adds the
// testnet's bootstrap, binds 127.0.0.1 on any port and, like the testnet's
// own nodes, takes itself as reachable. Nothing else of hyperbeam changes.
const path = require('path')

const beamDir = path.dirname(require.resolve('hyperbeam/package.json'))
const dhtPath = require.resolve('hyperdht', { paths: [beamDir] })
const HyperDHT = require(dhtPath)

const list = process.env.LUDX_BEAM_BOOTSTRAP || ''
const bootstrap = list.split(',').filter(Boolean).map((s) => {
  const i = s.lastIndexOf(':')
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) }
})
if (bootstrap.length === 0) throw new Error('LUDX_BEAM_BOOTSTRAP (host:port) is not set')

class TestnetDHT extends HyperDHT {
  constructor (opts = {}) {
    super({ ...opts, bootstrap, host: '127.0.0.1', port: [0, 0], firewalled: false })
  }
}

require(dhtPath) // loaded, so its cache entry exists
require.cache[dhtPath].exports = TestnetDHT
