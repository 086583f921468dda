#!/usr/bin/env bash
# The collectives of issue 42 against the flat path they replace, on 4 ranks of 2
# pseudo-hosts (--ranks-per-host 2) over the emulated link (NP_LINK_GBIT, and NP_LINK_US:
# a per-message latency between the pseudo-hosts): "flat" is --a2a flat with one dense
# all-reduce a layer (--allreduce-bucket 0), the engine's collectives before; "fused" flat
# with the layers in one all-reduce (the default bucket); "hier" the two-level All2All and
# all-reduce with one bucket. The sides pace only what crosses between the pseudo-hosts, alternate run by run,
# and must train the same bytes (checked). samples/s are medians of the repeats.
# Writes bench/results/<date>-<cpu>-collectives.md.
#
#   bash bench/collectives.sh [--steps S] [--repeats R] [--rate G] [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BENCH_TORCH=system # no PyTorch side: do not set up its virtualenv
# shellcheck source=bench/lib.sh
. bench/lib.sh
STEPS=30 REPEATS=3 RATE=2 QUICK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  --quick) QUICK=1; shift ;;
  *) echo "collectives.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $STEPS =~ ^[1-9][0-9]*$ && $REPEATS =~ ^[1-9][0-9]*$ ]] ||
  { echo "collectives.sh: --steps and --repeats take a count" >&2; exit 2; }
[[ $RATE =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "collectives.sh: --rate takes Gbit/s, e.g. 2" >&2; exit 2; }
own_bench_setup collectives
LATS=(5 50)
PIPES=(nestpipe dbp)
if [[ $QUICK == 1 ]]; then STEPS=4 REPEATS=1 LATS=(5) PIPES=(nestpipe); fi

DATA=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --batch 2048 --eval-samples 2048 --quiet
  --bottom 13-512-256-64-16 --top 512-256-1 --windows 4 --ranks-per-host 2)
SIDES=("--a2a flat --allreduce-bucket 0" "--a2a flat" "--a2a hier")
RES=$W/res.tsv
: >"$RES"
for us in "${LATS[@]}"; do
  for p in "${PIPES[@]}"; do
    declare -a rates=("" "" "")
    for ((k = 1; k <= REPEATS; k++)); do
      for s in 0 1 2; do
        lib_log "$(date +%T) NP_LINK_US=$us $p side $s (${SIDES[s]}) run $k/$REPEATS"
        # shellcheck disable=SC2086 # the side's flags split on purpose
        NP_LINK_GBIT=$RATE NP_LINK_US=$us timeout 900 mpirun --allow-run-as-root --oversubscribe \
          -np 4 --mca btl self,vader -x STARPU_SILENT -x STARPU_HOME -x NP_LINK_GBIT -x NP_LINK_US \
          "$NP" train "${DATA[@]}" --pipeline "$p" --steps "$STEPS" ${SIDES[s]} \
          --metrics-json "$W/m.json" --dump-params "$W/$s.params" 2>"$W/err" ||
          { echo "collectives.sh: $p side $s failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
        rates[s]+="$(json_get "$W/m.json" samples_per_s) "
      done
    done
    cmp -s "$W/0.params" "$W/1.params" && cmp -s "$W/0.params" "$W/2.params" ||
      { echo "collectives.sh: NP_LINK_US=$us $p: the sides trained different models" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$us" "$p" "$(echo "${rates[0]}" | median_of)" \
      "$(echo "${rates[1]}" | median_of)" "$(echo "${rates[2]}" | median_of)" >>"$RES"
  done
done

[[ $QUICK == 1 ]] && OUT=$W/quick.md
{
  echo "# Two-level All2All and one all-reduce a step against the flat path ($STAMP)"
  echo
  echo "\`bash bench/collectives.sh --steps $STEPS --repeats $REPEATS --rate $RATE\`. 4 ranks as 2"
  echo "pseudo-hosts of 2 (\`--ranks-per-host 2\`) over the emulated link: NP_LINK_GBIT=$RATE"
  echo "Gbit/s a rank and NP_LINK_US microseconds for each message between the pseudo-hosts"
  echo "(paid one after another: the pessimistic end). flat: \`${SIDES[0]}\` (the engine's"
  echo "collectives before issue 42: one All2All over all ranks, one all-reduce a layer); fused:"
  echo "\`${SIDES[1]}\` (the default bucket: the layers in one all-reduce); hier: \`${SIDES[2]}\`"
  echo "(the two-level All2All and all-reduce, one bucket). All pace only what"
  echo "crosses between the pseudo-hosts. Data: ${DATA[*]}. The sides alternate run by run;"
  echo "samples/s are medians of $REPEATS runs of $STEPS steps (all-in); all train the same bytes"
  echo "(checked). On $NPROC cores the 4 ranks share them: the wire is emulated, the compute is real."
  echo
  echo "| NP_LINK_US | pipeline | flat samples/s | fused samples/s | hier samples/s | fused / flat | hier / flat |"
  echo "|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r us p f u h; do
    awk -v us="$us" -v p="$p" -v f="$f" -v u="$u" -v h="$h" 'BEGIN {
      printf "| %s | %s | %.0f | %.0f | %.0f | %.3fx | %.3fx |\n", us, p, f, u, h, u / f, h / f }'
  done <"$RES"
  echo
  machine_section
} >"$OUT"
echo "collectives.sh: wrote $OUT" >&2
cat "$OUT"
