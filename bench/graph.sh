#!/usr/bin/env bash
# The step graph (graph/): this build, which walks each step's graph once and submits every
# node through its contract (with each task's buffers checked against it), against a base
# build whose schedule submitted the tasks directly (the commit before graph/), under
# sequential, dbp and nestpipe on the Kaggle-like DLRM and a DCN-v2, 1 and 2 ranks. The two
# sides alternate run by run; samples/s are medians of the repeats; the dumps of both are
# the same bytes (checked). Writes bench/results/<date>-<cpu>-graph.md.
#
#   bash bench/graph.sh --base OTHER/nestpipe [--steps S] [--repeats R] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
ab_setup graph "$@"
base_bench_facts
ab_result_path graph

DATA=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --batch 2048 --eval-samples 2048 --quiet)
declare -A MODEL=(
  [dlrm]="--bottom 13-512-256-64-16 --top 512-256-1"
  [dcnv2]="--model dcnv2 --bottom 13-512-256-64-16 --cross-layers 3 --cross-rank 64 --deep 512-256 --top 256-1"
)
RES=$W/res.tsv
: >"$RES"
for model in dlrm dcnv2; do
  for R in 1 2; do
    for p in sequential dbp nestpipe; do
      # shellcheck disable=SC2086 # the model's flags are words
      rates=$(ab_rates "$BASE" "$NP" "$R" "$W" "$REPEATS" "${DATA[@]}" ${MODEL[$model]} \
        --pipeline "$p" --windows 4 --steps "$STEPS") || { echo "graph.sh: $model R=$R $p failed" >&2; exit 1; }
      read -r rb rn <<<"$rates"
      printf '%s\t%s\t%s\t%s\t%s\n' "$model" "$R" "$p" "$rb" "$rn" >>"$RES"
    done
  done
done

{
  echo "# The step graph: step time against the build before it ($STAMP)"
  echo
  echo "\`bash bench/graph.sh --base <a build of the commit before graph/> --steps $STEPS --repeats $REPEATS\`."
  echo "Before ($BASE_VERSION, the base binary): runtime/engine/schedule.c submitted each task with the"
  echo "handles and modes its tasks/ file listed. After: graph/step.c walks the step and"
  echo "runtime/engine/submit.c submits each node over its contract's buffers (graph/contract.c),"
  echo "np_task_submit comparing every task's buffers with the contract. Data: ${DATA[*]};"
  echo "--windows 4 under every pipeline (sequential and dbp run the four windows one after"
  echo "another; nestpipe overlaps them). The sides alternate run by run; samples/s are medians of $REPEATS runs of $STEPS"
  echo "steps (all-in); the dumps of both sides are the same bytes (checked for every row)."
  echo
  echo "| model | ranks | pipeline | before samples/s | after samples/s | after / before |"
  echo "|---|---|---|---|---|---|"
  while IFS=$'\t' read -r model R p b a; do
    awk -v m="$model" -v R="$R" -v p="$p" -v b="$b" -v a="$a" 'BEGIN {
      printf "| %s | %s | %s | %.0f | %.0f | %.3fx |\n", m, R, p, b, a, a / b }'
  done <"$RES"
  echo
  echo "Models: dlrm = \`${MODEL[dlrm]}\`; dcnv2 = \`${MODEL[dcnv2]}\`."
  echo
  machine_section
} >"$OUT"
echo "graph.sh: wrote $OUT" >&2
cat "$OUT"
