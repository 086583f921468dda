#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz for as long as asked and writes what each did
# (runs, executions per second, coverage, crashes) to bench/results/DATE-fuzz.md.
# usage: bash bench/fuzz.sh [SECONDS per harness, default 600] [PARALLEL, default 2]
# Builds build-fuzz/ through .ci/fuzz (a 1-second pass). A crash's input is kept under
# build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600} par=${2:-2}
# the build, and a 1-second pass (a harness that crashes at once is reported below, too)
FUZZ_SECONDS=1 bash .ci/fuzz || echo "warning: the 1-second pass of .ci/fuzz failed (above)"
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() {
  local h=$1 rc=0
  mkdir -p "$scratch/$h"
  TMPDIR=$scratch build-fuzz/tests/fuzz/fuzz_$h -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/$h- \
    "$scratch/$h" tests/fuzz/corpus/$h >"$scratch/$h.log" 2>&1 || rc=$?
  echo "$rc" >"$scratch/$h.rc"
}
hs=(config agree criteo bin movielens trace params ckpt modelfile)
for ((i = 0; i < ${#hs[@]}; i += par)); do
  for h in "${hs[@]:i:par}"; do run "$h" & done
  wait
done
out=bench/results/$(date +%F)-fuzz.md
{
  echo "# Fuzzing: every reader's harness for $secs s"
  echo
  echo "$(date -u '+%F %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'),"
  echo "$(nproc) cores, $par harnesses at a time; clang $(clang --version | head -n 1 | grep -o '[0-9.]*' | head -n 1) with ASan + UBSan"
  echo "(\`bash bench/fuzz.sh $secs $par\`). Seeds: tests/fuzz/corpus/."
  echo
  echo "| harness | reader | runs | exec/s | coverage (edges) | corpus kept | result |"
  echo "|---|---|---:|---:|---:|---:|---|"
  declare -A what=([config]="config files (INI)" [criteo]="Criteo TSV" [bin]="binary data"
    [trace]="trace JSON, report, SVG, Paje" [params]="NPPARAMS (load, compare)" [ckpt]="checkpoint manifests")
  for h in "${hs[@]}"; do
    log=$scratch/$h.log
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -o '[0-9]*$' || echo ?)
    eps=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -o '[0-9]*$' || echo ?)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo ?)
    kept=$(find "$scratch/$h" -type f | wc -l)
    if [[ $(cat "$scratch/$h.rc" 2>/dev/null) == 0 ]]; then res="no crash"; else
      any_failed=1
      res="**FAILED**: $(grep -m1 -E 'ERROR|runtime error' "$log" | cut -c1-100)"; fi
    echo "| fuzz_$h | ${what[$h]} | $runs | $eps | $cov | $kept | $res |"
  done
} >"$out"
cat "$out"
exit "${any_failed:-0}"
