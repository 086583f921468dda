#!/usr/bin/env bash
# Waiting that sleeps (runtime/core/backoff.h): this build against a base build whose waits only
# yielded the core (the MPI backend's polled collectives, the StarPU workers' idle hook).
# 1. What a stalled peer costs: 2 ranks, rank 1's driver sleeps from step 3
#    (NP_TEST_STALL_RANK/STEP), each rank's share of a core over 5 s of the stall, both builds.
# 2. What it costs a run: samples/s of the Kaggle-like DLRM under dbp and nestpipe on 1 and
#    2 ranks, both builds alternating run by run, medians of the repeats; the dumps of the
#    two sides must be the same bytes.
# Writes bench/results/<date>-idle.md.
#
#   bash bench/idle.sh --base OTHER/nestpipe [--steps S] [--repeats R] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
BASE="" STEPS=60 REPEATS=5
while [[ $# -gt 0 ]]; do
  case "$1" in
  --base) BASE=$2; shift 2 ;;
  --steps) STEPS=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --quick) STEPS=4 REPEATS=1; shift ;;
  *) echo "idle.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
NP=$(realpath "${NESTPIPE:-build/nestpipe}")
[[ -x $NP ]] || { echo "idle.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
[[ -n $BASE && -x $BASE ]] || {
  echo "idle.sh: --base names the nestpipe binary to compare with (a build of an earlier commit)" >&2
  exit 2
}
BASE=$(realpath "$BASE")
export STARPU_SILENT=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/np_idle_XXXXXX)
trap 'rm -rf "$W"' EXIT
STAMP=$(date +%Y-%m-%d)
OUT=bench/results/$STAMP-idle.md
mkdir -p bench/results

# 1. a stalled peer: CPU ticks of each rank's process over 5 s of the stall
stall() { # BINARY -> "rank0% rank1%"
  local bin=$1 hz
  hz=$(getconf CLK_TCK)
  NP_TEST_STALL_RANK=1 NP_TEST_STALL_STEP=3 timeout 60 mpirun --allow-run-as-root --oversubscribe \
    --mca btl self,vader -x NP_TEST_STALL_RANK -x NP_TEST_STALL_STEP -x STARPU_SILENT -np 2 \
    "$bin" train --tables 4 --rows 1000 --dim 8 --bottom 13-16-8 --top 8-1 --batch 256 \
    --steps 50 --quiet --rank-timeout 10 >/dev/null 2>&1 &
  local job=$!
  sleep 3
  ticks() { for p in $(pgrep -f "^$bin train" | sort -n); do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd' '; }
  local a b
  a=$(ticks)
  sleep 5
  b=$(ticks)
  wait "$job" || true
  awk -v a="$a" -v b="$b" -v hz="$hz" 'BEGIN { n = split(a, p, " "); split(b, q, " ");
    for (i = 1; i <= n; i++) printf "%s%.0f", (i > 1 ? " " : ""), (q[i] - p[i]) / hz / 5 * 100 }'
}
echo "idle.sh: $(date +%T) a stalled peer, base then new" >&2
STALL_BASE=$(stall "$BASE")
STALL_NEW=$(stall "$NP")

# 2. throughput, alternating
DATA=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --batch 2048 --eval-samples 2048 --quiet
  --bottom 13-512-256-64-16 --top 512-256-1)
jget() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
RES=$W/res.tsv
: >"$RES"
for R in 1 2; do
  for p in dbp nestpipe; do
    base_rates="" new_rates=""
    for ((k = 1; k <= REPEATS; k++)); do
      for side in base new; do
        bin=$NP
        [[ $side == base ]] && bin=$BASE
        echo "idle.sh: $(date +%T) R=$R $p $side run $k/$REPEATS" >&2
        np_launch "$bin" "$R" "${DATA[@]}" --pipeline "$p" --steps "$STEPS" \
          --metrics-json "$W/m.json" --dump-params "$W/$side.params" 2>"$W/err" ||
          { echo "idle.sh: failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
        rate=$(jget "$W/m.json" samples_per_s)
        if [[ $side == base ]]; then base_rates+="$rate "; else new_rates+="$rate "; fi
      done
    done
    cmp -s "$W/base.params" "$W/new.params" ||
      { echo "idle.sh: R=$R $p: the two builds trained different models" >&2; exit 1; }
    ints() { tr ' ' '\n' | grep . | awk '{printf "%s%.0f", (NR > 1 ? ", " : ""), $1}'; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$R" "$p" "$(echo "$base_rates" | median_of)" \
      "$(echo "$new_rates" | median_of)" "$(echo "$base_rates" | ints)" \
      "$(echo "$new_rates" | ints)" >>"$RES"
  done
done

base_bench_facts
{
  echo "# Waits that sleep: a stalled peer's cost and the step time ($STAMP)"
  echo
  echo "\`bash bench/idle.sh --base <a build of the commit before> --steps $STEPS --repeats $REPEATS\`."
  echo "Before ($BASE_VERSION, the base binary): the MPI backend's polled collectives and the"
  echo "StarPU workers' idle hook yielded the core in a loop. After: they yield for the first"
  echo "10 ms of a wait, then sleep a fiftieth of the time waited so far, 1 ms at most"
  echo "(runtime/core/backoff.h)."
  echo
  echo "## A stalled peer"
  echo
  echo "2 ranks; rank 1's driver sleeps from step 3 (NP_TEST_STALL_RANK=1, NP_TEST_STALL_STEP=3,"
  echo "--rank-timeout 10); each rank's process, share of one core over 5 s of the stall:"
  echo
  echo "| build | rank 0 (waits for rank 1) | rank 1 (stalled driver, idle workers) |"
  echo "|---|---|---|"
  read -r b0 b1 <<<"$STALL_BASE"
  read -r n0 n1 <<<"$STALL_NEW"
  echo "| before | ${b0}% | ${b1}% |"
  echo "| after | ${n0}% | ${n1}% |"
  echo
  echo "## Step time"
  echo
  echo "Kaggle-like DLRM: ${DATA[*]}. Samples/s: medians of $REPEATS runs of $STEPS steps"
  echo "each (all-in), the sides alternating run by run; the dumps of both sides are the same"
  echo "bytes."
  echo
  echo "| ranks | pipeline | before samples/s | after samples/s | after / before | runs before | runs after |"
  echo "|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r R p b a rb ra; do
    awk -v R="$R" -v p="$p" -v b="$b" -v a="$a" -v rb="$rb" -v ra="$ra" 'BEGIN {
      printf "| %s | %s | %.0f | %.0f | %.3fx | %s | %s |\n", R, p, b, a, a / b, rb, ra }'
  done <"$RES"
  echo
  machine_section
} >"$OUT"
echo "idle.sh: wrote $OUT" >&2
cat "$OUT"
