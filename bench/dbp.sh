#!/usr/bin/env bash
# Dual-Buffer Pipelining benchmark: sequential vs dbp vs async on a lookup-heavy shape, on 1
# and 2 ranks, all measured in this one run. samples/s: medians of untraced runs; exposed
# lookup and sync time: from a traced run of each (nestpipe trace report); eval AUC of each
# mode side by side; SVG timelines of the 2-rank sequential and dbp runs.
# Writes bench/results/<date>-dbp.md (+ .svg pictures). See bench/README.md.
#
#   bash bench/dbp.sh [--steps S] [--repeats R] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STEPS=40 REPEATS=3 QUICK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --quick) QUICK=1; shift ;;
  *) echo "dbp.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
NP=${NESTPIPE:-build/nestpipe}
[[ -x $NP ]] || { echo "dbp.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
# lookup-heavy: 26 tables of 500k rows, dim 64, Zipf 1.05, multi-hot (4 keys a bag on
# average), a small dense part
SHAPE=(--tables 26 --rows 500000 --dim 64 --zipf 1.05 --hot 4 --bottom 13-128-64 --top 128-1
  --batch 2048 --eval-samples 8192 --quiet)
TRACE_STEPS=12 WARM=2
if [[ $QUICK == 1 ]]; then
  SHAPE=(--tables 26 --rows 20000 --dim 64 --zipf 1.05 --hot 4 --bottom 13-128-64 --top 128-1
    --batch 2048 --eval-samples 2048 --quiet)
  STEPS=5 REPEATS=1 TRACE_STEPS=5 WARM=1
fi
export STARPU_SILENT=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/np_dbp_XXXXXX)
trap 'rm -rf "$W"' EXIT
STAMP=$(date +%Y-%m-%d)
OUT=bench/results/$STAMP-dbp.md
mkdir -p bench/results

launch() { # R ARGS...: one run on R ranks (two StarPU workers each: the machine's cores)
  local R=$1
  shift
  if [[ $R == 1 ]]; then
    "$NP" train "$@"
  else
    mpirun --allow-run-as-root --oversubscribe -np "$R" -x STARPU_SILENT -x STARPU_HOME \
      "$NP" train "$@"
  fi
}
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d' + sys.argv[2]))" "$@"; }

RES=$W/res.tsv
: >"$RES"
for R in 1 2; do
  for p in sequential dbp async; do
    rates=""
    for ((k = 1; k <= REPEATS; k++)); do
      echo "dbp.sh: R=$R $p run $k/$REPEATS" >&2
      launch "$R" "${SHAPE[@]}" --pipeline "$p" --steps "$STEPS" --metrics-json "$W/m.json" \
        2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
      rates+="$(jget "$W/m.json" "['samples_per_s']") "
    done
    auc=$(jget "$W/m.json" "['eval_auc']")
    synced=$(jget "$W/m.json" "['rows_synced_per_step']")
    echo "dbp.sh: R=$R $p traced run" >&2
    launch "$R" "${SHAPE[@]}" --pipeline "$p" --steps "$TRACE_STEPS" --trace "$W/t_${R}_$p.json" \
      --metrics-json "$W/tm.json" 2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
    # steady state: leave out the first WARM batches (first touches of the tables, perf-model
    # calibration), which dominate a short traced run
    "$NP" trace report "$W/t_${R}_$p.json" --json --from-batch "$WARM" >"$W/rep.json"
    lookup=$(jget "$W/rep.json" "['overall']['lookup_exposed_us']")
    lookup_all=$(jget "$W/rep.json" "['overall']['lookup_us']")
    sync=$(jget "$W/rep.json" "['overall']['kinds']['sync']['total_us'] / $((TRACE_STEPS - WARM))")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$R" "$p" "$rates" "$auc" "$synced" \
      "$lookup" "$lookup_all" "$sync" >>"$RES"
    if [[ $R == 2 && $p != async ]]; then
      "$NP" trace svg "$W/t_${R}_$p.json" "bench/results/$STAMP-dbp-2ranks-$p.svg"
    fi
  done
done

python3 - "$RES" "$((TRACE_STEPS - WARM))" >"$W/table.md" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
tsteps = int(sys.argv[2])
med, look = {}, {}
for R, p, rates, auc, syn, lk, lka, sy in rows:
    med[(R, p)] = statistics.median(float(x) for x in rates.split())
    look[(R, p)] = float(lk)
print("| ranks | pipeline | samples/s (median) | min / max | vs sequential | exposed lookup ms/step "
      "(of busy) | vs sequential | rows synced/step | sync ms/step | eval AUC |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for R, p, rates, auc, syn, lk, lka, sy in rows:
    x = [float(v) for v in rates.split()]
    seq = (R, "sequential")
    r = med[(R, p)] / med[seq]
    lr = (look[(R, p)] / look[seq]) if look[seq] > 0 else float("nan")
    print(f"| {R} | {p} | {med[(R, p)]:.0f} | {min(x):.0f} / {max(x):.0f} | {r:.2f}x "
          f"| {float(lk) / 1e3 / tsteps / int(R):.2f} ({float(lka) / 1e3 / tsteps / int(R):.2f}) "
          f"| {100 * lr:.1f}% | {float(syn):.0f} | {float(sy) / 1e3 / int(R):.3f} | {float(auc):.4f} |")
print()
for R in ("1", "2"):
    r = med[(R, "dbp")] / med[(R, "sequential")]
    lr = look[(R, "dbp")] / look[(R, "sequential")] if look[(R, "sequential")] else float("nan")
    print(f"- {R} rank(s): dbp {r:.2f}x sequential samples/s (goal >= 1.3x: "
          f"{'met' if r >= 1.3 else 'not met'}); exposed lookup {100 * lr:.1f}% of sequential "
          f"(goal <= 5%: {'met' if lr <= 0.05 else 'not met'}).")
PYEOF

{
  echo "# Dual-Buffer Pipelining: sequential vs dbp vs async ($STAMP)"
  echo
  echo "Shape: ${SHAPE[*]}; $STEPS timed steps per run, $REPEATS runs per row (median);"
  echo "2 ranks = mpirun -np 2 on the same 2-core machine (oversubscribed: 2 StarPU workers per"
  echo "rank). Exposed lookup (routing, the keys' All2All, retrieve and sync while no dense compute runs on the rank),"
  echo "sync time: from one traced run of $TRACE_STEPS steps per row, batches $WARM.. (the first"
  echo "$WARM are warm-up), per step and per rank; in brackets the lookup's busy time. Eval AUC:"
  echo "the untraced run's. samples/s: the training"
  echo "loop of nestpipe's --metrics-json (synthetic batch generation included)."
  echo
  cat "$W/table.md"
  echo
  echo "Timelines (2 ranks, $TRACE_STEPS steps): [sequential]($STAMP-dbp-2ranks-sequential.svg),"
  echo "[dbp]($STAMP-dbp-2ranks-dbp.svg)."
  echo
  echo "## Machine"
  echo
  echo "- CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores; memory $(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  # shellcheck disable=SC1091 # the running system's file
  echo "- $(. /etc/os-release && echo "$PRETTY_NAME"); $(gcc --version | head -n 1); StarPU $(pkg-config --modversion starpu-1.3); Open MPI $(mpirun --version 2>/dev/null | head -n 1 | awk '{print $NF}')"
  echo "- nestpipe commit $(git rev-parse --short HEAD)"
  echo
  echo "Command: \`bash bench/dbp.sh --steps $STEPS --repeats $REPEATS\`"
} >"$OUT"
cat "$OUT"
