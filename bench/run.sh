#!/usr/bin/env bash
# Side-by-side benchmark: nestpipe --engine starpu vs --engine reference vs a PyTorch CPU
# DLRM of the same shape at PyTorch's best setting here (1 and all threads, each with the
# library defaults and with the CPU's instruction set forced where a knob changes anything),
# plus the sgemm peak of each library (OpenBLAS as detected and forced, oneDNN, PyTorch's MKL),
# all measured in this one run.
# Writes bench/results/<date>-starpu-vs-reference-vs-torch.md. See bench/README.md.
#
#   bash bench/run.sh [--steps S] [--repeats R] [--warmup W] [--quick] [--out FILE]
#
# Needs the project built into build/ (bash .ci/build), gcc and pkg-config openblas (oneDNN's
# libdnnl-dev too for its peak). The PyTorch rows use torch from PyPI, which bench/lib.sh
# installs into a cached virtualenv on first use (about 3 GB; BENCH_TORCH=system or
# PYTHON=... picks another). A side that fails is recorded as "failed: <message>" in its row
# and the run carries on.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

STEPS=100
REPEATS=3
WARMUP=5
QUICK=0
OUT=""
usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --warmup) WARMUP=${2:?--warmup needs a value}; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --out) OUT=${2:?--out needs a value}; shift 2 ;;
  -h | --help) usage 0 ;;
  *) echo "run.sh: unknown option '$1'" >&2; usage 2 >&2 ;;
  esac
done
# --quick checks that every piece runs; its numbers mean nothing.
SGEMM_N=2048 SGEMM_REPS=7
if [[ $QUICK == 1 ]]; then
  STEPS=3 REPEATS=2 WARMUP=1 SGEMM_N=512 SGEMM_REPS=3
fi
for v in STEPS REPEATS WARMUP; do
  if ! [[ ${!v} =~ ^[0-9]+$ ]]; then
    echo "run.sh: --${v,,} must be a whole number, got '${!v}'" >&2
    exit 2
  fi
done
if ((STEPS < 1 || REPEATS < 1)); then
  echo "run.sh: --steps and --repeats must be at least 1" >&2
  exit 2
fi

# The benchmark shape (docs/cli.md "Kaggle-like"): written once, used by every side.
TABLES=26 ROWS=100000 ZIPF=1.05 DIM=16 BOTTOM=13-512-256-64-16 TOP=512-256-1 BATCH=2048
SHAPE=(--tables "$TABLES" --rows "$ROWS" --zipf "$ZIPF" --dim "$DIM" --bottom "$BOTTOM"
  --top "$TOP" --batch "$BATCH")

# $NESTPIPE: another binary to measure (default: this checkout's build).
NESTPIPE=${NESTPIPE:-build/nestpipe}
if [[ ! -x $NESTPIPE ]]; then
  echo "run.sh: $NESTPIPE not found; build the project first: bash .ci/build" >&2
  exit 2
fi
NPROC=$(nproc)
DATE=$(date +%F)
[[ -n $OUT ]] || OUT=bench/results/$DATE-starpu-vs-reference-vs-torch.md
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
log() { echo "run.sh: $*" >&2; }

# The PyTorch builds to measure (TORCH_PYS, TORCH_TAGS, TORCH_SHOWN, TORCH_LINES; or
# TORCH_MISSING), JPY, json_get, is_finite.
# shellcheck source=bench/lib.sh disable=SC1091
. bench/lib.sh

# ---- sgemm peaks: each library with 1 thread and with every core; the best all-core figure is
# the one nestpipe's dense rate is set against (bench/README.md "sgemm peak").
CFLAGS_BENCH=(-std=c11 -O2 -Wall -Wextra -pedantic -D_POSIX_C_SOURCE=200809L)
# OpenBLAS is the bench's own dependency (nestpipe builds on oneDNN): installed from Debian
# when missing and this is root, as .ci/deps does; otherwise a one-line refusal.
if ! pkg-config --exists openblas; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing libopenblas-dev (the OpenBLAS sgemm peak rows)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends libopenblas-dev >/dev/null
  fi
  pkg-config --exists openblas || {
    echo "bench/run.sh: needs OpenBLAS for its sgemm peak rows: apt-get install libopenblas-dev" >&2
    exit 2
  }
