#!/usr/bin/env bash
# Critical-path priorities from the step graph (graph/critical.c: computed before the first
# step from a cost model of the shape) against the base build's (tasks/critical.c: the
# fourth step recorded with StarPU's measured durations) and against fixed priorities, under
# dbp and nestpipe on the Kaggle-like DLRM, 1 and 2 ranks, the default policy (lws, which
# honours priorities). The three sides alternate run by run; samples/s are medians of the
# repeats; the dumps of all three are the same bytes (priorities only reorder work).
# Writes bench/results/<date>-<cpu>-priorities.md.
#
#   bash bench/priorities.sh --base OTHER/nestpipe [--steps S] [--repeats R] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
ab_setup priorities "$@"
base_bench_facts
ab_result_path priorities

DATA=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --batch 2048 --eval-samples 2048 --quiet
  --bottom 13-512-256-64-16 --top 512-256-1 --windows 4)
RES=$W/res.tsv
: >"$RES"
# side: a binary and its priorities
SIDES=("$NP fixed" "$BASE critical-path" "$NP critical-path")
for R in 1 2; do
  for p in dbp nestpipe; do
    declare -a rates=("" "" "")
    for ((k = 1; k <= REPEATS; k++)); do
      for s in 0 1 2; do
        read -r bin prio <<<"${SIDES[s]}"
        lib_log "$(date +%T) R=$R $p side $s ($prio) run $k/$REPEATS"
        np_launch "$bin" "$R" "${DATA[@]}" --pipeline "$p" --steps "$STEPS" --priorities "$prio" \
          --metrics-json "$W/m.json" --dump-params "$W/$s.params" 2>"$W/err" ||
          { echo "priorities.sh: R=$R $p side $s failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
        rates[s]+="$(json_get "$W/m.json" samples_per_s) "
      done
    done
    if ! cmp -s "$W/0.params" "$W/1.params" || ! cmp -s "$W/0.params" "$W/2.params"; then
      echo "priorities.sh: R=$R $p: the three sides trained different models" >&2
      exit 1
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$R" "$p" "$(echo "${rates[0]}" | median_of)" \
      "$(echo "${rates[1]}" | median_of)" "$(echo "${rates[2]}" | median_of)" >>"$RES"
  done
done

{
  echo "# Critical-path priorities from the step graph ($STAMP)"
  echo
  echo "\`bash bench/priorities.sh --base <a build of d7a8a22> --steps $STEPS --repeats $REPEATS\`."
  echo "fixed: this build, \`--priorities fixed\`. recorded: the base ($BASE_VERSION), whose"
  echo "critical-path priorities came from the fourth step, recorded with StarPU's measured"
  echo "durations (fixed priorities before it). graph: this build, critical-path priorities from"
  echo "the step graph and the shape's cost model before the first step. Data: ${DATA[*]}; the"
  echo "default policy (lws). The sides alternate run by run; samples/s are medians of $REPEATS runs"
  echo "of $STEPS steps (all-in); the dumps of the three sides are the same bytes (checked)."
  echo
  echo "| ranks | pipeline | fixed samples/s | recorded | graph | graph / recorded | graph / fixed |"
  echo "|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r R p f r g; do
    awk -v R="$R" -v p="$p" -v f="$f" -v r="$r" -v g="$g" 'BEGIN {
      printf "| %s | %s | %.0f | %.0f | %.0f | %.3fx | %.3fx |\n", R, p, f, r, g, g / r, g / f }'
  done <"$RES"
  echo
  machine_section
} >"$OUT"
echo "priorities.sh: wrote $OUT" >&2
cat "$OUT"
