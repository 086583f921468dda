# shellcheck shell=bash disable=SC2034 # sets variables for the scripts that source it
# Shared by bench/run.sh and bench/dcnv2.sh; sourced from the repository root, not run.
#
# Finds the PyTorch builds to measure (bench/README.md "Which PyTorch") and sets, one entry
# per build: TORCH_PYS (a Python that imports torch and numpy), TORCH_TAGS (the row label,
# e.g. "2.15.0 (PyPI)"), TORCH_SHOWN (the Python as the report names it) and TORCH_LINES
# (version, CPU capability, where from, the first lines of torch.__config__.show()). Empty
# when none is found; TORCH_MISSING then says why. Also PY (the first of TORCH_PYS, or
# empty), JPY (a Python for reading JSON: PY, else python3), json_get FILE KEY, is_finite X.
#
#   BENCH_TORCH=pypi     (default) torch from PyPI, in a virtualenv that this file creates on
#                        first use (BENCH_VENV); the system's when that cannot be installed
#   BENCH_TORCH=both     that one and the system's (Debian's python3-torch), both measured
#   BENCH_TORCH=system   the system's only
#   PYTHON=/path/to/python   that Python's torch, and nothing else
#   BENCH_TORCH_SPEC     what pip installs into the virtualenv (default 'torch>=2')
#   BENCH_VENV           the virtualenv (default ~/.cache/nestpipe-bench/venv-torch)

lib_log() { echo "lib.sh: $*" >&2; }

BENCH_TORCH=${BENCH_TORCH:-pypi}
BENCH_TORCH_SPEC=${BENCH_TORCH_SPEC:-torch>=2}
BENCH_VENV=${BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/nestpipe-bench/venv-torch}
# PyPI's Linux torch is a CUDA build: with its nvidia-* dependencies (which it cannot load
# without, even on CPU) the virtualenv takes about 5 GiB.
BENCH_VENV_MIN_FREE_GIB=8

# torch_venv: 0 when $BENCH_VENV/bin/python imports torch and numpy, installing them with pip
# the first time (or when BENCH_TORCH_SPEC changed, or the virtualenv broke); 1, with a
# message, when it cannot. Serialised with flock, so two benches can start together.
torch_venv() {
  local py=$BENCH_VENV/bin/python stamp=$BENCH_VENV/.nestpipe-bench-spec
  local dir log base="" cand free t0 rc=0
  venv_ok() {
    [[ -f $stamp && $(cat "$stamp") == "$BENCH_TORCH_SPEC" ]] &&
      "$py" -c 'import torch, numpy' 2>/dev/null
  }
  if venv_ok; then return 0; fi
  dir=$(dirname "$BENCH_VENV")
  log=$BENCH_VENV.log
  if ! mkdir -p "$dir"; then
    lib_log "cannot create $dir"
    return 1
  fi
  # A Python that can make a virtualenv: Debian's own first (a pyenv shim may change under
  # us), then python3 on PATH. Debian splits ensurepip off into python3-venv.
  for cand in /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import venv, ensurepip' 2>/dev/null; then
      base=$cand
      break
    fi
  done
  if [[ -z $base && -x /usr/bin/python3 ]] && command -v apt-get >/dev/null; then
    if [[ $(id -u) == 0 ]]; then
      lib_log "python3 has no venv module; apt-get install python3-venv"
      {
        apt-get install -y python3-venv ||
          { apt-get update && apt-get install -y python3-venv; }
      } >>"$log" 2>&1 || true
      if /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then base=/usr/bin/python3; fi
    else
      lib_log "python3 has no venv module: sudo apt-get install python3-venv"
    fi
  fi
  if [[ -z $base ]]; then
    lib_log "no python3 here can create a virtualenv (python3 -m venv)"
    return 1
  fi
  free=$(df -Pk "$dir" | awk 'NR == 2 {print int($4 / 1048576)}')
  if ((free < BENCH_VENV_MIN_FREE_GIB)); then
    lib_log "only $free GiB free in $dir; PyPI's torch needs about 5 GiB there" \
      "(set BENCH_VENV to a roomier place)"
    return 1
  fi
  (
    if command -v flock >/dev/null; then flock 9; fi
    if venv_ok; then exit 0; fi # made by another bench while this one waited
    lib_log "creating $BENCH_VENV: $base -m venv, pip install '$BENCH_TORCH_SPEC' numpy" \
      "(once; about 3 GB from PyPI, torch's nvidia-* CUDA wheels included; log: $log)"
    t0=$(date +%s)
    rm -rf "$BENCH_VENV"
    {
      "$base" -m venv "$BENCH_VENV" &&
        "$py" -m pip install --disable-pip-version-check --no-input "$BENCH_TORCH_SPEC" numpy &&
        "$py" -c 'import torch; x = torch.ones(64, 64); assert float((x @ x).sum()) == 64 ** 3'
    } >"$log" 2>&1 || exit 1
    printf '%s\n' "$BENCH_TORCH_SPEC" >"$stamp"
    lib_log "installed $("$py" -c 'import torch; print("torch", torch.__version__)')" \
      "in $(($(date +%s) - t0)) s"
  ) 9>"$BENCH_VENV.lock" || rc=$?
  if ((rc != 0)); then
    lib_log "could not install '$BENCH_TORCH_SPEC' into $BENCH_VENV (last lines of $log):"
    tail -n 3 "$log" 2>/dev/null | sed 's/^/    /' >&2
    rm -rf "$BENCH_VENV" # a partial install can hold gigabytes; the next run tries again
    lib_log "BENCH_TORCH=system skips this attempt"
    return 1
  fi
}

