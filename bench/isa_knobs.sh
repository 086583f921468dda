#!/usr/bin/env bash
# Which instruction-set knobs change PyTorch's speed on this machine (bench/README.md
# "PyTorch's ISA knobs"): each PyTorch build bench/lib.sh finds (BENCH_TORCH=both: PyPI's and
# Debian's), each knob that exists for its BLAS, measured in interleaved rounds so that other
# load on the machine hits every setting alike. A diagnostic: bench/run.sh does not run it,
# and it writes nothing but its table (stdout).
#
#   bash bench/isa_knobs.sh [--rounds R] [--quick]
#
# Per setting: what the build then reports (MKL_VERBOSE / OPENBLAS_VERBOSE, ATen's
# capability), a 2048x512 by 512x256 float matmul (bench/torch_sgemm.py) with 1 thread (CPU
# time) and every core (wall time), and the DLRM of bench/run.sh with 1 thread in samples per
# CPU second (dlrm_torch.py --cpu-time), medians over R rounds (default 3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ROUNDS=3 STEPS=10 WARMUP=2
while [[ $# -gt 0 ]]; do
  case "$1" in
  --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
  --quick) ROUNDS=1 STEPS=2 WARMUP=1; shift ;;
  -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "isa_knobs.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "isa_knobs.sh: --rounds must be a whole number >= 1" >&2
  exit 2
fi
NPROC=$(nproc)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
log() { echo "isa_knobs.sh: $*" >&2; }

# shellcheck source=bench/lib.sh disable=SC1091
. bench/lib.sh
if ((${#TORCH_PYS[@]} == 0)); then
  echo "isa_knobs.sh: no PyTorch: $TORCH_MISSING" >&2
  exit 1
fi
SHIM=$WORK/mkl_intel_cpu.so
gcc -std=c11 -O2 -Wall -Wextra -pedantic -shared -fPIC bench/mkl_intel_cpu.c -o "$SHIM"

# The settings of a build: "label<TAB>VAR=VALUE ..." lines, defaults first.
settings() { # BLAS (torch_blas's answer)
  printf 'defaults\t\n'
  case $1 in
  MKL,*)
    printf 'MKL_ENABLE_INSTRUCTIONS=%s\tMKL_ENABLE_INSTRUCTIONS=%s\n' AVX512 AVX512 AVX2 AVX2
    printf 'MKL_DEBUG_CPU_TYPE=5\tMKL_DEBUG_CPU_TYPE=5\n'
    printf 'LD_PRELOAD=mkl_intel_cpu.so\tLD_PRELOAD=%s\n' "$SHIM"
    printf 'LD_PRELOAD=mkl_intel_cpu.so MKL_ENABLE_INSTRUCTIONS=AVX2\tLD_PRELOAD=%s MKL_ENABLE_INSTRUCTIONS=AVX2\n' "$SHIM"
    ;;
  OpenBLAS,*)
    local core
    for core in SkylakeX Haswell Zen; do
      printf 'OPENBLAS_CORETYPE=%s\tOPENBLAS_CORETYPE=%s\n' "$core" "$core"
    done
    ;;
  esac
  local cap
  for cap in avx512 avx2 default; do
    printf 'ATEN_CPU_CAPABILITY=%s\tATEN_CPU_CAPABILITY=%s\n' "$cap" "$cap"
  done
}

# one THREADS COMMAND ...: $py with the setting's variables (env_args) and that many threads;
# prints its figure (torch_sgemm.py's GFLOP/s, dlrm_torch.py's median samples/s) or "failed".
one() {
  local t=$1 out
  shift
  if out=$(env "${env_args[@]}" OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" \
    OPENBLAS_NUM_THREADS="$t" "$py" "$@" 2>/dev/null); then
    if [[ $out == "{"* ]]; then
      "$JPY" -c 'import json, sys; print(json.loads(sys.argv[1])["samples_per_s_median"])' "$out"
    else
      echo "${out%% *}"
    fi
  else
    echo failed
  fi
}

RES=$WORK/res.tsv # build, setting, reports, round, mm1, mmN, dlrm1
: >"$RES"
declare -A REPORTS
for ((round = 1; round <= ROUNDS; round++)); do
  for i in "${!TORCH_PYS[@]}"; do
    py=${TORCH_PYS[i]}
    blas=$(torch_blas "$py")
    while IFS=$'\t' read -r label envs; do
      read -ra env_args <<<"$envs"
      key="${TORCH_TAGS[i]}"$'\t'"$label"
      if [[ -z ${REPORTS[$key]:-} ]]; then
        REPORTS[$key]="$(torch_blas "$py" "${env_args[@]}"); ATen $(torch_cap "$py" "${env_args[@]}")"
      fi
      log "round $round/$ROUNDS: ${TORCH_TAGS[i]}, $label"
      mm1=$(one 1 bench/torch_sgemm.py --threads 1 --shape 2048x512x256 --cpu-time 5)
      mmn=$(one "$NPROC" bench/torch_sgemm.py --threads "$NPROC" --shape 2048x512x256 5)
      dl=$(one 1 bench/dlrm_torch.py --threads 1 --cpu-time --steps "$STEPS" --warmup "$WARMUP" \
        --repeats 1)
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${TORCH_TAGS[i]}" "$label" "${REPORTS[$key]}" \
        "$round" "$mm1" "$mmn" "$dl" >>"$RES"
    done < <(settings "$blas")
  done
done

echo "# PyTorch ISA knobs on $(lscpu | sed -n 's/^Model name:[[:space:]]*//p') ($NPROC cores, $(date +%F))"
echo
echo "CPU instruction set: ${CPU_ISA:-neither avx512 nor avx2}. Medians of $ROUNDS interleaved" \
  "round(s), min–max in brackets."
echo
"$JPY" - "$RES" "$NPROC" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1], encoding="utf-8")]
nproc = sys.argv[2]
keys = list(dict.fromkeys((r[0], r[1]) for r in rows))
print(f"| PyTorch | setting | the build then reports | matmul GFLOP/s, 1 thread (CPU time) "
      f"| matmul GFLOP/s, {nproc} threads | DLRM samples per CPU second, 1 thread |")
print("|---|---|---|---:|---:|---:|")
def fmt(vals):
    x = [float(v) for v in vals if v not in ("failed", "")]
    if not x:
        return "failed"
    m = statistics.median(x)
    s = f"{m:.0f}" if m >= 1000 else f"{m:.1f}"
    if len(x) > 1:
        lo, hi = min(x), max(x)
        s += f" ({lo:.0f}–{hi:.0f})" if m >= 1000 else f" ({lo:.1f}–{hi:.1f})"
    return s
for build, label in keys:
    sel = [r for r in rows if (r[0], r[1]) == (build, label)]
    print(f"| {build} | {label} | {sel[0][2]} | {fmt(r[4] for r in sel)} "
          f"| {fmt(r[5] for r in sel)} | {fmt(r[6] for r in sel)} |")
PYEOF
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
