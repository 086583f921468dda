#!/usr/bin/env bash
# nestpipe at scale (docs/scale.md): the projection checked against what runs here, then
# projected to 1,536 ranks. Writes bench/results/<date>-scale.md (and -scale.svg):
#   V0  the engine's collectives (bench/coll_bench.c) on 2 and 4 ranks over the emulated
#       link, 64 KB to 64 MB: measured against their local cost (the same run without the
#       link) plus the simulated wire (alpha-beta and SimGrid);
#   V1  each pipeline's 2-rank run (W = 4 and 8) replayed from its own trace;
#   V2  2-, 3- and 4-rank runs predicted from one-rank compute traces and the 2-rank graph:
#       samples/s, the pipelines' order, the exposed-exchange ratio; three calibrations: one
#       rank's alone, with the 2-rank run's collectives and delays, and with the ranks
#       sharing this machine's cores (--cores-per-rank);
#   V3  SimGrid against alpha-beta at N = 16, 128, 1,536 on a full-bisection fabric;
#   the projection: efficiency against N (16 to 1,536) per pipeline at two link rates, and
#   nestpipe's efficiency at 1,536 against the batch per worker.
#
#   bash bench/scale.sh [--rate 2] [--steps 40] [--repeats 3] [--quick]
#     --rate G   the emulated link's Gbit/s (NP_LINK_GBIT) for V0-V2 [2]
#     --repeats  runs of each V2 setting, interleaved (medians) [3]
#     --quick    a small check that it runs: fewer sizes, steps and ranks; prints its report
#                instead of writing bench/results/
#   SCALE_KEEP=DIR keeps the traces and outputs in DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BENCH_TORCH=system
# shellcheck source=bench/lib.sh
source bench/lib.sh 2>/dev/null
RATE=2 STEPS=40 QUICK=0 REPEATS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
  --rate) RATE=$2; shift 2 ;;
  --steps) STEPS=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --quick) QUICK=1; shift ;;
  *) echo "scale.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $RATE =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "scale.sh: --rate takes Gbit/s, e.g. 2" >&2; exit 2; }
[[ $STEPS =~ ^[1-9][0-9]*$ && $STEPS -ge 8 ]] || { echo "scale.sh: --steps must be 8 or more" >&2; exit 2; }
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "scale.sh: --repeats must be 1 or more" >&2; exit 2; }
NP=$(realpath "${NESTPIPE:-build/nestpipe}")
CB=$(realpath "${COLL_BENCH:-build/coll_bench}")
[[ -x $NP && -x $CB ]] || { echo "scale.sh: $NP or $CB not found; build first: bash .ci/build" >&2; exit 2; }
export STARPU_SILENT=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -n ${SCALE_KEEP:-} ]]; then # keep the runs' traces and outputs there
  W=$SCALE_KEEP
  mkdir -p "$W"
  rm -f "$W/v0" "$W/v0sim" "$W/p_wall"
else
  W=$(mktemp -d /tmp/np_scale_XXXXXX)
  trap 'rm -rf "$W"' EXIT
fi
log() { echo "scale.sh: $*" >&2; }
mpi() { # R ARGS...: mpirun over shared memory, paced at the rate
  local R=$1
  shift
  NP_LINK_GBIT=$RATE timeout 900 mpirun --allow-run-as-root --oversubscribe -np "$R" \
    --mca btl self,vader -x NP_LINK_GBIT -x STARPU_SILENT "$@"
}

PIPES="sequential dbp fwp nestpipe" WINS="4 8" LOCAL=512 RANKS_V2="2 3 4"
NS="16,32,64,128,256,512,1024,1536" BATCHES="512 2048 8192"
if [[ $QUICK == 1 ]]; then
  PIPES="sequential nestpipe" WINS=4 STEPS=10 RANKS_V2="2" NS="16,64" BATCHES=512 REPEATS=1
fi
machine_facts
TORCH_LINES=() TORCH_MISSING="not a side of this bench" NPROC=$(nproc)
SG=$("$NP" simulate --collective alltoall --bytes 1 --ranks 2 --model simgrid >/dev/null 2>&1 && echo yes || echo no)
MODEL=$([[ $SG == yes ]] && echo both || echo alpha-beta)
log "SimGrid: $SG"

# ---- V0: collectives
log "V0: collectives"
for R in 2 4; do
  timeout 900 mpirun --allow-run-as-root --oversubscribe -np $R --mca btl self,vader "$CB" 5 |
    sed "s/^/local /" >>"$W/v0"
  mpi $R "$CB" 5 | sed "s/^/link /" >>"$W/v0"
done
while read -r _ kind R bytes _; do
  "$NP" simulate --collective "$kind" --bytes "$bytes" --ranks "$R" --link-gbit "$RATE" \
    --latency-us 0 --msg-us 0 --model "$MODEL" | tail -n 1 >>"$W/v0sim"
done < <(grep '^local' "$W/v0")

# ---- V1: each pipeline's 2-rank run replayed from its own trace; and the graphs for V2
SHAPE=(--quiet --steps "$STEPS")
for p in $PIPES; do
  for w in $WINS; do
    log "V1: $p W=$w"
    mpi 2 "$NP" train "${SHAPE[@]}" --pipeline "$p" --windows "$w" --batch $((LOCAL * 2)) \
      --trace "$W/g_${p}_$w.json" >/dev/null
    "$NP" trace report "$W/g_${p}_$w.json" --from-batch 2 --json >"$W/m_${p}_${w}_2.json"
    "$NP" simulate --graph "$W/g_${p}_$w.json" --ranks 2 "${SHAPE[@]}" --pipeline "$p" --windows "$w" \
      --batch $((LOCAL * 2)) --latency-us 0 --msg-us 0 --model alpha-beta --json >"$W/v1_${p}_$w.json"
  done