TORCH_PYS=() TORCH_TAGS=() TORCH_SHOWN=() TORCH_LINES=() TORCH_MISSING=""
has_torch() { command -v "$1" >/dev/null && "$1" -c 'import torch, numpy' 2>/dev/null; }
add_torch() { # PYTHON TAG SOURCE: one entry of the TORCH_* arrays (TAG: unless Debian's)
  local version="" cap origin numpy built
  {
    IFS= read -r version
    IFS= read -r cap
    IFS= read -r origin
    IFS= read -r numpy
    IFS= read -r built
  } < <("$1" - <<'PYEOF'
import numpy, platform, torch
lines = [l.strip().lstrip("- ") for l in torch.__config__.show().splitlines()[1:]]
lines = [l for l in lines[:next((i for i, l in enumerate(lines) if l.startswith("Build settings")),
                                 len(lines))] if l]
# torch.backends.cpu.get_cpu_capability() is torch >= 2.0; 1.13 says it in its config.
cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
used = [l.split(":", 1)[1].strip() for l in lines if l.startswith("CPU capability usage")]
print(torch.__version__)
print(cap() if cap else (used[0] if used else "unknown"))
print("Debian" if torch.__file__.startswith("/usr/lib/python3/dist-packages/") else "")
print(f"NumPy {numpy.__version__}, Python {platform.python_version()}")
print("; ".join(l for l in lines if not l.startswith("CPU capability usage")))
PYEOF
  ) || true # a read at end of input fails; set -e must not end the bench for that
  if [[ -z $version ]]; then
    lib_log "$1 imports torch but could not describe it; left out"
    return
  fi
  TORCH_PYS+=("$1")
  TORCH_TAGS+=("${version%%+*} (${origin:-$2})")
  TORCH_SHOWN+=("${1/#"$HOME"/\~}")
  TORCH_LINES+=("PyTorch $version, CPU capability $cap, $numpy; from $3; built with: $built")
  lib_log "PyTorch $version (CPU capability $cap) from $3"
}

