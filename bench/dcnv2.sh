#!/usr/bin/env bash
# DCN-v2: nestpipe train --model dcnv2 vs a PyTorch CPU DCN-v2 of the same shape, full-rank
# (--cross-rank 0) and low-rank (--cross-rank 64) cross layers, all measured in this one run.
# Writes bench/results/<date>-dcnv2.md. See bench/README.md.
#
#   bash bench/dcnv2.sh [--steps S] [--repeats R] [--warmup W] [--engine E] [--quick]
#                       [--torch-only] [--out FILE]
#
# Needs the project built into build/ with --model dcnv2 (bash .ci/build). The PyTorch rows
# use torch from PyPI, which bench/lib.sh installs into a cached virtualenv on first use (about
# 3 GB; BENCH_TORCH=system or PYTHON=... picks another). A run that fails is recorded as
# "failed: <message>" in its row and the run carries on.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

STEPS=20
REPEATS=5
WARMUP=3
ENGINE=""
QUICK=0
TORCH_ONLY=0
OUT=""
RUN_TIMEOUT=${RUN_TIMEOUT:-300} # seconds, per process
usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --warmup) WARMUP=${2:?--warmup needs a value}; shift 2 ;;
  --engine) ENGINE=${2:?--engine needs a value}; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --torch-only) TORCH_ONLY=1; shift ;;
  --out) OUT=${2:?--out needs a value}; shift 2 ;;
  -h | --help) usage 0 ;;
  *) echo "dcnv2.sh: unknown option '$1'" >&2; usage 2 >&2 ;;
  esac
done
# --quick checks that every piece runs; its numbers mean nothing.
if [[ $QUICK == 1 ]]; then
  STEPS=3 REPEATS=2 WARMUP=1
fi
for v in STEPS REPEATS WARMUP; do
  if ! [[ ${!v} =~ ^[0-9]+$ ]]; then
    echo "dcnv2.sh: --${v,,} must be a whole number, got '${!v}'" >&2
    exit 2
  fi
done
if ! [[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]]; then
  echo "dcnv2.sh: RUN_TIMEOUT must be a whole number of seconds, got '$RUN_TIMEOUT'" >&2
  exit 2
fi
if ((STEPS < 1 || REPEATS < 1)); then
  echo "dcnv2.sh: --steps and --repeats must be at least 1" >&2
  exit 2
fi
if [[ -n $ENGINE && $ENGINE != reference && $ENGINE != starpu ]]; then
  echo "dcnv2.sh: --engine must be reference or starpu, got '$ENGINE'" >&2
  exit 2
fi

# The benchmark shape: the Kaggle-like one of bench/run.sh with a DCN-v2 head. Written once,
# used by both sides; only --cross-rank changes between the two variants.
TABLES=26 ROWS=100000 ZIPF=1.05 DIM=16 BOTTOM=13-512-256-64-16 BATCH=2048
CROSS_LAYERS=3 DEEP=512-256 TOP=1 RANKS=(0 64)
SHAPE=(--tables "$TABLES" --rows "$ROWS" --zipf "$ZIPF" --dim "$DIM" --bottom "$BOTTOM"
  --top "$TOP" --batch "$BATCH" --cross-layers "$CROSS_LAYERS" --deep "$DEEP")

# $NESTPIPE: another binary to measure (default: this checkout's build).
NESTPIPE=${NESTPIPE:-build/nestpipe}
if [[ $TORCH_ONLY == 0 ]]; then
  if [[ ! -x $NESTPIPE ]]; then
    echo "dcnv2.sh: $NESTPIPE not found; build the project first: bash .ci/build" >&2
    exit 2
  fi
  HELP=$("$NESTPIPE" train --help 2>&1 || true)
  if [[ $HELP != *--model* ]]; then
    echo "dcnv2.sh: '$NESTPIPE train --help' does not mention --model: this build has no" \
      "DCN-v2 (--model dcnv2). Rebuild from a checkout that has it (bash .ci/build), or pass" \
      "--torch-only to measure the PyTorch side alone." >&2
    exit 2
  fi
fi
NPROC=$(nproc)
DATE=$(date +%F)
[[ -n $OUT ]] || OUT=bench/results/$DATE-dcnv2.md
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
log() { echo "dcnv2.sh: $(date +%T) $*" >&2; }

