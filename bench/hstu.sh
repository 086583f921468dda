#!/usr/bin/env bash
# The paper's sequence workload (docs/model.md "HSTU"): --model hstu at a shape like the
# paper's (histories of 200 items, dim 64, 2 HSTU blocks, a million items), all measured in
# this one run on the same records (`nestpipe generate` of the planted Markov chain):
# - quality and speed against PyTorch: nestpipe on 1 rank and bench/hstu_torch.py (the same
#   model, negatives, initial distributions, optimizers, batch order and budget), HR@10 and
#   NDCG@10 over the full item table, samples/s (medians of interleaved repeats); repeat k
#   runs both sides with --seed k (the negatives; the records stay) and, with --init same
#   (the default), from the same initial values: PyTorch's draw with torch seed k, written
#   as a dump (bench/hstu_torch.py --write-init) that nestpipe reads with --init-params;
#   --init own lets each side draw its own from the same distributions;
# - the pipelines at 2 ranks over the emulated link (NP_LINK_GBIT, bench/README.md) at each
#   rate of --gbit: samples/s of sequential, dbp, fwp and nestpipe (medians of untraced
#   runs), and from one traced run each the lookup and exchange time and the part of it
#   left exposed.
# Writes bench/results/<date>-hstu.md.
#
# --quality-only skips the pipelines and the speed table (for a machine that is not quiet).
#
#   bash bench/hstu.sh [--steps S] [--repeats R] [--pipe-steps S] [--gbit "10 1"]
#                      [--init same|own] [--quality-only] [--quick]
set -euo pipefail
ARGS=${*:+ $*}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STEPS=300 REPEATS=3 PIPE_STEPS=12 GBIT="10 1" QUICK=0 WINDOWS=4 INIT=same QONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --pipe-steps) PIPE_STEPS=${2:?--pipe-steps needs a value}; shift 2 ;;
  --gbit) GBIT=${2:?--gbit needs a value}; shift 2 ;;
  --init) INIT=${2:?--init needs same or own}; shift 2 ;;
  --quality-only) QONLY=1; shift ;;
  --quick) QUICK=1; shift ;;
  -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "hstu.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for v in STEPS REPEATS PIPE_STEPS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "hstu.sh: --${v,,} must be a positive whole number" >&2; exit 2; }
