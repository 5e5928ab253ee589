#!/bin/sh
# Runs hyperdht's own brittle tests on a mostly-ludx testnet, in a loop
# (issue 13). See README.md here. Usage:
#   tools/attack/hyperdht-suite/run.sh HYPERDHT_DIR RUNS [FILE...]
# HYPERDHT_DIR: a hyperdht checkout with test/ (git archive of the tag)
# whose lib/, index.js and node_modules match spec/interop, and brittle,
# newline-decoder, graceful-goodbye installed beside it. FILEs default to
# connections. MODE=ludx (default), node-proc (the same network of Node
# nodes in a separate process) or node (hyperdht's own in-process
# testnet). TRACE=1 keeps message traces (Node side, relay side) of
# failing runs. Writes LOGS/summary (one line per run).
set -u
HD=$(cd "$1" && pwd); RUNS=$2; shift 2
[ $# -gt 0 ] || set -- connections
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
MODE=${MODE:-ludx}
LOGS=${LOGS:-$HD/../logs/$MODE}
mkdir -p "$LOGS"
cp "$ROOT"/tools/attack/hyperdht-suite/testnet.js "$ROOT"/tools/attack/hyperdht-suite/trace.js \
  "$ROOT"/tools/attack/hyperdht-suite/node_testnet.js "$HD"/
export LUDX_ROOT="$ROOT"
case $MODE in
  ludx) export LUDX_TESTNET=1 ;;
  node-proc) export LUDX_TESTNET=1 LUDX_TESTNET_NODE=1 ;;
  node) unset LUDX_TESTNET ;;
esac
cd "$HD" || exit 2
i=1
while [ "$i" -le "$RUNS" ]; do
  for f in "$@"; do
    out=$LOGS/$f.$i.out
    export LUDX_STATS_FILE=$LOGS/$f.$i.stats
    if [ "${TRACE:-0}" = 1 ]; then
      export LUDX_TRACE_FILE=$LOGS/$f.$i.trace LUDX_RELAY_TRACE_FILE=$LOGS/$f.$i.relay
      timeout 300 node -r ./trace.js "test/$f.js" > "$out" 2>&1
    else
      timeout 300 node "test/$f.js" > "$out" 2>&1
    fi
    rc=$?
    fails=$(grep -E "^not ok|timed out after" "$out" | tr '\n' ' ')
    echo "$i $f rc=$rc $(grep -E '^# tests' "$out") $fails" >> "$LOGS/summary"
    [ "$rc" = 0 ] && [ -z "$fails" ] && rm -f "$out" "$LOGS/$f.$i.trace" "$LOGS/$f.$i.relay"
  done
  i=$((i + 1))
done