fi
log "building sgemm_peak (OpenBLAS, oneDNN) and the MKL shim"
SGEMM_OB=$WORK/sgemm_peak_openblas
# shellcheck disable=SC2046 # pkg-config prints a list of flags
gcc "${CFLAGS_BENCH[@]}" bench/sgemm_peak.c $(pkg-config --cflags --libs openblas) -lm \
  -o "$SGEMM_OB"
# Debian's libdnnl-dev has no pkg-config file; without it the oneDNN row says so.
SGEMM_DNNL=$WORK/sgemm_peak_onednn
if ! gcc "${CFLAGS_BENCH[@]}" -DSGEMM_PEAK_ONEDNN bench/sgemm_peak.c -ldnnl -lm \
  -o "$SGEMM_DNNL" 2>"$WORK/dnnl.err"; then
  SGEMM_DNNL=""
fi
# The LD_PRELOAD shim that lets MKL see this CPU's instruction set (bench/mkl_intel_cpu.c).
MKL_SHIM=$WORK/mkl_intel_cpu.so
gcc "${CFLAGS_BENCH[@]}" -shared -fPIC bench/mkl_intel_cpu.c -o "$MKL_SHIM" 2>/dev/null ||
  MKL_SHIM=""

# Each PyTorch build's ISA settings (bench/lib.sh torch_isa_forced): TORCH_FORCED[i] is what
# its "ISA forced" rows set (empty: no knob changes anything, and those rows are left out).
TORCH_FORCED=() TORCH_FORCED_NOTE=() TORCH_BLAS=() TORCH_BLAS_FORCED=() TORCH_KERNELS=()
TORCH_KERNELS_FORCED=()
for i in "${!TORCH_PYS[@]}"; do
  torch_isa_forced "${TORCH_PYS[i]}" "$MKL_SHIM"
  TORCH_FORCED+=("$FORCED_ENV") TORCH_FORCED_NOTE+=("$FORCED_NOTE")
  TORCH_BLAS+=("$BLAS_DEFAULT") TORCH_BLAS_FORCED+=("$BLAS_FORCED")
  TORCH_KERNELS+=("$BLAS_DEFAULT; ATen $CAP_DEFAULT")
  TORCH_KERNELS_FORCED+=("$BLAS_FORCED; ATen $CAP_FORCED")
  log "PyTorch ${TORCH_TAGS[i]}: ${BLAS_DEFAULT}; ISA forced: $FORCED_NOTE"
done

