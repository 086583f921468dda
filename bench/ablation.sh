#!/usr/bin/env bash
# Ablation of the speed work of issue 12: the gain of each item alone, on the bench shape
# (bench/run.sh's Kaggle-like DLRM), 1 rank and 2 ranks on this host, all in one run:
# - "before": the commit before the work (OpenBLAS products, sequential default, spinning
#   idle workers, StarPU's own binding), built into a temporary worktree;
# - "+ oneDNN": that commit plus only the oneDNN products (the next commit), same defaults;
# - "now": this checkout's build/nestpipe with its defaults, then with one item turned off
#   at a time (--pipeline sequential; NP_IDLE_SPIN=1; StarPU's own binding through
#   STARPU_WORKERS_CPUID) and with --precision bf16 on.
# Synthetic batch generation is inside every figure. Writes
# bench/results/<date>-ablation.md.
#
#   bash bench/ablation.sh [--steps S] [--repeats R] [--quick] [--out FILE]
#
# Needs the project built into build/, git, and the build dependencies of the old commit
# (libopenblas-dev) for the "before" rows; a row that cannot run says why.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STEPS=60 REPEATS=3 QUICK=0 OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --out) OUT=${2:?--out needs a value}; shift 2 ;;
  -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "ablation.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for v in STEPS REPEATS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "ablation.sh: --${v,,} must be a positive whole number" >&2; exit 2; }
done
((QUICK)) && STEPS=3 REPEATS=1
NP=$ROOT/build/nestpipe
[[ -x $NP ]] || { echo "ablation.sh: build/nestpipe not found; build first: bash .ci/build" >&2; exit 2; }
BEFORE=ac812ac ONEDNN=93f23c3 # the commit before issue 12's work, and the oneDNN one on top
OUT=${OUT:-bench/results/$(date +%F)-ablation.md}
WORK=$(mktemp -d)
trap 'git worktree remove --force "$WORK/wt-before" 2>/dev/null; git worktree remove --force "$WORK/wt-onednn" 2>/dev/null; rm -rf "$WORK"' EXIT
log() { echo "ablation.sh: $*" >&2; }
export STARPU_SILENT=1
SHAPE=(--tables 26 --rows 100000 --zipf 1.05 --dim 16 --bottom 13-512-256-64-16 --top 512-256-1
  --batch 2048 --eval-samples 0 --quiet)

# build COMMIT DIR: the old commit's nestpipe in a worktree; prints the binary or nothing
build_old() {
  local commit=$1 dir=$2
  git worktree add --detach "$dir" "$commit" >/dev/null 2>&1 || return 1
  cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >"$dir.log" 2>&1 &&
    cmake --build "$dir/build" -j "$(nproc)" --target nestpipe >>"$dir.log" 2>&1 &&
    echo "$dir/build/nestpipe"
}
log "building $BEFORE and $ONEDNN in worktrees"
NP_BEFORE=$(build_old "$BEFORE" "$WORK/wt-before") || NP_BEFORE=""
NP_ONEDNN=$(build_old "$ONEDNN" "$WORK/wt-onednn") || NP_ONEDNN=""

# measure R BINARY [ENV=V ...] -- [FLAGS...]: REPEATS runs; prints the samples/s, one per run
measure() {
  local R=$1 bin=$2 envs=() flags=() m=$WORK/m.json
  shift 2
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  flags=("$@")
  local xs=() e
  for e in "${envs[@]}"; do xs+=(-x "${e%%=*}"); done
  for ((k = 1; k <= REPEATS; k++)); do
    rm -f "$m"
    if ((R == 1)); then
      env "${envs[@]}" "$bin" train "${SHAPE[@]}" --steps "$STEPS" --metrics-json "$m" "${flags[@]}" \
        >/dev/null 2>"$WORK/err" || { echo "failed: $(tail -n 1 "$WORK/err")"; return; }
    else
      env "${envs[@]}" mpirun --allow-run-as-root --oversubscribe -np "$R" -x STARPU_SILENT \
        "${xs[@]}" "$bin" train "${SHAPE[@]}" --steps "$STEPS" --metrics-json "$m" "${flags[@]}" \
        >/dev/null 2>"$WORK/err" || { echo "failed: $(tail -n 1 "$WORK/err")"; return; }
    fi
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['steps']==$STEPS; print(round(d['samples_per_s']))" "$m" ||
      { echo "failed: invalid metrics"; return; }
  done
}

