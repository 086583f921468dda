#!/usr/bin/env bash
# Kernel micro-benchmarks: the dot interaction (interact_bench: per-sample against blocked
# kernels), sum pooling (pool_bench: the plain loops against the kernels) and the synthetic
# generator (syn_bench), one thread each, at the bench shape. With --base DIR, the
# interaction and the generator of another build (DIR holds its interact_bench and
# syn_bench, e.g. a worktree of an older commit built with CMake) run in the same rounds,
# alternating with this build's, and must give the same bits (interact_bench checks its own;
# syn_bench's checksums are compared). Medians over the rounds.
# Writes bench/results/<date>-kernels.md (or --out FILE). See bench/README.md.
#
#   bash bench/kernels.sh [--base BUILD_DIR] [--rounds N] [--out FILE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BASE="" ROUNDS=5 OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  --base) BASE=${2:?--base needs a build folder}; shift 2 ;;
  --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
  --out) OUT=${2:?--out needs a file}; shift 2 ;;
  -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "kernels.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "kernels.sh: --rounds must be a whole number >= 1, got '$ROUNDS'" >&2; exit 2; }
B=build
for p in interact_bench pool_bench syn_bench; do
  [[ -x $B/$p ]] || { echo "kernels.sh: $B/$p not found; build first: bash .ci/build" >&2; exit 2; }
done
if [[ -n $BASE ]]; then
  for p in interact_bench syn_bench; do
    [[ -x $BASE/$p ]] || { echo "kernels.sh: --base $BASE has no $p (build its bench targets)" >&2; exit 2; }
  done
fi
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-kernels.md}
mkdir -p "$(dirname "$OUT")"
W=$(mktemp -d /tmp/np_kernels_XXXXXX)
trap 'rm -rf "$W"' EXIT

# one round: every program once per build, in the same order each round
SIDES=(this)
[[ -n $BASE ]] && SIDES=(base this)
dir_of() { if [[ $1 == base ]]; then echo "$BASE"; else echo "$B"; fi; }
for ((r = 1; r <= ROUNDS; r++)); do
  echo "kernels.sh: round $r/$ROUNDS" >&2
  for side in "${SIDES[@]}"; do
    d=$(dir_of "$side")
    # interaction: "| forward (...) | per-sample | blocked | ..." then "| backward | ..."
    "$d/interact_bench" 256 27 16 >"$W/i" || { echo "kernels.sh: $d/interact_bench failed" >&2; exit 1; }
    awk -F'|' '/forward/ {f=$4} /backward/ {b=$4} END {gsub(/ /,"",f); gsub(/ /,"",b); print f, b}' \
      "$W/i" >>"$W/interact-$side"
    # generator: "2.295 us/sample (fastest pass 2.241)  4.70 ms/batch  checksum ..."
    "$d/syn_bench" 20 >"$W/s" 2>&1 || { echo "kernels.sh: $d/syn_bench failed" >&2; exit 1; }
    awk '{print $1, $NF}' "$W/s" >>"$W/syn-$side"
  done
  "$B/pool_bench" 512 26 16 1 30000 | tail -n 1 | awk -F'|' '{print $3, $4, $6, $7}' >>"$W/pool1"
  "$B/pool_bench" 512 26 16 4 60000 | tail -n 1 | awk -F'|' '{print $3, $4, $6, $7}' >>"$W/pool4"
done
# median of column C of file F
med() { sort -g -k "$2,$2" "$1" | awk -v c="$2" '{v[NR] = $c} END {print v[int((NR + 1) / 2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
if [[ -n $BASE ]] && [[ $(cut -d' ' -f2 "$W/syn-base" | sort -u) != $(cut -d' ' -f2 "$W/syn-this" | sort -u) ]]; then
  echo "kernels.sh: the generator's checksums differ between the builds: not the same data" >&2
  exit 1
fi

CPU=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
ISA=$(grep -m1 -o -w -E 'avx512f|avx512_bf16|avx2|fma' /proc/cpuinfo | sort -u | paste -sd' ' || true)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && COMMIT+=" with uncommitted changes"
{
  echo "# Kernel micro-benchmarks ($(date +%Y-%m-%d))"
  echo
  echo "\`bash bench/kernels.sh${BASE:+ --base BASE} --rounds $ROUNDS\`: one thread, medians of $ROUNDS rounds;"
  echo "each program itself reports a median of its own repeats (bench/README.md)."
  [[ -n $BASE ]] && echo "BASE is the build of $(git -C "$BASE/.." rev-parse --short HEAD 2>/dev/null || echo "another commit"), run alternately with this one."
  echo
  echo "## Dot interaction (interact_bench 256 27 16: a chunk of the bench shape), blocked kernels, us a call"
  echo
  if [[ -n $BASE ]]; then
    echo "| pass | base | this build | speedup |"
    echo "|---|---:|---:|---:|"
    f0=$(med "$W/interact-base" 1) f1=$(med "$W/interact-this" 1)
    b0=$(med "$W/interact-base" 2) b1=$(med "$W/interact-this" 2)
    echo "| forward | $f0 | $f1 | $(ratio "$f0" "$f1") |"
    echo "| backward | $b0 | $b1 | $(ratio "$b0" "$b1") |"
  else
    echo "| pass | this build |"
    echo "|---|---:|"
    echo "| forward | $(med "$W/interact-this" 1) |"
    echo "| backward | $(med "$W/interact-this" 2) |"
  fi
  echo
  echo "Both builds' blocked kernels are first checked to give the per-sample kernels' bits."
  echo
  echo "## Sum pooling (pool_bench: 512 samples x 26 tables, dim 16), us a pass over every table"
  echo
  echo "| bags | plain fwd | fwd | speedup | plain bwd | bwd | speedup |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for h in 1 4; do
    f="$W/pool$h"
    pf=$(med "$f" 1) kf=$(med "$f" 2) pb=$(med "$f" 3) kb=$(med "$f" 4)
    echo "| $h key(s) a bag | $pf | $kf | $(ratio "$pf" "$kf") | $pb | $kb | $(ratio "$pb" "$kb") |"
  done
  echo
  echo "The plain loops are the kernels' definition, compiled into pool_bench; the kernels are"
  echo "first checked to give their bits."
  echo
  echo "## Synthetic generator (syn_bench 20: bench shape, Zipf 1.05, one key a bag), us a sample"
  echo
  if [[ -n $BASE ]]; then
    s0=$(med "$W/syn-base" 1) s1=$(med "$W/syn-this" 1)
    echo "| base | this build | speedup | checksum (both) |"
    echo "|---:|---:|---:|---|"
    echo "| $s0 | $s1 | $(ratio "$s0" "$s1") | $(head -n 1 "$W/syn-this" | cut -d' ' -f2) |"
  else
    echo "| this build | checksum |"
    echo "|---:|---|"
    echo "| $(med "$W/syn-this" 1) | $(head -n 1 "$W/syn-this" | cut -d' ' -f2) |"
  fi
  echo
  echo "## Machine"
  echo
  echo "- CPU: $CPU, $(nproc) cores; vector units: ${ISA:-none of avx2, avx512f}"
  echo "- $(gcc --version | head -n 1); $(./build/nestpipe --version | sed -n 's/^dense kernels: /dense kernels /p')"
  echo "- commit $COMMIT"
} >"$OUT"
echo "kernels.sh: wrote $OUT" >&2