if [[ -n ${PYTHON:-} ]]; then
  if has_torch "$PYTHON"; then
    add_torch "$PYTHON" PYTHON "PYTHON=$PYTHON"
  else
    TORCH_MISSING="PYTHON=$PYTHON does not import torch and numpy"
  fi
else
  case $BENCH_TORCH in
  both | pypi | system) ;;
  *)
    lib_log "BENCH_TORCH must be both, pypi or system, got '$BENCH_TORCH'"
    exit 2
    ;;
  esac
  if [[ $BENCH_TORCH != system ]]; then
    if torch_venv; then
      # the result names the virtualenv relative to HOME: no machine's path in a result
      add_torch "$BENCH_VENV/bin/python" PyPI "PyPI ('$BENCH_TORCH_SPEC'), virtualenv ${BENCH_VENV/#$HOME/\~}"
    else
      lib_log "PyPI's torch left out; the system's torch only"
    fi
  fi
  # Debian's python3-torch lives in the system Python; a pyenv python3 earlier on PATH does
  # not see it.
  if [[ $BENCH_TORCH != pypi || ${#TORCH_PYS[@]} == 0 ]]; then
    for cand in python3 /usr/bin/python3; do
      if has_torch "$cand"; then
        add_torch "$(command -v "$cand")" system "system python3, $(command -v "$cand")"
        break
      fi
    done
  fi
  if ((${#TORCH_PYS[@]} == 0)); then
    TORCH_MISSING="no python3 here imports torch and numpy (apt-get install python3-torch)"
    if [[ $BENCH_TORCH != system ]]; then TORCH_MISSING="no PyPI torch, and $TORCH_MISSING"; fi
  fi
fi
if ((${#TORCH_PYS[@]} == 0)); then lib_log "no PyTorch: $TORCH_MISSING"; fi
PY=${TORCH_PYS[0]:-}

# Reading JSON and rendering the table need only the standard library: any python3 will do.
JPY=${PY:-python3}
json_get() { # FILE KEY -> the value, empty when absent or null; a list joined by spaces
  "$JPY" -c '
import json, sys
v = json.load(open(sys.argv[1])).get(sys.argv[2])
print("" if v is None else " ".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2"
}
is_finite() { "$JPY" -c 'import math,sys; sys.exit(not math.isfinite(float(sys.argv[1])))' "$1"; }

# ---- ISA knobs (bench/README.md "PyTorch's ISA knobs")
# CPU_ISA: the widest instruction set of this CPU that the libraries have kernels for, from
# /proc/cpuinfo: avx512 (avx512f, bw, vl and dq: the SkylakeX kernels' needs), avx2 (with
# fma), or empty. OPENBLAS_ISA_CORE: the OPENBLAS_CORETYPE of its kernels (SkylakeX, Haswell).
CPU_ISA="" OPENBLAS_ISA_CORE=""
if CPU_FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "; then
  if [[ $CPU_FLAGS == *" avx512f "* && $CPU_FLAGS == *" avx512bw "* &&
    $CPU_FLAGS == *" avx512vl "* && $CPU_FLAGS == *" avx512dq "* ]]; then
    CPU_ISA=avx512 OPENBLAS_ISA_CORE=SkylakeX
  elif [[ $CPU_FLAGS == *" avx2 "* && $CPU_FLAGS == *" fma "* ]]; then
    CPU_ISA=avx2 OPENBLAS_ISA_CORE=Haswell
  fi
fi

# openblas_family CORE: the instruction set of an OpenBLAS core's sgemm kernels (Cooperlake's
# and SapphireRapids' sgemm are SkylakeX's; Zen's are Haswell's).
openblas_family() {
  case ${1,,} in
  skylakex | cooperlake | sapphirerapids) echo avx512 ;;
  haswell | zen) echo avx2 ;;
  *) echo "${1,,}" ;;
  esac
}

# torch_blas PYTHON [VAR=VALUE ...]: what the build's float matmul runs on, with those
# variables set: "MKL, AVX-512" or "MKL, non-Intel path" (from MKL_VERBOSE), "OpenBLAS, core
# Cooperlake" (from OPENBLAS_VERBOSE), or "unknown".
torch_blas() {
  local py=$1 out line isa
  shift
  out=$(env "$@" MKL_VERBOSE=1 OPENBLAS_VERBOSE=2 "$py" -c \
    'import torch; a = torch.ones(64, 64); a @ a' 2>&1) || out=""
  if line=$(grep -m1 '^MKL_VERBOSE oneMKL' <<<"$out"); then
    # "... Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) with ..." on its Intel
    # paths; "... Intel(R) Architecture processors, ..." on the one it takes on other CPUs
    isa=$(grep -oE '\(Intel\(R\) (AVX|SSE)[^)]*\)' <<<"$line" | head -n 1 | sed 's/^(Intel(R) //; s/)$//')
    echo "MKL, ${isa:-non-Intel path}"
  elif line=$(grep -m1 '^Core: ' <<<"$out"); then
    echo "OpenBLAS, core ${line#Core: }"
  else
    echo unknown
  fi
}

# torch_cap PYTHON [VAR=VALUE ...]: ATen's CPU capability (AVX512, AVX2, DEFAULT) with those
# variables set.
torch_cap() {
  local py=$1
  shift
  env "$@" "$py" - 2>/dev/null <<'PYEOF' || echo unknown
import torch
cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
used = [l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines()
        if "CPU capability usage" in l]
print(cap() if cap else (used[0] if used else "unknown"))
PYEOF
}

# torch_isa_forced PYTHON SHIM: the settings that move this build's kernels up to CPU_ISA, each
# kept only when the build reports that it changed something (none of them can make a build
# pick an instruction set the CPU lacks). Sets FORCED_ENV (VAR=VALUE ..., space-separated;
# empty when no knob changes anything), FORCED_NOTE (what each kept knob changed, or why
# there is none), BLAS_DEFAULT / BLAS_FORCED (torch_blas without and with FORCED_ENV) and
# CAP_DEFAULT / CAP_FORCED (torch_cap likewise).
# SHIM: bench/mkl_intel_cpu.c built as a shared object, or empty.
#   ATen:     ATEN_CPU_CAPABILITY=CPU_ISA, when the default capability is another one
#   MKL:      LD_PRELOAD=SHIM, when MKL is on its non-Intel path and the shim moves it off
#             (MKL_DEBUG_CPU_TYPE and MKL_ENABLE_INSTRUCTIONS change nothing there)
#   OpenBLAS: OPENBLAS_CORETYPE=OPENBLAS_ISA_CORE, when the core picked has other kernels
FORCED_ENV="" FORCED_NOTE="" BLAS_DEFAULT="" BLAS_FORCED="" CAP_DEFAULT="" CAP_FORCED=""
torch_isa_forced() {
  local py=$1 shim=$2 cap cap2 blas2 core kept=() why=() forced=()
  FORCED_ENV="" FORCED_NOTE="" BLAS_FORCED="" CAP_FORCED=""
  BLAS_DEFAULT=$(torch_blas "$py")
  cap=$(torch_cap "$py")
  CAP_DEFAULT=$cap
  if [[ -z $CPU_ISA ]]; then
    FORCED_NOTE="no ISA knob tried: the CPU has neither AVX-512 nor AVX2 with FMA"
    return
  fi
  if [[ ${cap,,} == "$CPU_ISA" ]]; then
    why+=("ATen already on ${cap}")
  else
    cap2=$(torch_cap "$py" ATEN_CPU_CAPABILITY="$CPU_ISA")
    if [[ ${cap2,,} == "$CPU_ISA" ]]; then
      FORCED_ENV+=" ATEN_CPU_CAPABILITY=$CPU_ISA"
      kept+=("ATEN_CPU_CAPABILITY=$CPU_ISA: ATen $cap → $cap2")
    else
      why+=("ATEN_CPU_CAPABILITY=$CPU_ISA leaves ATen on $cap")
    fi
  fi
  case $BLAS_DEFAULT in
  "MKL, non-Intel path")
    if [[ -z $shim ]]; then
      why+=("MKL on its non-Intel path (no shim built)")
    else
      blas2=$(torch_blas "$py" LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}")
      if [[ $blas2 == "MKL, non-Intel path" || $blas2 == unknown ]]; then
        why+=("MKL on its non-Intel path, which the shim does not change")
      else
        FORCED_ENV+=" LD_PRELOAD=$shim${LD_PRELOAD:+:$LD_PRELOAD}"
        kept+=("LD_PRELOAD=$(basename "$shim") (bench/mkl_intel_cpu.c): $BLAS_DEFAULT → $blas2")
      fi
    fi
    ;;
  MKL,*) why+=("$BLAS_DEFAULT already") ;;
  "OpenBLAS, core "*)
    core=${BLAS_DEFAULT#OpenBLAS, core }
    if [[ $(openblas_family "$core") == "$CPU_ISA" ]]; then
      why+=("OpenBLAS core $core already has $CPU_ISA kernels (OPENBLAS_CORETYPE=$OPENBLAS_ISA_CORE: the same sgemm)")
    else
      FORCED_ENV+=" OPENBLAS_CORETYPE=$OPENBLAS_ISA_CORE"
      kept+=("OPENBLAS_CORETYPE=$OPENBLAS_ISA_CORE: OpenBLAS core $core → $OPENBLAS_ISA_CORE")
    fi
    ;;
  *) why+=("its BLAS could not be identified") ;;
  esac
  FORCED_ENV=${FORCED_ENV# }
  if [[ -n $FORCED_ENV ]]; then
    read -ra forced <<<"$FORCED_ENV" # VAR=VALUE words; no value holds a space
    BLAS_FORCED=$(torch_blas "$py" "${forced[@]}")
    CAP_FORCED=$(torch_cap "$py" "${forced[@]}")
    FORCED_NOTE=$(join_semi "${kept[@]}")
    if ((${#why[@]} > 0)); then FORCED_NOTE+="; unchanged: $(join_semi "${why[@]}")"; fi
  else
    FORCED_NOTE="no ISA knob changes anything: $(join_semi "${why[@]}")"
  fi
}
join_semi() { # ITEM ...: the items joined by "; "
  local out="" item
  for item in "$@"; do out+="${out:+; }$item"; done
  echo "$out"
}

# The machine a result was measured on: sets CPU_MODEL, SOCKETS, CORES, TPC, MEM, OS,
# CC_VER, BUILD_TYPE, OPENBLAS_VER, STARPU_VER, COMMIT and ENV_NOTE.
machine_facts() {
  field() { grep -m1 "^$1" | sed "s/^$1[[:space:]]*//"; }
  CPU_MODEL=$(lscpu | field 'Model name:')
  SOCKETS=$(lscpu | field 'Socket(s):')
  CORES=$(lscpu | field 'Core(s) per socket:')
  TPC=$(lscpu | field 'Thread(s) per core:')
  MEM=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
  # shellcheck disable=SC1091 # the running system's file
  OS=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null || echo unknown)
  CC_VER=$(gcc --version 2>/dev/null | head -n 1 || echo unknown)
  BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null || true)
  OPENBLAS_VER=$(pkg-config --modversion openblas 2>/dev/null || echo unknown)
  STARPU_VER=$(pkg-config --modversion starpu-1.3 2>/dev/null || echo "not installed")
  COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    COMMIT+=" with uncommitted changes"
  fi
  ENV_NOTE=""
  for v in OPENBLAS_NUM_THREADS OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_CORETYPE \
    MKL_ENABLE_INSTRUCTIONS ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA LD_PRELOAD STARPU_SCHED \
    STARPU_NCPU STARPU_WORKERS_NOBIND; do
    if [[ -n ${!v:-} ]]; then ENV_NOTE+=" $v=${!v}"; fi
  done
}

# machine_facts for a bench of two nestpipe builds (no PyTorch side): also sets TORCH_LINES,
# TORCH_MISSING, NPROC and BASE_VERSION (the --version line of the build $BASE).
base_bench_facts() {
  machine_facts
  TORCH_LINES=() TORCH_MISSING="not measured here" NPROC=$(nproc)
  BASE_VERSION=$("$BASE" --version | head -n 1)
}

# The result file's "## Machine" section from machine_facts and TORCH_LINES/TORCH_MISSING.
machine_section() {
  echo "## Machine"
  echo
  echo "- CPU: $CPU_MODEL, $SOCKETS socket(s) × $CORES core(s) × $TPC thread(s); nproc $NPROC"
  echo "- Memory: $MEM"
  echo "- OS: $OS, Linux $(uname -r)"
  echo "- Compiler: $CC_VER; nestpipe ${BUILD_TYPE:-unknown build type}, commit $COMMIT"
  echo "- OpenBLAS $OPENBLAS_VER; StarPU $STARPU_VER"
  if ((${#TORCH_LINES[@]} == 0)); then echo "- PyTorch: not available ($TORCH_MISSING)"; fi
  for line in "${TORCH_LINES[@]}"; do echo "- $line"; done
  echo "- Environment:${ENV_NOTE:- nothing set (OpenBLAS, OpenMP and StarPU defaults)}"
}

# ---- two builds of nestpipe on the same runs (bench/handles.sh, bench/idle.sh)
# np_launch BINARY R ARGS...: `BINARY train ARGS` on R ranks (mpirun past 1), 600 s at most
np_launch() {
  local bin=$1 R=$2
  shift 2
  if [[ $R == 1 ]]; then
    timeout 600 "$bin" train "$@"
  else
    timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$R" --mca btl self,vader \
      -x STARPU_SILENT -x STARPU_HOME "$bin" train "$@"
  fi
}
# ab_setup NAME [--base OTHER/nestpipe] [--steps S] [--repeats R] [--quick] -- the options
# of a bench that compares this build with an earlier one (ab_rates): sets BASE, STEPS
# (60), REPEATS (5), NP (this build's binary) and W (a work folder, removed at exit), and
# exports the environment the runs need. Exits 2 naming NAME on a bad option.
ab_setup() {
  local name=$1 quick=0
  shift
  BASE="" STEPS=60 REPEATS=5
  while [[ $# -gt 0 ]]; do
    case "$1" in
    --base) BASE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "$name.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
  done
  NP=${NESTPIPE:-build/nestpipe}
  [[ -x $NP ]] || { echo "$name.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
  [[ -n $BASE && -x $BASE ]] || {
    echo "$name.sh: --base names the nestpipe binary to compare with (a build of an earlier commit)" >&2
    exit 2
  }
  if [[ $quick == 1 ]]; then STEPS=4 REPEATS=1; fi
  export STARPU_SILENT=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  W=$(mktemp -d "/tmp/np_${name}_XXXXXX")
  # shellcheck disable=SC2064 # the folder is known now
  trap "rm -rf '$W'" EXIT
}

# own_bench_setup NAME: for a bench of this build alone on its own flags (no PyTorch side):
# NP (this build's binary, `realpath`ed; exits 2 naming NAME when it is not built), the
# environment MPI runs need, W (a work folder, removed at exit), the machine's facts, STAMP
# and OUT (ab_result_path NAME).
own_bench_setup() {
  NP=$(realpath "${NESTPIPE:-build/nestpipe}")
  [[ -x $NP ]] || { echo "$1.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
  export STARPU_SILENT=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  W=$(mktemp -d "/tmp/np_$1_XXXXXX")
  # shellcheck disable=SC2064 # the folder is known now
  trap "rm -rf '$W'" EXIT
  machine_facts
  TORCH_LINES=() TORCH_MISSING="not measured here" NPROC=$(nproc)
  ab_result_path "$1"
}

# ab_result_path NAME: STAMP (today) and OUT, bench/results/<date>-<cpu>-NAME.md, for a
# bench of ab_setup's kind (after base_bench_facts, which names the CPU)
ab_result_path() {
  STAMP=$(date +%Y-%m-%d)
  local tag
  tag=$(echo "$CPU_MODEL" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//' | cut -c1-24)
  OUT=bench/results/$STAMP-$tag-$1.md
  mkdir -p bench/results
}

# ab_rates BASE NEW R TMP REPEATS [train flags...]: the two builds alternating run by run
# (base first), REPEATS runs each of the same training; prints "BASE_MEDIAN NEW_MEDIAN"
# samples/s. The last dumps of both sides must be the same bytes (a result over different
# arithmetic would mean nothing): otherwise it fails.
ab_rates() {
  local base=$1 new=$2 R=$3 tmp=$4 reps=$5 k side bin b="" n=""
  shift 5
  for ((k = 1; k <= reps; k++)); do
    for side in base new; do
      bin=$new
      [[ $side == base ]] && bin=$base
      lib_log "$(date +%T) R=$R $side run $k/$reps: $*"
      np_launch "$bin" "$R" "$@" --metrics-json "$tmp/m.json" --dump-params "$tmp/$side.params" \
        2>"$tmp/err" || { lib_log "failed: $(tail -n 2 "$tmp/err")"; return 1; }
      if [[ $side == base ]]; then b+="$(json_get "$tmp/m.json" samples_per_s) "; else n+="$(json_get "$tmp/m.json" samples_per_s) "; fi
    done
  done
  cmp -s "$tmp/base.params" "$tmp/new.params" || { lib_log "the two builds trained different models"; return 1; }
  echo "$(echo "$b" | median_of) $(echo "$n" | median_of)"
}
# words on stdin -> their median
median_of() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# ---- a link on this machine (bench/exchange.sh, bench/torchrec.sh; bench/fwp.sh has its own)
# tc_link_up NS RATE: network namespace NS whose loopback is shaped to RATE by `tc tbf`, for
# MPI or gloo over TCP on lo; both directions of every rank share the rate. The 100 ms queue
# holds the ranks' 64 KB loopback segments (5 ms dropped 8% of them, each drop a TCP
# retransmission timeout: bench/README.md "Frozen-Window Pipelining"). Needs root; delete
# it with `ip netns del NS`.
tc_link_up() {
  ip netns add "$1" && ip netns exec "$1" ip link set lo up &&
    ip netns exec "$1" tc qdisc add dev lo root tbf rate "$2" burst 256kb latency 100ms
}

# ---- TorchRec (bench/torchrec.sh, bench/README.md "TorchRec across ranks")
# torchrec_venv: 0 when $TORCHREC_VENV/bin/python imports torch, torchrec and fbgemm_gpu,
# installing them the first time (or when TORCHREC_SPEC changed, or the virtualenv broke);
# 1, with a one-line message, when it cannot. A sibling of torch_venv's virtualenv, as
# TorchRec pins its own torch: PyPI torch==2.14.1 with its dependencies, then fbgemm-gpu-cpu
# and torchrec with --no-deps (torchrec's metadata names the CUDA fbgemm-gpu, which would
# bring a second fbgemm and more CUDA wheels), then what torchrec imports. About 5.5 GB.
#   TORCHREC_VENV  the virtualenv (default: venv-torchrec beside BENCH_VENV)
#   TORCHREC_SPEC  the pinned set, a space-separated list: TORCH FBGEMM TORCHREC MORE...
TORCHREC_VENV=${TORCHREC_VENV:-$(dirname "$BENCH_VENV")/venv-torchrec}
TORCHREC_SPEC=${TORCHREC_SPEC:-torch==2.14.1 fbgemm-gpu-cpu==1.9.0 torchrec==1.9.2 tensordict torchmetrics==1.0.3 tqdm pyre-extensions numpy}
torchrec_venv() {
  local py=$TORCHREC_VENV/bin/python stamp=$TORCHREC_VENV/.nestpipe-bench-spec
  local dir log=$TORCHREC_VENV.log base="" cand free t0 rc=0 spec=()
  read -ra spec <<<"$TORCHREC_SPEC"
  if ((${#spec[@]} < 3)); then
    lib_log "TORCHREC_SPEC must name torch, fbgemm-gpu-cpu and torchrec first, got '$TORCHREC_SPEC'"
    return 1
  fi
  trvenv_ok() {
    [[ -f $stamp && $(cat "$stamp") == "$TORCHREC_SPEC" ]] &&
      "$py" -c 'import torch, numpy, fbgemm_gpu, torchrec' 2>/dev/null
  }
  if trvenv_ok; then return 0; fi
  dir=$(dirname "$TORCHREC_VENV")
  if ! mkdir -p "$dir" 2>/dev/null; then
    lib_log "cannot create $dir for the TorchRec virtualenv"
    return 1
  fi
  for cand in /usr/bin/python3 python3; do # as torch_venv: Debian's Python first
    if command -v "$cand" >/dev/null && "$cand" -c 'import venv, ensurepip' 2>/dev/null; then
      base=$cand
      break
    fi
  done
  if [[ -z $base ]]; then
    lib_log "no python3 here can create a virtualenv for TorchRec (apt-get install python3-venv)"
    return 1
  fi
  free=$(df -Pk "$dir" | awk 'NR == 2 {print int($4 / 1048576)}')
  if ((free < BENCH_VENV_MIN_FREE_GIB)); then
    lib_log "only $free GiB free in $dir; TorchRec's virtualenv needs about 5.5 GiB (set TORCHREC_VENV)"
    return 1
  fi
  (
    if command -v flock >/dev/null; then flock 9; fi
    if trvenv_ok; then exit 0; fi # made by another bench while this one waited
    lib_log "creating $TORCHREC_VENV: ${spec[*]:0:3} (once; about 5.5 GB from PyPI; log: $log)"
    t0=$(date +%s)
    rm -rf "$TORCHREC_VENV"
    {
      "$base" -m venv "$TORCHREC_VENV" &&
        "$py" -m pip install --disable-pip-version-check --no-input "${spec[0]}" "${spec[@]:3}" &&
        "$py" -m pip install --disable-pip-version-check --no-input --no-deps "${spec[1]}" "${spec[2]}" &&
        "$py" -c 'import torch, fbgemm_gpu, torchrec
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
ebc = EmbeddingBagCollection(tables=[EmbeddingBagConfig(name="t", embedding_dim=4,
    num_embeddings=10, feature_names=["f"])])
kjt = KeyedJaggedTensor.from_lengths_sync(keys=["f"], values=torch.tensor([1, 2, 3]),
    lengths=torch.tensor([2, 1]))
assert ebc(kjt)["f"].shape == (2, 4)'
    } >"$log" 2>&1 || {
      rm -rf "$TORCHREC_VENV" # under the lock: a partial install can hold gigabytes
      exit 1
    }
    printf '%s\n' "$TORCHREC_SPEC" >"$stamp"
    lib_log "installed $("$py" -c 'import torch, torchrec; print("torch", torch.__version__, "torchrec", torchrec.__version__)' 2>/dev/null)" \
      "in $(($(date +%s) - t0)) s"
  ) 9>"$TORCHREC_VENV.lock" || rc=$?
  if ((rc != 0)); then
    lib_log "could not install TorchRec into $TORCHREC_VENV: $(tail -n 1 "$log" 2>/dev/null) (log: $log)"
    return 1
  fi
}