PEAK_THREADS=(1)
if ((NPROC > 1)); then PEAK_THREADS+=("$NPROC"); fi
PEAKS=$WORK/peaks.tsv
: >"$PEAKS"
# peak_row LIBRARY SETTING [VAR=VALUE ...] -- COMMAND ...: one line of $PEAKS per thread count
# (library, setting, threads, ok/failed, GFLOP/s or the message, what ran). The thread count
# goes to every library's variable, and replaces _T_ in COMMAND.
peak_row() {
  local lib=$1 setting=$2 t out rc envs=()
  shift 2
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  for t in "${PEAK_THREADS[@]}"; do
    log "sgemm peak: $lib, $setting, $t thread(s)"
    rc=0
    out=$(env "${envs[@]}" OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" \
      "${@//_T_/$t}" 2>"$WORK/err") || rc=$?
    if ((rc == 0)) && [[ $out =~ ^[0-9]+(\.[0-9]+)?\  ]]; then
      printf '%s\t%s\t%s\tok\t%s\t%s\n' "$lib" "$setting" "$t" "${out%% *}" "${out#* }" >>"$PEAKS"
    else
      printf '%s\t%s\t%s\tfailed\t%s\t\n' "$lib" "$setting" "$t" \
        "$( (tail -n 1 "$WORK/err"; echo "$out") | head -n 1 | tr '\t|' ' /')" >>"$PEAKS"
    fi
  done
}
peak_row OpenBLAS default -- "$SGEMM_OB" "$SGEMM_N" "$SGEMM_REPS"
if [[ -n $OPENBLAS_ISA_CORE ]]; then
  peak_row OpenBLAS "OPENBLAS_CORETYPE=$OPENBLAS_ISA_CORE" \
    OPENBLAS_CORETYPE="$OPENBLAS_ISA_CORE" -- "$SGEMM_OB" "$SGEMM_N" "$SGEMM_REPS"
fi
if [[ -n $SGEMM_DNNL ]]; then
  peak_row oneDNN default -- "$SGEMM_DNNL" "$SGEMM_N" "$SGEMM_REPS"
else
  printf 'oneDNN\tdefault\t%s\tfailed\tnot built: %s\t\n' "${PEAK_THREADS[-1]}" \
    "$(grep -m1 -E 'error|cannot find' "$WORK/dnnl.err" | tr '\t|' ' /')" >>"$PEAKS"
fi
# PyTorch's own BLAS when it is MKL (PyPI's): linked inside libtorch, measured through torch.mm.
# An OpenBLAS-based torch runs the OpenBLAS measured above.
for i in "${!TORCH_PYS[@]}"; do
  if [[ ${TORCH_BLAS[i]} != MKL,* ]]; then continue; fi
  peak_row "PyTorch ${TORCH_TAGS[i]}" "default (${TORCH_BLAS[i]})" -- \
    "${TORCH_PYS[i]}" bench/torch_sgemm.py --threads _T_ "$SGEMM_N" "$SGEMM_REPS"
  if [[ -n ${TORCH_FORCED[i]} ]]; then
    read -ra forced <<<"${TORCH_FORCED[i]}"
    peak_row "PyTorch ${TORCH_TAGS[i]}" "ISA forced (${TORCH_BLAS_FORCED[i]})" "${forced[@]}" -- \
      "${TORCH_PYS[i]}" bench/torch_sgemm.py --threads _T_ "$SGEMM_N" "$SGEMM_REPS"
  fi
done

# ---- dense FLOPs per sample, forward + backward (bench/README.md "FLOP count")
FLOPS=$("$JPY" - "$BOTTOM" "$TOP" "$TABLES" "$DIM" <<'PYEOF'
import sys
bottom = [int(v) for v in sys.argv[1].split("-")]
T, d = int(sys.argv[3]), int(sys.argv[4])
pairs = (T + 1) * T // 2
top = [d + pairs] + [int(v) for v in sys.argv[2].split("-")]
f = 0
for k, (i, o) in enumerate(zip(bottom[:-1], bottom[1:])):
    f += 2 * i * o                              # forward
    f += 2 * i * o if k == 0 else 4 * i * o     # backward: dW, and dx except the first layer
for i, o in zip(top[:-1], top[1:]):
    f += 6 * i * o                              # forward, dW, dx
f += 3 * pairs * 2 * d                          # dots forward, ~2x that backward
print(f)
PYEOF
)

# ---- the sides. Each appends one line to $RES: label, "ok" and its samples/s per run, note;
# or label, "failed" and the message.
RES=$WORK/results.tsv
: >"$RES"
record_ok() { printf '%s\tok\t%s\t%s\n' "$1" "$2" "$3" >>"$RES"; }
record_fail() { printf '%s\tfailed\t%s\t\n' "$1" "$(printf '%s' "$2" | tr '\t\n' '  ')" >>"$RES"; }

# nestpipe: one process per run, samples/s from its --metrics-json.
run_nestpipe() { # ENGINE [LABEL-SUFFIX FLAG...]: extra flags make an extra row
  local engine=$1 label="nestpipe --engine $1${2:-}" rates="" r m=$WORK/m.json steps loss
  local ran pipe
  local extra=("${@:3}")
  for ((r = 1; r <= REPEATS; r++)); do
    log "$label, run $r/$REPEATS"
    rm -f "$m"
    # Eval runs after the timed loop; skipping it only saves wall time.
    if ! "$NESTPIPE" train --engine "$engine" "${SHAPE[@]}" --steps "$STEPS" \
      --eval-samples 0 --quiet --metrics-json "$m" "${extra[@]}" >"$WORK/out" 2>"$WORK/err"; then
      record_fail "$label" "$(tail -n 1 "$WORK/err")"
      return
    fi
    # Validate before reporting: the engine asked for ran every step to a finite loss.
    steps=$(json_get "$m" steps) || steps=""
    loss=$(json_get "$m" train_loss) || loss=""
    ran=$(json_get "$m" engine) || ran=""
    pipe=$(json_get "$m" pipeline) || pipe=""
    if [[ $steps != "$STEPS" || $ran != "$engine" ]] || ! is_finite "${loss:-nan}"; then
      record_fail "$label" \
        "invalid run: engine '$ran', steps '$steps' (want $STEPS), train_loss '$loss'"
      return
    fi
    if ((${#extra[@]} == 0)); then
      LAYER_FLOPS=$(json_get "$m" dense_flop_per_sample) || LAYER_FLOPS=""
    fi
    rates+="$(json_get "$m" samples_per_s) "
  done
  if [[ ${2:-} == ", data pre-generated" ]]; then
    record_ok "$label" "$rates" \
      "pipeline ${pipe:-?}; the same batches read from a file written beforehand by nestpipe generate (PyTorch's footing)"
  else
    record_ok "$label" "$rates" "pipeline ${pipe:-?}; all-in: synthetic batch generation included"
  fi
}
# The same records, generated once beforehand as PyTorch's are: `nestpipe generate` writes
# the synthetic stream to a binary file, and a run on it trains on the very batches (and
# model) of the all-in run; its samples/s includes reading the file. (The metrics'
# samples_per_s_compute, wall time minus time in the data source, is no such figure when
# generation shares the cores with the workers: it counted generation's wall time as if
# the workers had stood still meanwhile.)
PREGEN=$WORK/pregen.bin
PREGEN_RECORDS=$(((STEPS * BATCH * 10 + 8) / 9 + BATCH)) # train split of --eval-every 10
LAYER_FLOPS=""
run_nestpipe starpu
run_nestpipe reference
log "nestpipe generate: $PREGEN_RECORDS records"
if timeout 600 "$NESTPIPE" generate "$PREGEN" --samples "$PREGEN_RECORDS" "${SHAPE[@]}" \
  >"$WORK/out" 2>"$WORK/err"; then
  run_nestpipe starpu ", data pre-generated" --data "bin:$PREGEN"
  run_nestpipe reference ", data pre-generated" --data "bin:$PREGEN"
  rm -f "$PREGEN"
else
  for e in starpu reference; do
    record_fail "nestpipe --engine $e, data pre-generated" \
      "nestpipe generate: $(tail -n 1 "$WORK/err")"
  done
fi
# the default pipeline against sequential, and bf16 products (on CPUs with avx512_bf16)
run_nestpipe starpu ", --pipeline sequential" --pipeline sequential
if "$NESTPIPE" --version | grep -q 'avx512_core_\(bf16\|amx\)'; then
  run_nestpipe starpu ", --precision bf16" --precision bf16
fi
# GFLOP/s from the layers' own flop counts (np_layer_def.flops, --metrics-json
# dense_flop_per_sample) when the build reports them; the formula above must agree
FORMULA_FLOPS=$FLOPS
if [[ -n $LAYER_FLOPS ]]; then FLOPS=$(printf '%.0f' "$LAYER_FLOPS"); fi

# PyTorch: for each build bench/lib.sh found (PyPI's; the system's too with BENCH_TORCH=both),
# 1 thread and every core, each with the library defaults and, where a knob changes this
# build's kernels (TORCH_FORCED, above), with the CPU's instruction set forced: at most
# twice the rows of the thread counts alone. The fastest row is "best PyTorch". The thread
# count goes to torch.set_num_threads and to OMP_NUM_THREADS, MKL_NUM_THREADS and
# OPENBLAS_NUM_THREADS unless they are set: a torch on OpenBLAS (Debian's) otherwise runs its
# GEMMs on every core whatever torch.set_num_threads says.
TORCH_THREADS=(1)
if ((NPROC > 1)); then TORCH_THREADS+=("$NPROC"); fi
torch_row() { # I THREADS LABEL NOTE [VAR=VALUE ...]
  local i=$1 t=$2 label=$3 note=$4
  shift 4
  log "$label, $REPEATS runs"
  if ! env "$@" OMP_NUM_THREADS="${OMP_NUM_THREADS:-$t}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-$t}" \
    OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$t}" "${TORCH_PYS[i]}" bench/dlrm_torch.py \
    --threads "$t" --steps "$STEPS" --warmup "$WARMUP" --repeats "$REPEATS" "${SHAPE[@]}" \
    >"$WORK/torch.json" 2>"$WORK/err"; then
    record_fail "$label" "$(tail -n 1 "$WORK/err")"
    return
  fi
  record_ok "$label" "$(json_get "$WORK/torch.json" samples_per_s_all)" "$note"
}
if ((${#TORCH_PYS[@]} == 0)); then
  for t in "${TORCH_THREADS[@]}"; do
    label="PyTorch, $t thread"
    if ((t > 1)); then label+="s"; fi
    record_fail "$label" "$TORCH_MISSING"
  done
fi
for i in "${!TORCH_PYS[@]}"; do
  read -ra forced <<<"${TORCH_FORCED[i]}"
  for t in "${TORCH_THREADS[@]}"; do
    label="PyTorch ${TORCH_TAGS[i]}, $t thread"
    if ((t > 1)); then label+="s"; fi
    torch_row "$i" "$t" "$label" \
      "library defaults (${TORCH_KERNELS[i]}); after $WARMUP warm-up steps"
    if ((${#forced[@]} > 0)); then
      torch_row "$i" "$t" "$label, ISA forced" \
        "${TORCH_FORCED[i]//"$WORK"\//} (${TORCH_KERNELS_FORCED[i]}); after $WARMUP warm-up steps" \
        "${forced[@]}"
    fi
  done
done

# ---- the sgemm peak table, the results table (medians, ratios, GFLOP/s) and the issue's goal:
# starpu >= 2x the best PyTorch
"$JPY" - "$RES" "$FLOPS" "$PEAKS" "$NPROC" "$WORK/peaks.md" "$WORK/table.md" <<'PYEOF'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1], encoding="utf-8")]
flops, nproc = float(sys.argv[2]), int(sys.argv[4])
peaks = [line.rstrip("\n").split("\t") for line in open(sys.argv[3], encoding="utf-8")]
cores = lambda t: f"{t} core" + ("s" if t > 1 else "")  # a column: "2 cores"
core_adj = lambda t: f"{t}-core"                        # "the 2-core peak"

# sgemm peaks: one row per library and setting, a column per thread count
threads = sorted({int(p[2]) for p in peaks})
libs = list(dict.fromkeys((p[0], p[1]) for p in peaks))
cell, what = {}, {}
for lib, setting, t, status, value, w in peaks:
    cell[lib, setting, int(t)] = value if status == "ok" else f"failed: {value}"
    if status == "ok" and w:
        what.setdefault((lib, setting), w)
ok = [(float(v), lib, s) for lib, s, t, st, v, _ in peaks if st == "ok" and int(t) == nproc]
peak_best = max(ok) if ok else None
with open(sys.argv[5], "w", encoding="utf-8") as out:
    print("| library | setting | what ran | " + " | ".join(cores(t) for t in threads) + " |",
          file=out)
    print("|---|---|---|" + "---:|" * len(threads), file=out)
    for lib, setting in libs:
        cells = [cell.get((lib, setting, t), "–") for t in threads]
        if peak_best and (lib, setting) == peak_best[1:]:
            cells[-1] = f"**{cells[-1]}**"
        print(f"| {lib} | {setting} | {what.get((lib, setting), '–')} | " + " | ".join(cells)
              + " |", file=out)
    print(file=out)
    if peak_best:
        print(f"**Best {core_adj(nproc)} sgemm peak: {peak_best[0]:.1f} GFLOP/s** ({peak_best[1]}, "
              f"{peak_best[2]}): the figure every \"% of sgemm peak\" below is against.", file=out)
    else:
        print("**No sgemm peak measured** (every library failed): no \"% of sgemm peak\".",
              file=out)
peak = peak_best[0] if peak_best else None

med = {label: statistics.median(float(v) for v in data.split())
       for label, status, data, _ in rows if status == "ok"}
torch = [k for k in med if k.startswith("PyTorch")]
best = max(torch, key=med.get) if torch else None
ref, sp = "nestpipe --engine reference", "nestpipe --engine starpu, data pre-generated"
spa = "nestpipe --engine starpu"
def ref_for(label):  # compare like with like: pre-generated vs pre-generated
    pg = ", data pre-generated"
    return ref + pg if label.endswith(pg) else ref
def ratio(a, b):
    return f"{med[a] / med[b]:.2f}×" if a in med and b in med else "–"
def gflops(label):
    return flops * med[label] / 1e9
def of_peak(label):
    return f"{100 * gflops(label) / peak:.0f}%" if peak else "–"
with open(sys.argv[6], "w", encoding="utf-8") as out:
    print("| config | samples/s (median) | min / max | × of best PyTorch | vs reference "
          "| dense GFLOP/s | % of sgemm peak | notes |", file=out)
    print("|---|---:|---:|---:|---:|---:|---:|---|", file=out)
    for label, status, data, note in rows:
        name = label + (" (**best PyTorch**)" if label == best else "")
        if status != "ok":
            print(f"| {name} | failed: {data.replace('|', '/')} | | | | | | |", file=out)
            continue
        x = [float(v) for v in data.split()]
        print(f"| {name} | {med[label]:.0f} | {min(x):.0f} / {max(x):.0f} "
              f"| {ratio(label, best)} | {ratio(label, ref_for(label))} | {gflops(label):.1f} "
              f"| {of_peak(label)} | {note} |", file=out)
    print(file=out)
    if best:
        print(f"Best PyTorch: **{best}**, {med[best]:.0f} samples/s (the fastest of the "
              f"{len(torch)} PyTorch rows).", file=out)
        print(file=out)
    for label in (sp, spa):
        if label in med and best:
            print(f"- {label}: **{ratio(label, best)} of best PyTorch**; dense work "
                  f"{gflops(label):.1f} GFLOP/s = **{of_peak(label)}** of the best "
                  f"{core_adj(nproc)} sgemm peak"
                  + (f" ({peak:.1f} GFLOP/s)." if peak else "."), file=out)
        elif label in med:
            print(f"- {label}: dense work {gflops(label):.1f} GFLOP/s = {of_peak(label)} of the "
                  f"best {core_adj(nproc)} sgemm peak; no PyTorch row to compare with.", file=out)
    print(file=out)
    if spa in med and best:
        met = "met" if med[spa] >= 2 * med[best] else "not met"
        print(f"Goal, starpu with its default pipeline, data generation included, ≥ 2× the best "
              f"PyTorch: **{met}** ({ratio(spa, best)} of {best}; "
              f"{ratio(sp, best)} on pre-generated data).", file=out)
    else:
        print("Goal, starpu ≥ 2× the best PyTorch: **not measured** (a side failed).", file=out)
    if best and peak:
        ceiling = peak * 1e9 / flops
        print(file=out)
        print(f"Ceiling: the dense work alone at 100% of the best {core_adj(nproc)} sgemm peak "
              f"allows {ceiling:.0f} samples/s; 2× the best PyTorch is {2 * med[best]:.0f} "
              f"samples/s ({100 * 2 * med[best] / ceiling:.0f}% of that ceiling).", file=out)
PYEOF

# ---- the machine (bench/lib.sh)
machine_facts
RUN_FLAGS="--steps $STEPS --repeats $REPEATS --warmup $WARMUP"
if [[ $QUICK == 1 ]]; then RUN_FLAGS="--quick"; fi

{
  echo "# nestpipe starpu vs reference vs PyTorch CPU DLRM ($DATE)"
  echo
  if [[ $QUICK == 1 ]]; then
    echo "**Smoke test (--quick, $STEPS steps): the numbers mean nothing.**"
    echo
  fi
  echo "Shape: $TABLES tables of $ROWS rows, Zipf $ZIPF, one key per table and sample, dim $DIM,"
  echo "bottom MLP $BOTTOM, top MLP $TOP, global batch $BATCH, plain SGD lr 0.1 (dense and"
  echo "sparse). $STEPS timed steps per run, $REPEATS runs per side; samples/s is the median run."
  echo "Dense work: $FLOPS FLOP per sample, forward + backward, from the layers' flop counts" \
    "(the formula of bench/README.md gives $FORMULA_FLOPS)."
  echo
  echo "## sgemm peak"
  echo
  echo "GFLOP/s of a ${SGEMM_N}² sgemm, median of $SGEMM_REPS runs after an untimed one, each"
  echo "checked against a double dot product first; threads from OPENBLAS_NUM_THREADS,"
  echo "OMP_NUM_THREADS (oneDNN) or torch.set_num_threads (PyTorch's MKL, through torch.mm)."
  echo "CPU instruction set for the forced settings: ${CPU_ISA:-none of avx512, avx2} (from"
  echo "/proc/cpuinfo)."
  echo
  cat "$WORK/peaks.md"
  echo
  echo "## Results"
  echo
  cat "$WORK/table.md"
  echo
  echo "nestpipe's all-in samples/s is its own \`--metrics-json\` figure: every step from the"
  echo "first, synthetic batch generation included. PyTorch's leaves out data generation (done"
  echo "beforehand) and its warm-up steps; the 'data pre-generated' rows are nestpipe on that"
  echo "footing: the same records written to a file beforehand (\`nestpipe generate\`), read"
  echo "during the run (the same batches, so the same model). The goal is judged all-in, as the"
  echo "issue states it. **Best PyTorch** is the fastest PyTorch median: each build"
  echo "measured (Machine, below), with 1 and $NPROC thread(s), each with the library defaults"
  echo "and, where a knob changes the build's kernels, with the CPU's instruction set forced."
  echo
  echo "## PyTorch settings"
  echo
  if ((${#TORCH_PYS[@]} == 0)); then echo "- no PyTorch: $TORCH_MISSING"; fi
  for i in "${!TORCH_PYS[@]}"; do
    if [[ -n ${TORCH_FORCED[i]} ]]; then
      echo "- ${TORCH_TAGS[i]}: defaults run on ${TORCH_KERNELS[i]}; the \"ISA forced\" rows" \
        "set ${TORCH_FORCED_NOTE[i]}."
    else
      echo "- ${TORCH_TAGS[i]}: defaults run on ${TORCH_KERNELS[i]}; no \"ISA forced\" rows," \
        "${TORCH_FORCED_NOTE[i]}."
    fi
  done
  echo "- Not used, as they change nothing for PyPI's MKL on an AMD CPU (bench/README.md" \
    "\"PyTorch's ISA knobs\"): MKL_DEBUG_CPU_TYPE, MKL_ENABLE_INSTRUCTIONS."
  echo
  machine_section
  echo
  echo "## Commands"
  echo
  echo '```sh'
  echo "bash bench/run.sh $RUN_FLAGS"
  echo "build/nestpipe train --engine {starpu,reference} ${SHAPE[*]} --steps $STEPS" \
    "--eval-samples 0 --quiet --metrics-json FILE"
  for i in "${!TORCH_PYS[@]}"; do
    echo "OMP_NUM_THREADS=t MKL_NUM_THREADS=t OPENBLAS_NUM_THREADS=t [ISA forced:" \
      "${TORCH_FORCED[i]//"$WORK"\//}] ${TORCH_SHOWN[i]} bench/dlrm_torch.py" \
      "--threads t --steps $STEPS --warmup $WARMUP --repeats $REPEATS ${SHAPE[*]}"
  done
  if ((${#TORCH_PYS[@]} == 0)); then
    echo "OMP_NUM_THREADS=t MKL_NUM_THREADS=t OPENBLAS_NUM_THREADS=t python3 bench/dlrm_torch.py" \
      "--threads t --steps $STEPS --warmup $WARMUP --repeats $REPEATS ${SHAPE[*]}"
  fi
  echo "# t = $(IFS=,; echo "${TORCH_THREADS[*]}")"
  echo "OPENBLAS_NUM_THREADS=t [OPENBLAS_CORETYPE=${OPENBLAS_ISA_CORE:-...}] sgemm_peak_openblas" \
    "$SGEMM_N $SGEMM_REPS    # gcc bench/sgemm_peak.c \$(pkg-config --cflags --libs openblas)"
  echo "OMP_NUM_THREADS=t sgemm_peak_onednn $SGEMM_N $SGEMM_REPS" \
    "   # gcc -DSGEMM_PEAK_ONEDNN bench/sgemm_peak.c -ldnnl"
  echo "[ISA forced] python bench/torch_sgemm.py --threads t $SGEMM_N $SGEMM_REPS" \
    "   # each MKL-based PyTorch"
  echo '```'
} >"$OUT"
log "wrote $OUT"
cat "$OUT"