# The PyTorch builds to measure (TORCH_PYS, TORCH_TAGS, TORCH_SHOWN, TORCH_LINES; or
# TORCH_MISSING), JPY, json_get, is_finite.
# shellcheck source=bench/lib.sh disable=SC1091
. bench/lib.sh

# ---- the sides. Each appends one line to $RES: rank, label, "ok" and its samples/s per run,
# note; or rank, label, "failed" and the message.
RES=$WORK/results.tsv
: >"$RES"
record_ok() { printf '%s\t%s\tok\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RES"; }
record_fail() {
  printf '%s\t%s\tfailed\t%s\t\n' "$1" "$2" "$(printf '%s' "$3" | tr '\t\n|' '  /')" >>"$RES"
}
failure() { # RC ERRFILE -> one line saying why a process failed
  if (($1 == 124)); then echo "timed out after ${RUN_TIMEOUT} s"; else tail -n 1 "$2"; fi
}

# nestpipe: one process per run, samples/s from its --metrics-json.
NP_ENGINE=()
if [[ -n $ENGINE ]]; then NP_ENGINE=(--engine "$ENGINE"); fi
ENGINE_RAN="?"
run_nestpipe() { # RANK [LABEL-SUFFIX FLAG...]
  local rank=$1 label="nestpipe${2:-}" rates="" r rc m=$WORK/m.json steps loss model ran
  local extra=("${@:3}")
  for ((r = 1; r <= REPEATS; r++)); do
    log "$label, cross rank $rank, run $r/$REPEATS"
    rm -f "$m"
    rc=0
    # Eval runs after the timed loop; skipping it only saves wall time.
    timeout "$RUN_TIMEOUT" "$NESTPIPE" train --model dcnv2 --cross-rank "$rank" \
      "${NP_ENGINE[@]}" "${SHAPE[@]}" --steps "$STEPS" --eval-samples 0 --quiet \
      --metrics-json "$m" "${extra[@]}" >"$WORK/out" 2>"$WORK/err" || rc=$?
    if ((rc != 0)); then
      record_fail "$rank" "$label" "$(failure "$rc" "$WORK/err")"
      return
    fi
    # Validate before reporting: every step ran to a finite loss, and (where the metrics
    # say which model ran) the model is DCN-v2.
    steps=$(json_get "$m" steps) || steps=""
    loss=$(json_get "$m" train_loss) || loss=""
    model=$(json_get "$m" model) || model=""
    ran=$(json_get "$m" engine) || ran=""
    if [[ $steps != "$STEPS" || -n $model && $model != dcnv2 ]] ||
      [[ -n $ENGINE && $ran != "$ENGINE" ]] || ! is_finite "${loss:-nan}"; then
      record_fail "$rank" "$label" "invalid run: model '${model:-not in the metrics}',\
 engine '$ran', steps '$steps' (want $STEPS), train_loss '$loss'"
      return
    fi
    ENGINE_RAN=$ran
    rates+="$(json_get "$m" samples_per_s) "
  done
  if [[ -z $model ]]; then model="not named in the metrics"; fi
  if ((${#extra[@]})); then
    record_ok "$rank" "$label" "$rates" "engine ${ran:-?}, model $model;\
 the same batches read from a file written beforehand by nestpipe generate (PyTorch's footing)"
  else
    record_ok "$rank" "$label" "$rates" "engine ${ran:-?}, model $model;\
 all-in: every step from the first, synthetic batch generation included"
  fi
}
# The records generated once beforehand, as PyTorch's are (bench/run.sh says why this and
# not the metrics' samples_per_s_compute): the same batches, read from a file.
PREGEN=$WORK/pregen.bin
PREGEN_RECORDS=$(((STEPS * BATCH * 10 + 8) / 9 + BATCH)) # train split of --eval-every 10
run_nestpipe_pregen() { # RANK
  if [[ ! -f $PREGEN ]] && ! timeout "$RUN_TIMEOUT" "$NESTPIPE" generate "$PREGEN" --samples "$PREGEN_RECORDS" \
    "${SHAPE[@]}" >"$WORK/out" 2>"$WORK/err"; then
    record_fail "$1" "nestpipe, data pre-generated" "$(tail -n 1 "$WORK/err")"
    return
  fi
  run_nestpipe "$1" ", data pre-generated" --data "bin:$PREGEN"
}

# PyTorch with 1 thread and with every core, each build bench/lib.sh found, as bench/run.sh
# (OPENBLAS_NUM_THREADS following the thread count unless set); the fastest is "PyTorch best".
TORCH_THREADS=(1)
if ((NPROC > 1)); then TORCH_THREADS+=("$NPROC"); fi
run_torch() { # RANK
  local rank=$1 i t label rc
  if ((${#TORCH_PYS[@]} == 0)); then
    for t in "${TORCH_THREADS[@]}"; do
      label="PyTorch, $t thread"
      if ((t > 1)); then label+="s"; fi
      record_fail "$rank" "$label" "$TORCH_MISSING"
    done
  fi
  for i in "${!TORCH_PYS[@]}"; do
    for t in "${TORCH_THREADS[@]}"; do
      label="PyTorch ${TORCH_TAGS[i]}, $t thread"
      if ((t > 1)); then label+="s"; fi
      log "$label, cross rank $rank, $REPEATS runs"
      rc=0
      OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$t} timeout "$RUN_TIMEOUT" "${TORCH_PYS[i]}" \
        bench/dlrm_torch.py --model dcnv2 --cross-rank "$rank" --threads "$t" --steps "$STEPS" \
        --warmup "$WARMUP" --repeats "$REPEATS" "${SHAPE[@]}" \
        >"$WORK/torch.json" 2>"$WORK/err" || rc=$?
      if ((rc != 0)); then
        record_fail "$rank" "$label" "$(failure "$rc" "$WORK/err")"
        continue
      fi
      record_ok "$rank" "$label" "$(json_get "$WORK/torch.json" samples_per_s_all)" \
        "after $WARMUP warm-up steps; last loss $(json_get "$WORK/torch.json" last_loss)"
      cp "$WORK/torch.json" "$WORK/torch-$rank.json"
    done
  done
}

for rank in "${RANKS[@]}"; do
  if [[ $TORCH_ONLY == 1 ]]; then
    printf '%s\tnestpipe\tskipped\tnot measured (--torch-only)\t\n' "$rank" >>"$RES"
  else
    run_nestpipe "$rank"
    run_nestpipe_pregen "$rank"
  fi
  run_torch "$rank"
done

# Parameter counts of the two variants, from the PyTorch runs (the same shape as nestpipe's).
PARAMS=""
for rank in "${RANKS[@]}"; do
  if [[ -f $WORK/torch-$rank.json ]]; then
    PARAMS+=$("$JPY" -c '
import json, sys
p = json.load(open(sys.argv[1]))["params"]
print(f"- cross rank {sys.argv[2]}: " + ", ".join(f"{k} {v:,}" for k, v in p.items()))' \
      "$WORK/torch-$rank.json" "$rank")$'\n'
  fi
done

# ---- the tables: every row with its runs, then the ratios nestpipe / PyTorch best
"$JPY" - "$RES" >"$WORK/table.md" <<'PYEOF'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1], encoding="utf-8")]
ranks = list(dict.fromkeys(r[0] for r in rows))
med = {(rank, label): statistics.median(float(v) for v in data.split())
       for rank, label, status, data, _ in rows if status == "ok"}
def variant(rank):
    return "full rank" if rank == "0" else f"low rank {rank}"
def best(rank):
    torch = [k for k in med if k[0] == rank and k[1].startswith("PyTorch")]
    return max(torch, key=med.get) if torch else None
print("| cross | config | samples/s (median) | min / max | runs | notes |")
print("|---|---|---:|---:|---|---|")
for rank, label, status, data, note in rows:
    name = label + (" (best PyTorch)" if (rank, label) == best(rank) else "")
    if status != "ok":
        what = data if status == "skipped" else f"failed: {data}"
        print(f"| {variant(rank)} | {name} | {what} | | | |")
        continue
    x = [float(v) for v in data.split()]
    print(f"| {variant(rank)} | {name} | {med[rank, label]:.0f} | {min(x):.0f} / {max(x):.0f} "
          f"| {' '.join(f'{v:.0f}' for v in x)} | {note} |")
print()
print("| cross | nestpipe, data pre-generated | nestpipe, all-in | PyTorch best "
      "| nestpipe / PyTorch (data pre-generated) | nestpipe / PyTorch (all-in) |")
print("|---|---:|---:|---:|---:|---:|")
def cell(key):
    return f"{med[key]:.0f}" if key in med else "–"
def ratio(a, b):
    return f"**{med[a] / med[b]:.2f}×**" if a in med and b in med else "–"
for rank in ranks:
    b = best(rank)
    bname = f"{med[b]:.0f} ({b[1].removeprefix('PyTorch ')})" if b else "–"
    ex, allin = (rank, "nestpipe, data pre-generated"), (rank, "nestpipe")
    print(f"| {variant(rank)} | {cell(ex)} | {cell(allin)} | {bname} "
          f"| {ratio(ex, b)} | {ratio(allin, b)} |")
PYEOF

# ---- the machine (bench/lib.sh)
machine_facts
RUN_FLAGS="--steps $STEPS --repeats $REPEATS --warmup $WARMUP"
if [[ $QUICK == 1 ]]; then RUN_FLAGS="--quick"; fi
if [[ -n $ENGINE ]]; then RUN_FLAGS+=" --engine $ENGINE"; fi
if [[ $TORCH_ONLY == 1 ]]; then RUN_FLAGS+=" --torch-only"; fi

{
  echo "# nestpipe vs PyTorch CPU DCN-v2 ($DATE)"
  echo
  if [[ $QUICK == 1 ]]; then
    echo "**Smoke test (--quick, $STEPS steps): the numbers mean nothing.**"
    echo
  fi
  if [[ $TORCH_ONLY == 1 ]]; then
    echo "**PyTorch side only (--torch-only): nestpipe was not measured.**"
    echo
  fi
  echo "Shape: $TABLES tables of $ROWS rows, Zipf $ZIPF, one key per table and sample, dim $DIM,"
  echo "bottom MLP $BOTTOM; x0 = [bottom output, $TABLES sum-pooled embeddings], width" \
    "$(((TABLES + 1) * DIM));"
  echo "$CROSS_LAYERS cross layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l, W_l full rank (D × D)" \
    "or U_l V_l of rank ${RANKS[1]};"
  echo "deep MLP $DEEP on x0 beside them; top MLP $TOP on [x_L, deep output]; global batch $BATCH;"
  echo "mean BCE with logits, plain SGD lr 0.1 (dense and sparse). $STEPS timed steps per run,"
  echo "$REPEATS runs per side; samples/s is the median run. nestpipe's engine:" \
    "${ENGINE:-default} (ran: $ENGINE_RAN)."
  echo
  cat "$WORK/table.md"
  echo
  echo "nestpipe's all-in samples/s is its own \`--metrics-json\` figure (\`samples_per_s\`): every"
  echo "step from the first, synthetic batch generation included. PyTorch's leaves out data"
  echo "generation (done beforehand) and its $WARMUP warm-up steps; the 'data pre-generated'"
  echo "figure is nestpipe on that footing: the same records written to a file beforehand"
  echo "(\`nestpipe generate\`) and read during the run. **PyTorch best** is the fastest PyTorch median: each build measured"
  echo "(Machine, below), with 1 and $NPROC thread(s), as in bench/run.sh."
  if [[ -n $PARAMS ]]; then
    echo
    echo "Parameters (PyTorch, checked against the shape at start-up):"
    echo
    printf '%s' "$PARAMS"
  fi
  echo
  machine_section
  echo
  echo "## Commands"
  echo
  echo '```sh'
  echo "bash bench/dcnv2.sh $RUN_FLAGS"
  echo "build/nestpipe train --model dcnv2 --cross-rank {$(IFS=,; echo "${RANKS[*]}")}" \
    "${NP_ENGINE[*]:+${NP_ENGINE[*]} }${SHAPE[*]} --steps $STEPS --eval-samples 0 --quiet" \
    "--metrics-json FILE"
  for py in "${TORCH_SHOWN[@]:-python3}"; do
    echo "OPENBLAS_NUM_THREADS=t $py bench/dlrm_torch.py --model dcnv2" \
      "--cross-rank {$(IFS=,; echo "${RANKS[*]}")} --threads t --steps $STEPS --warmup $WARMUP" \
      "--repeats $REPEATS ${SHAPE[*]}"
  done
  echo "# t = $(IFS=,; echo "${TORCH_THREADS[*]}")"
  echo '```'
} >"$OUT"
log "wrote $OUT"
cat "$OUT"
