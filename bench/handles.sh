#!/usr/bin/env bash
# Per-node parameter handles: this build against a base build (where every layer task read,
# and every dense update wrote, the whole dense-parameter block) under dbp and nestpipe, on
# the Kaggle-like DLRM and a DCN-v2 of the same data, 1 and 2 ranks. Both binaries run in
# this one script, alternating run by run; samples/s are medians of the repeats, the step
# time is the batch over them. Both must train the same model: the dumps of the last run of
# each side are compared byte for byte first (a result over different arithmetic would mean
# nothing). Writes bench/results/<date>-handles.md.
#
#   bash bench/handles.sh --base OTHER/nestpipe [--steps S] [--repeats R] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
ab_setup handles "$@"
STAMP=$(date +%Y-%m-%d)
OUT=bench/results/$STAMP-handles.md
mkdir -p bench/results

DATA=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --batch 2048 --eval-samples 2048 --quiet)
declare -A MODEL=(
  [dlrm]="--bottom 13-512-256-64-16 --top 512-256-1"
  [dcnv2]="--model dcnv2 --bottom 13-512-256-64-16 --cross-layers 3 --cross-rank 64 --deep 512-256 --top 256-1"
)

launch() { np_launch "$@"; }
jget() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
median() { median_of; }

RES=$W/res.tsv
: >"$RES"
for model in dlrm dcnv2; do
  for R in 1 2; do
    for p in dbp nestpipe; do
      # shellcheck disable=SC2086 # the model's flags are words
      rates=$(ab_rates "$BASE" "$NP" "$R" "$W" "$REPEATS" "${DATA[@]}" ${MODEL[$model]} \
        --pipeline "$p" --steps "$STEPS") || { echo "handles.sh: $model R=$R $p failed" >&2; exit 1; }
      read -r rb rn <<<"$rates"
      printf '%s\t%s\t%s\t%s\t%s\n' "$model" "$R" "$p" "$rb" "$rn" >>"$RES"
    done
  done
done

# Where the dependency went: one traced run of each side (dlrm and dcnv2, 1 rank, dbp):
# how long after batch t's last dense update batch t+1's first layer task starts, and how
# many of t+1's layer tasks start before t's last update ends (medians over the batches)
TRACE_TXT=$W/trace.txt
: >"$TRACE_TXT"
for model in dlrm dcnv2; do
  for side in base new; do
    bin=$NP
    [[ $side == base ]] && bin=$BASE
    # shellcheck disable=SC2086
    launch "$bin" 1 "${DATA[@]}" ${MODEL[$model]} --pipeline dbp --steps 20 \
      --trace "$W/t-$side.json" 2>"$W/err" || { echo "handles.sh: failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
  done
  python3 - "$model" "$W/t-base.json" "$W/t-new.json" >>"$TRACE_TXT" <<'EOF2'
import json, statistics, sys
def boundary(path):
    by = {}
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") != "X": continue
        a = e["args"]
        by.setdefault(a["batch"], []).append((a["kind"], e["ts"], e["ts"] + e["dur"]))
    gaps, early = [], []
    for b in sorted(by):
        if b < 3 or b + 1 not in by: continue  # the first batches warm up
        last = max(t1 for k, t0, t1 in by[b] if k == "dense_update")
        first = min(t0 for k, t0, t1 in by[b + 1] if k == "fwd")
        gaps.append(first - last)
        early.append(sum(1 for k, t0, t1 in by[b + 1] if k == "fwd" and t0 < last))
    return statistics.median(gaps), statistics.median(early)
(gb, eb), (gn, en) = boundary(sys.argv[2]), boundary(sys.argv[3])
print("| %s | %.1f | %.1f | %g | %g |" % (sys.argv[1], gb, gn, eb, en))
EOF2
done

base_bench_facts
{
  echo "# Per-node parameter handles: step time under dbp and nestpipe ($STAMP)"
  echo
  echo "\`bash bench/handles.sh --base <a build of the commit before> --steps $STEPS --repeats $REPEATS\`."
  echo "Before: every layer task read, and every dense update wrote, the whole dense-parameter"
  echo "block as one StarPU handle ($BASE_VERSION, the base binary). After: one handle per node"
  echo "(a list filter over the block), so batch t+1's first layer waits only for its own node's"
  echo "update. Data: ${DATA[*]}. The two sides alternate run by run; samples/s are medians of"
  echo "$REPEATS runs of $STEPS steps each (all-in: generation, every stage and the updates), the"
  echo "step time is the global batch over them. The dumps of both sides are the same bytes"
  echo "(checked for every row)."
  echo
  echo "| model | ranks | pipeline | before samples/s | after samples/s | step before ms | step after ms | after / before |"
  echo "|---|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r model R p b a; do
    awk -v m="$model" -v R="$R" -v p="$p" -v b="$b" -v a="$a" 'BEGIN {
      printf "| %s | %s | %s | %.0f | %.0f | %.2f | %.2f | %.3fx |\n", m, R, p, b, a,
        2048000 / b, 2048000 / a, a / b }'
  done <"$RES"
  echo
  echo "Models: dlrm = \`${MODEL[dlrm]}\`; dcnv2 = \`${MODEL[dcnv2]}\`."
  echo
  echo "The batch boundary in a trace of each side (1 rank, dbp, 20 steps, batches 3 on;"
  echo "medians over the boundaries): the time from batch t's last dense update to batch"
  echo "t+1's first layer task, and how many of t+1's layer tasks start before t's last update"
  echo "ends."
  echo
  echo "| model | gap before us | gap after us | early layer tasks before | after |"
  echo "|---|---|---|---|---|"
  cat "$TRACE_TXT"
  echo
  machine_section
} >"$OUT"
echo "handles.sh: wrote $OUT" >&2
cat "$OUT"
