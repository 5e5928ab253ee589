'use strict'
// Shared by the Node bench ends (udx-bench.js, udx-bench-many.js).

// One JSON object per stdout line.
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

// Exits once stdout is written out.
function exit(code) {
  process.stdout.write('', () => process.exit(code))
}

// Epoch milliseconds with sub-millisecond resolution.
function now() {
  return performance.timeOrigin + performance.now()
}

// xorshift32 (x ^= x << 13; x ^= x >> 17; x ^= x << 5), words little-endian;
// the generator of spec/interop/peers/common.js and core.datagen.
function prngBytes(seed, n) {
  const out = Buffer.alloc(n)
  let x = seed >>> 0 || 0x9e3779b9
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    const w = x >>> 0
    for (let k = 0; k < 4 && i + k < n; k++) out[i + k] = (w >>> (8 * k)) & 0xff
  }
  return out
}

module.exports = { emit, exit, now, prngBytes }
