#!/usr/bin/env bash
# The device check (docs/gpu.md): on a machine with a GPU, from the repository root, with
# the pack bench/gpu-pack.sh made (carried there; no build or network needed):
#
#   bash bench/gpu.sh build-gpu-pack.tar.xz [--steps S] [--repeats R]
#
# 1. checks every program of the pack finds its libraries (ldd), and names the GPU;
# 2. runs the CUDA kernel tests (each kernel against its CPU twin) and the engine's GPU
#    tests (against the reference trainer; pinned runs bit for bit across pipelines), and
#    `nestpipe check-layer --all` (every built-in kind's CUDA slots against its CPU kernels);
# 3. trains the Kaggle-like shape (26 tables x 100k rows, dim 16, 13-512-256-64-16 /
#    512-256-1, batch 2048) with --gpus 0, with --gpus 1 --place all=cuda, and with
#    --gpus 1 under dmdas choosing per task: samples/s, medians of R runs, all in this run,
#    and the time per node kind from a trace of each;
# 4. writes <date>-gpu.md under $OUT (the device tool's folder) or bench/results/.
# It fits in 5 minutes on one H200 with the defaults. A part that fails is written down as
# failed and the run goes on; the exit code says whether everything passed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PACK=${1:?usage: bench/gpu.sh PACK.tar.xz [--steps S] [--repeats R]}
shift
STEPS=60
REPEATS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?}; shift 2 ;;
  --repeats) REPEATS=${2:?}; shift 2 ;;
  *) echo "gpu.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