done
[[ $INIT == same || $INIT == own ]] || { echo "hstu.sh: --init takes same or own, got '$INIT'" >&2; exit 2; }
for g in $GBIT; do
  [[ $g =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "hstu.sh: --gbit takes numbers (Gbit/s), got '$g'" >&2; exit 2; }
done
NP=$ROOT/build/nestpipe
[[ -x $NP ]] || { echo "hstu.sh: build/nestpipe not found; build first: bash .ci/build" >&2; exit 2; }
ROWS=1000000 L=200 K=64 DIM=64 BATCH=128 EVAL=2000
if ((QUICK)); then
  ROWS=20000 L=40 K=16 DIM=16 BATCH=64 EVAL=200 STEPS=20 REPEATS=1 PIPE_STEPS=6
fi
MODEL=(--model hstu --tables 1 --rows "$ROWS" --seq-len "$L" --seq-negatives "$K" --dim "$DIM"
  --hstu-blocks 2 --hstu-heads 2 --seq-clusters 32 --sparse-optim rowwise-adagrad --lr 0.1
  --batch "$BATCH" --eval-samples "$EVAL")
WORK=$(mktemp -d /tmp/np_hstu_XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SUFFIX=""
((QONLY)) && SUFFIX=-quality
OUT=bench/results/$(date +%F)-hstu$SUFFIX.md
mkdir -p bench/results
export STARPU_SILENT=1 STARPU_HOME=$WORK/starpu OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log() { echo "hstu.sh: $(date +%T) $*" >&2; }
# shellcheck source=bench/lib.sh disable=SC1091
. bench/lib.sh
machine_facts
NPROC=$(nproc)
MKL_SHIM=$WORK/mkl_intel_cpu.so
gcc -O2 -shared -fPIC bench/mkl_intel_cpu.c -o "$MKL_SHIM" 2>/dev/null || MKL_SHIM=""
TORCH_ENV=()
if [[ -n $PY ]]; then
  torch_isa_forced "$PY" "$MKL_SHIM"
  read -ra TORCH_ENV <<<"$FORCED_ENV"
  log "PyTorch ${TORCH_TAGS[0]}: $BLAS_DEFAULT; ISA forced: $FORCED_NOTE"
fi

if [[ $INIT == same && -z $PY ]]; then
  log "no PyTorch ($TORCH_MISSING): nestpipe alone, --init own"
  INIT=own
fi

# the records: training batches of STEPS steps (held-out records between them) and EVAL
# held-out records, eval-every 10
RECORDS=$(((STEPS * BATCH * 10 + 8) / 9 + 10 * EVAL))
log "generating $RECORDS records"
"$NP" generate "$WORK/data.bin" --samples "$RECORDS" "${MODEL[@]}" >/dev/null
DATA=(--data "bin:$WORK/data.bin")

jget() { "$JPY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d' + sys.argv[2]))" "$@"; }
np1() { timeout 3600 "$NP" train "${MODEL[@]}" "${DATA[@]}" --quiet "$@"; }
torch1() {
  env "${TORCH_ENV[@]}" timeout 3600 "$PY" bench/hstu_torch.py --data "$WORK/data.bin" --rows "$ROWS" \
    --dim "$DIM" --seq-len "$L" --seq-negatives "$K" --blocks 2 --heads 2 --batch "$BATCH" \
    --steps "$STEPS" --lr 0.1 --eval-samples "$EVAL" --threads "$NPROC" "$@"
}

# ---- part 1: quality and speed, 1 rank against PyTorch, interleaved; run k has seed k
: >"$WORK/quality.tsv"
NP_RATES="" T_RATES=""
for ((k = 1; k <= REPEATS; k++)); do
  INIT_ARGS=()
  if [[ $INIT == same ]]; then
    torch1 --seed "$k" --torch-seed "$k" --write-init "$WORK/init.params"
    INIT_ARGS=(--init-params "$WORK/init.params")
  fi
  log "nestpipe 1 rank, run $k/$REPEATS"
  np1 --steps "$STEPS" --seed "$k" "${INIT_ARGS[@]}" --metrics-json "$WORK/np.json"
  NP_RATES+="$(jget "$WORK/np.json" "['samples_per_s']") "
  printf 'nestpipe\t%s\t%s\t%s\t%s\t%s\n' "$k" "$(jget "$WORK/np.json" "['eval_hr10']")" \
    "$(jget "$WORK/np.json" "['eval_ndcg10']")" "$(jget "$WORK/np.json" "['train_loss_first']")" \
    "$(jget "$WORK/np.json" "['train_loss']")" >>"$WORK/quality.tsv"
  if [[ -n $PY ]]; then
    log "PyTorch, run $k/$REPEATS"
    torch1 --seed "$k" --torch-seed "$k" "${INIT_ARGS[@]}" >"$WORK/torch.json"
    T_RATES+="$(jget "$WORK/torch.json" "['samples_per_s_median']") "
    printf 'PyTorch\t%s\t%s\t%s\t%s\t%s\n' "$k" "$(jget "$WORK/torch.json" "['eval_hr10']")" \
      "$(jget "$WORK/torch.json" "['eval_ndcg10']")" "$(jget "$WORK/torch.json" "['train_loss_first']")" \
      "$(jget "$WORK/torch.json" "['train_loss']")" >>"$WORK/quality.tsv"
  fi
done
rm -f "$WORK/init.params"

# ---- part 2: the pipelines at 2 ranks over the emulated link
np2() { # GBIT ARGS...
  local g=$1
  shift
  NP_LINK_GBIT=$g timeout 3600 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
    -x STARPU_SILENT -x STARPU_HOME -x NP_LINK_GBIT "$NP" train "${MODEL[@]}" "${DATA[@]}" \
    --eval-samples 0 --quiet --windows "$WINDOWS" "$@"
}
PIPES=(sequential dbp fwp nestpipe)
WARM=2
: >"$WORK/pipes.tsv"
((QONLY)) && GBIT=""
for g in $GBIT; do
declare -A RATES
for p in "${PIPES[@]}"; do RATES[$p]=""; done
for ((k = 1; k <= REPEATS; k++)); do
  for p in "${PIPES[@]}"; do
    log "2 ranks, $g Gbit/s, $p, run $k/$REPEATS"
    np2 "$g" --pipeline "$p" --steps "$PIPE_STEPS" --metrics-json "$WORK/p.json"
    RATES[$p]+="$(jget "$WORK/p.json" "['samples_per_s']") "
  done
done
for p in "${PIPES[@]}"; do
  log "2 ranks, $g Gbit/s, $p, traced"
  np2 "$g" --pipeline "$p" --steps "$PIPE_STEPS" --trace "$WORK/t.json"
  "$NP" trace report "$WORK/t.json" --json --from-batch "$WARM" >"$WORK/rep.json"
  NT=$((PIPE_STEPS - WARM)) o="['overall']"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$g" "$p" "$(echo "${RATES[$p]}" | median_of)" "${RATES[$p]}" \
    "$(jget "$WORK/rep.json" "${o}['lookup_us'] / 2 / $NT / 1e3")" \
    "$(jget "$WORK/rep.json" "${o}['lookup_exposed_us'] / 2 / $NT / 1e3")" \
    "$(jget "$WORK/rep.json" "${o}['exchange_us'] / 2 / $NT / 1e3")" \
    "$(jget "$WORK/rep.json" "${o}['exchange_exposed_us'] / 2 / $NT / 1e3")" >>"$WORK/pipes.tsv"
done
unset RATES
done

# ---- the result
{
  echo "# HSTU: nestpipe against PyTorch, and the pipelines with sequences ($(date +%F))"
  echo
  echo "\`bash bench/hstu.sh$ARGS\` (steps $STEPS, repeats $REPEATS, init $INIT$( ((QONLY)) || echo ", pipeline steps $PIPE_STEPS, links $GBIT Gbit/s"))."
  echo "Shape: \`${MODEL[*]}\`; $RECORDS records of the planted Markov chain"
  echo "(docs/data.md \"Sequences\"), generated once and read by both sides."
  echo
  machine_section
  echo
  echo "## Quality and speed, one process"
  echo
  echo "Both train $STEPS steps of $BATCH sequences on the same records in the same order,"
  echo "then rank each of the first $EVAL held-out sequences' last item against all $ROWS items."
  if [[ $INIT == same ]]; then
    echo "Run k of each side has --seed k (the same negatives on both sides) and starts from the"
    echo "same initial values (PyTorch's draw with torch seed k, read by nestpipe with --init-params)."
  else
    echo "Run k of each side has --seed k: the same negatives on both sides, initial values drawn"
    echo "from the same distributions (not the same values)."
  fi
  echo "Train loss: the first step's, then the mean of the last max(1, steps/10) steps."
  ((QONLY)) || echo "samples/s: medians of the $REPEATS interleaved runs (nestpipe's figure includes reading the batches; PyTorch's is its median step, the batches prepared apart)."
  echo
  echo "| side | seed | HR@10 | NDCG@10 | train loss first → end |"
  echo "|---|---|---|---|---|"
  while IFS=$'\t' read -r side k hr nd l0 l1; do
    printf '| %s | %s | %.4f | %.4f | %.4f → %.4f |\n' "$side" "$k" "$hr" "$nd" "$l0" "$l1"
  done <"$WORK/quality.tsv"
  awk -F'\t' '{n[$1]++; h[$1] += $3; g[$1] += $4} END {for (s in n) printf "| %s | mean | %.4f | %.4f | |\n", s, h[s] / n[s], g[s] / n[s]}' \
    "$WORK/quality.tsv" | sort
  echo
  # paired by seed: nestpipe minus PyTorch
  awk -F'\t' '$1 == "nestpipe" {h[$2] = $3; g[$2] = $4} $1 == "PyTorch" && ($2 in h) {
      n++; dh = h[$2] - $3; dg = g[$2] - $4; sh += dh; sg += dg; qh += dh * dh; qg += dg * dg
      if (dh < 0) lh++; if (dg < 0) lg++ }
    END { if (n) {
      sdh = n > 1 ? sqrt((qh - sh * sh / n) / (n - 1)) : 0; sdg = n > 1 ? sqrt((qg - sg * sg / n) / (n - 1)) : 0
      printf "Paired by seed (nestpipe minus PyTorch, %d seeds): HR@10 mean %+.4f (sd %.4f, lower on %d seeds), NDCG@10 mean %+.4f (sd %.4f, lower on %d seeds).\n", n, sh / n, sdh, lh, sg / n, sdg, lg } }' "$WORK/quality.tsv"
  echo
  if ((QONLY)); then
    echo "(--quality-only: speed and the pipelines not measured in this run.)"
  else
  echo "| side | samples/s (median) | runs |"
  echo "|---|---|---|"
  printf '| nestpipe, 1 rank | %.0f | %s |\n' "$(echo "$NP_RATES" | median_of)" "$(printf '%.0f ' $NP_RATES)"
  if [[ -n $PY ]]; then
    printf '| PyTorch %s, %s threads | %.0f | %s |\n' "${TORCH_TAGS[0]}" "$NPROC" \
      "$(echo "$T_RATES" | median_of)" "$(printf '%.0f ' $T_RATES)"
  else
    echo "| PyTorch | not measured: $TORCH_MISSING | |"
  fi
  if [[ -n $PY ]]; then
    echo
    echo "PyTorch's kernels: $BLAS_DEFAULT; its ISA settings (bench/lib.sh torch_isa_forced),"
    echo "applied to every PyTorch run: ${FORCED_NOTE:-none}."
  fi
  echo
  echo "## The pipelines with sequences, 2 ranks over an emulated link"
  echo
  echo "Per rank and step, from one traced run of each (the first $WARM steps left out):"
  echo "lookup = routing, dedup and the embedding reads and writes; exchange = the row and"
  echo "gradient exchanges and the dense all-reduce; exposed = not overlapped by compute."
  echo "samples/s: medians of $REPEATS untraced runs, modes interleaved; windows $WINDOWS."
  echo
  echo "| link Gbit/s | pipeline | samples/s (median) | runs | vs sequential | lookup ms | exposed | exchange ms | exposed |"
  echo "|---|---|---|---|---|---|---|---|---|"
  while IFS=$'\t' read -r g p med runs lk lkx ex exx; do
    seq_rate=$(awk -F'\t' -v g="$g" '$1 == g && $2 == "sequential" {print $3}' "$WORK/pipes.tsv")
    printf '| %s | %s | %.0f | %s | %.2fx | %.1f | %.1f | %.1f | %.1f |\n' "$g" "$p" "$med" \
      "$(printf '%.0f ' $runs)" "$(awk -v a="$med" -v b="$seq_rate" 'BEGIN {print a / b}')" \
      "$lk" "$lkx" "$ex" "$exx"
  done <"$WORK/pipes.tsv"
  fi
} >"$OUT"
log "wrote $OUT"