ROWS=$WORK/rows.tsv
: >"$ROWS"
row() { # NAME WHAT R BINARY [ENV...] -- [FLAGS...]
  local name=$1 what=$2 R=$3 bin=$4
  shift 4
  log "$name, $R rank(s)"
  if [[ -z $bin ]]; then
    printf '%s\t%s\t%s\tfailed: not built (see the worktree log)\n' "$name" "$what" "$R" >>"$ROWS"
    return
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$what" "$R" "$(measure "$R" "$bin" "$@" | tr '\n' ' ')" >>"$ROWS"
}
for R in 1 2; do
  row "before" "commit $BEFORE: OpenBLAS, sequential, spinning, StarPU's binding" "$R" "$NP_BEFORE" --
  row "+ oneDNN only" "commit $ONEDNN: before + oneDNN products" "$R" "$NP_ONEDNN" --
  row "now (defaults)" "this build: every item on" "$R" "$NP" --
  row "now - pipeline" "--pipeline sequential (batch generation still read ahead)" "$R" "$NP" -- --pipeline sequential
  row "now - idle yield" "NP_IDLE_SPIN=1: idle workers spin" "$R" "$NP" NP_IDLE_SPIN=1 --
  row "now - placement" "STARPU_WORKERS_CPUID='0 1': StarPU's own binding on every rank" "$R" "$NP" "STARPU_WORKERS_CPUID=0 1" --
  if "$NP" --version | grep -q 'avx512_core_\(bf16\|amx\)'; then
    row "now + bf16" "--precision bf16" "$R" "$NP" -- --precision bf16
  fi
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mkdir -p "$(dirname "$OUT")"
python3 - "$ROWS" "$OUT" "$CPU" "$(nproc)" "$STEPS" "$REPEATS" "$("$NP" --version | tail -n 1)" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
out, cpu, nproc, steps, reps, kernels = sys.argv[2:8]
med = {}
for name, what, R, data in rows:
    xs = [float(x) for x in data.split()] if not data.startswith("failed") else []
    med[name, R] = statistics.median(xs) if xs else None
with open(out, "w") as f:
    print(f"# Ablation of the speed items (issue 12), {cpu}\n", file=f)
    print(f"{nproc} cores; bench shape (26 x 100k rows, dim 16, 13-512-256-64-16 / 512-256-1, "
          f"batch 2048); {steps} steps a run, median of {reps} runs, synthetic batch generation "
          f"included; one `bash bench/ablation.sh` run. Kernels now: {kernels}.\n", file=f)
    print("| config | what | 1 rank samples/s | vs before | vs now | 2 ranks samples/s | vs before | vs now |", file=f)
    print("|---|---|---:|---:|---:|---:|---:|---:|", file=f)
    names = list(dict.fromkeys(r[0] for r in rows))
    whats = {r[0]: r[1] for r in rows}
    def cell(name, R):
        v = med.get((name, R))
        if v is None:
            d = [r[3] for r in rows if r[0] == name and r[2] == R]
            return [d[0] if d else "–", "–", "–"]
        b, n = med.get(("before", R)), med.get(("now (defaults)", R))
        return [f"{v:.0f}", f"{v / b:.2f}x" if b else "–", f"{v / n:.2f}x" if n else "–"]
    for name in names:
        print(f"| {name} | {whats[name]} | " + " | ".join(cell(name, "1") + cell(name, "2")) + " |", file=f)
    print("\nRaw samples/s per run:\n", file=f)
    for name, what, R, data in rows:
        print(f"- {name}, {R} rank(s): {data}", file=f)
PYEOF
log "wrote $OUT"
cat "$OUT"