DEST=${OUT:-bench/results}
mkdir -p "$DEST"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
tar -C "$W" -xJf "$PACK" || { echo "gpu.sh: cannot unpack $PACK" >&2; exit 1; }
# CUDA's libraries from the machine's own toolkit
NVCC=$(command -v nvcc || true)
CUDA_LIB=""
for d in ${NVCC:+$(dirname "$(dirname "$NVCC")")/lib64} /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [[ -d $d ]] && CUDA_LIB=$CUDA_LIB:$d
done
export LD_LIBRARY_PATH=$W/lib$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export STARPU_HOME=$W/starpu_home STARPU_SILENT=1
mkdir -p "$STARPU_HOME"
NP=$W/bin/nestpipe
RES=$DEST/$(date -u +%Y-%m-%d)-gpu.md
status=0
{
  echo "# nestpipe on a GPU: bench/gpu.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- commit: $(cat "$W/commit")"
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
  echo "- nestpipe: $("$NP" --version 2>&1 | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
  echo
  echo "## Libraries"
  missing=$(for f in "$W"/bin/*; do ldd "$f" | grep 'not found' | sed "s|^|$(basename "$f"): |"; done)
  if [[ -n $missing ]]; then
    echo "missing:"; echo '```'; echo "$missing"; echo '```'; status=1
  else
    echo "every program of the pack finds its libraries"
  fi
  echo
  echo "## Tests"
  echo
  echo "| test | result | seconds |"
  echo "|---|---|---:|"
} >"$RES"
for t in test_cuda_kernels test_engine_gpu test_kernels test_layers; do
  [[ -x $W/bin/$t ]] || { echo "| $t | not in the pack | |" >>"$RES"; continue; }
  t0=$(date +%s.%N)
  (cd "$W" && NP_TEST_DATA=$ROOT/tests/data timeout 150 "bin/$t") >"$W/$t.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  case $rc in 0) r=passed ;; 77) r="skipped (77)" ; status=1 ;; *) r="FAILED (exit $rc)"; status=1 ;; esac
  printf '| %s | %s | %.1f |\n' "$t" "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RES"
  if [[ $rc -ne 0 ]]; then
    { echo; echo "$t (exit $rc), the end of its output:"; echo '```'; tail -n 30 "$W/$t.log"; echo '```'; } >>"$W/failures.txt"
  fi
  grep -E 'worst|layer tasks|max' "$W/$t.log" | sed 's/^/    /' >>"$W/notes.txt" || true
done
# every built-in kind's gradient, and its CUDA slots against its CPU kernels (on the GPU)
(cd "$W" && timeout 120 "$NP" check-layer --all) >"$W/check-layer.log" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "| check-layer --all | FAILED (exit $rc) | |" >>"$RES"; status=1
  { echo; echo "check-layer --all (exit $rc), the end of its output:"; echo '```'; tail -n 30 "$W/check-layer.log"; echo '```'; } >>"$W/failures.txt"
elif grep -q 'cuda: skipped' "$W/check-layer.log"; then
  echo "| check-layer --all | skipped: the CUDA comparison did not run | |" >>"$RES"; status=1
else
  echo "| check-layer --all | passed | |" >>"$RES"
fi
grep -E '^[a-z]|cuda:' "$W/check-layer.log" | grep -v -- '->' | paste - - | sed 's/^/    /' | sort -u >>"$W/notes.txt" || true
[[ -s $W/failures.txt ]] && cat "$W/failures.txt" >>"$RES"
[[ -s $W/notes.txt ]] && { echo; echo "What the tests printed:"; echo '```'; cat "$W/notes.txt"; echo '```'; } >>"$RES"

SHAPE=(--tables 26 --rows 100000 --dim 16 --bottom 13-512-256-64-16 --top 512-256-1
  --batch 2048 --quiet)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run_side() { # name, then flags: median samples/s over REPEATS runs, and a traced run
  local name=$1; shift
  local rates=""
  for r in $(seq "$REPEATS"); do
    if "$NP" train "${SHAPE[@]}" --steps "$STEPS" "$@" --metrics-json "$W/m.json" >"$W/run.log" 2>&1; then
      rates+="$(grep -o '"samples_per_s": [0-9.e+]*' "$W/m.json" | awk '{print $2}')"$'\n'
    else
      echo "| $name | failed: $(tail -n 1 "$W/run.log") | | |" >>"$RES"; status=1; return
    fi
  done
  local med auc
  med=$(printf '%s' "$rates" | median)
  auc=$(grep -o '"eval_auc": [0-9.]*' "$W/m.json" | awk '{print $2}')
  printf '| %s | %.0f | %s | %s |\n' "$name" "$med" "$(printf '%s' "$rates" | awk '{printf "%.0f\n", $1}' | paste -sd, - | sed 's/,/, /g')" "$auc" >>"$RES"
  "$NP" train "${SHAPE[@]}" --steps 12 "$@" --trace "$W/$name.trace.json" >/dev/null 2>&1 &&
    "$NP" trace report "$W/$name.trace.json" >"$W/$name.report" 2>&1
}
{
  echo
  echo "## Training, Kaggle-like shape ($STEPS steps, medians of $REPEATS runs)"
  echo
  echo "| side | samples/s (median) | runs | eval AUC |"
  echo "|---|---:|---|---:|"
} >>"$RES"
run_side cpu --gpus 0
run_side gpu-pinned --gpus 1 --place all=cuda
run_side gpu-dmdas --gpus 1 --sched dmdas
cpu=$(awk -F'|' '$2 ~ /^ cpu / {print $3}' "$RES")
for s in gpu-pinned gpu-dmdas; do
  g=$(awk -F'|' -v s=" $s " '$2 == s {print $3}' "$RES")
  [[ -n $cpu && -n $g && $g =~ ^\ *[0-9] ]] &&
    printf '\n%s / cpu: %.2fx\n' "$s" "$(awk -v g="$g" -v c="$cpu" 'BEGIN {print g / c}')" >>"$RES"
done
{
  echo
  echo "## Time per node kind (nestpipe trace report, 12 steps each)"
  for s in cpu gpu-pinned gpu-dmdas; do
    [[ -s $W/$s.report ]] || continue
    echo; echo "### $s"; echo '```'; cat "$W/$s.report"; echo '```'
  done
} >>"$RES"
echo "gpu.sh: wrote $RES (status $status)"
exit $status
