#!/usr/bin/env bash
# The default model (DLRM) must not change with the code around it: trains the default
# shape and the benchmarks' Kaggle-like shape for a few steps on 1 and 2 ranks, sequential
# and nestpipe (and the reference trainer on 1 rank), SGD and row-wise Adagrad, and checks each --dump-params file's SHA-256
# against tests/golden/dlrm.sha256, recorded before the model became a layer graph.
# usage: test_golden.sh PATH/TO/nestpipe [--record]
set -u
NP=$1
HERE=$(cd "$(dirname "$0")" && pwd)
GOLD=$HERE/golden/dlrm.sha256
W=$(mktemp -d /tmp/np_golden_XXXXXX)
trap 'rm -rf "$W"' EXIT
export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME)
declare -A SHAPE=(
  [default]="--steps 3"
  [kaggle]="--rows 100000 --bottom 13-512-256-64-16 --top 512-256-1 --batch 2048 --steps 2"
)
KEY="$("$NP" --version | sed -n 's/^dense kernels: //p'); L1d $(getconf LEVEL1_DCACHE_SIZE 2>/dev/null); L2 $(getconf LEVEL2_CACHE_SIZE 2>/dev/null)"
KEY=${KEY// /_}
if [[ ${2:-} != --record ]] && ! grep -q -F " $KEY " "$GOLD"; then
  echo "SKIP: no golden record for the kernels of this machine ($KEY);"
  echo "  recorded: $(cut -d' ' -f2 "$GOLD" | sort -u | tr '\n' ' ')"
  echo "  record one with: bash tests/test_golden.sh build/nestpipe --record"
  exit 77
fi
pass=0 failed=0
out=$W/sums
for shape in default kaggle; do
  for R in 1 2; do
    for pipe in reference sequential nestpipe; do
      [[ $pipe == reference && $R == 2 ]] && continue
      eng=(--pipeline "$pipe")
      [[ $pipe == reference ]] && eng=(--engine reference)
      for optim in sgd rowwise-adagrad; do
        name="$shape R=$R $pipe $optim"
        # shellcheck disable=SC2086
        if ! timeout 300 "${MPIRUN[@]}" -np "$R" "$NP" train ${SHAPE[$shape]} --quiet \
          --eval-samples 64 "${eng[@]}" --sparse-optim "$optim" \
          --dump-params "$W/p" >"$W/log" 2>&1; then
          echo "FAIL $name: $(tail -n 3 "$W/log")"
          failed=$((failed + 1))
          continue
        fi
        echo "$(sha256sum <"$W/p" | cut -d' ' -f1) $KEY $name" >>"$out"
      done
    done
  done
done
if [[ ${2:-} == --record ]]; then
  { grep -v -F " $KEY " "$GOLD" 2>/dev/null || true; cat "$out"; } >"$W/new"
  cp "$W/new" "$GOLD"
  cat "$out"
  exit 0
fi
while read -r sum key rest; do
  want=$(grep -F " $key $rest" "$GOLD" | head -n1 | cut -d' ' -f1)
  if [[ "$sum" == "$want" ]]; then
    echo "ok   $rest: the recorded bytes"
    pass=$((pass + 1))
  else
    echo "FAIL $rest: dump sha256 $sum, expected ${want:-none recorded}"
    failed=$((failed + 1))
  fi
done <"$out"
echo "$pass passed, $failed failed"
((failed == 0))