done

# ---- V2: compute from one rank, predictions at 2, 3, 4 ranks against runs of those sizes,
#      REPEATS runs each (the 2-rank graph run is the first at 2), interleaved by round
for p in $PIPES; do
  for w in $WINS; do
    STARPU_SILENT=1 timeout 900 "$NP" train "${SHAPE[@]}" --pipeline "$p" --windows "$w" \
      --batch "$LOCAL" --trace "$W/c_${p}_$w.json" >/dev/null
  done
done
for k in $(seq 1 "$REPEATS"); do
  for p in $PIPES; do
    for w in $WINS; do
      for R in $RANKS_V2; do
        [[ $R == 2 && $k == 1 ]] && continue # the graph run
        log "V2: round $k, $p W=$w R=$R"
        mpi "$R" "$NP" train "${SHAPE[@]}" --pipeline "$p" --windows "$w" --batch $((LOCAL * R)) \
          --trace "$W/r.json" >/dev/null
        "$NP" trace report "$W/r.json" --from-batch 2 --json >"$W/m_${p}_${w}_${R}_$k.json"
      done
    done
  done
done
for p in $PIPES; do
  for w in $WINS; do
    cp "$W/m_${p}_${w}_2.json" "$W/m_${p}_${w}_2_1.json"
    for R in $RANKS_V2; do
      # one rank's compute alone; with the 2-rank run's collectives and delays; and with the
      # R ranks sharing this machine's cores
      for how in one graph cores; do
        extra=()
        [[ $how != one ]] && extra+=(--collectives-from-graph)
        [[ $how == cores ]] && extra+=(--cores-per-rank "$(awk "BEGIN {print $(nproc) / $R}")")
        "$NP" simulate --graph "$W/g_${p}_$w.json" --compute "$W/c_${p}_$w.json" "${extra[@]}" \
          --ranks "$R" "${SHAPE[@]}" --pipeline "$p" --windows "$w" --batch $((LOCAL * 2)) \
          --latency-us 0 --msg-us 0 --model alpha-beta --json >"$W/v2${how}_${p}_${w}_$R.json"
      done
    done
  done
done

# ---- the projection (and V3): W = 4, calibrated from one rank, two link rates
W4=$(echo "$WINS" | cut -d' ' -f1)
for p in $PIPES; do
  for link in 100 25; do
    log "projection: $p at $link Gbit/s"
    m=$([[ $link == 100 ]] && echo "$MODEL" || echo alpha-beta)
    t0=$(date +%s.%N)
    "$NP" simulate --graph "$W/g_${p}_$W4.json" --compute "$W/c_${p}_$W4.json" --ranks "$NS" \
      "${SHAPE[@]}" --pipeline "$p" --windows "$W4" --batch $((LOCAL * 2)) --link-gbit "$link" \
      --collectives-from-graph --model "$m" --route-steps 2 --json >"$W/p_${p}_$link.json"
    echo "$p $link $(awk "BEGIN {print $(date +%s.%N) - $t0}")" >>"$W/p_wall"
  done
done

# ---- nestpipe with latency-optimised collectives (Bruck All2All, recursive halving-doubling)
log "projection: nestpipe with Bruck and rhd collectives"
"$NP" simulate --graph "$W/g_nestpipe_$W4.json" --compute "$W/c_nestpipe_$W4.json" --ranks "$NS" \
  "${SHAPE[@]}" --pipeline nestpipe --windows "$W4" --batch $((LOCAL * 2)) --link-gbit 100 \
  --collectives-from-graph --model alpha-beta --route-steps 2 --a2a bruck --allreduce rhd --json \
  >"$W/p_nestpipe_100_fast.json"

# ---- nestpipe's efficiency at 1,536 against the batch per worker (100 Gbit/s, alpha-beta)
for b in $BATCHES; do
  log "batch per worker $b"
  mpi 2 "$NP" train --quiet --steps 12 --pipeline nestpipe --windows "$W4" --batch $((b * 2)) \
    --trace "$W/gb_$b.json" >/dev/null
  STARPU_SILENT=1 timeout 900 "$NP" train --quiet --steps 12 --pipeline nestpipe --windows "$W4" \
    --batch "$b" --trace "$W/cb_$b.json" >/dev/null
  "$NP" simulate --graph "$W/gb_$b.json" --compute "$W/cb_$b.json" --ranks "16,${NS##*,}" \
    --quiet --steps 12 --pipeline nestpipe --windows "$W4" --batch $((b * 2)) --link-gbit 100 \
    --collectives-from-graph --model alpha-beta --route-steps 1 --json >"$W/b_$b.json"
done

OUT=bench/results/$(date +%Y-%m-%d)-scale.md
[[ $QUICK == 1 ]] && OUT=$W/quick-scale.md
SVG=${OUT%.md}.svg
python3 bench/scale_report.py "$W" "$OUT" "$SVG" "$RATE" "$LOCAL" "$PIPES" "$WINS" "$RANKS_V2" \
  "$BATCHES" "$SG" "$(machine_section)" "$REPEATS"
log "wrote $OUT and $SVG"
[[ $QUICK == 1 ]] && cat "$OUT"
