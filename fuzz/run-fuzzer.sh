#!/bin/sh
# Runs one libFuzzer binary for a set time over a scratch copy of its seed
# corpus (the repo's corpus is never written). Exit 77 (skipped) when the
# binary was not built (no clang with libFuzzer).
#
#   run-fuzzer.sh BINARY SECONDS SEED_CORPUS WORK_DIR
set -u
bin=$1 seconds=$2 seeds=$3 work=$4
if [ ! -x "$bin" ]; then
  echo "$(basename "$bin"): not built (no clang with libFuzzer): skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/" 2>/dev/null
"$bin" -max_total_time="$seconds" -timeout=20 -error_exitcode=1 -timeout_exitcode=1 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1
rc=$?
grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$work/log"
if [ $rc -ne 0 ]; then
  tail -60 "$work/log"
  echo "crash input(s) in $work/artifacts/: add them to $seeds/ once fixed"
fi
exit $rc
