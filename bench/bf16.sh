#!/usr/bin/env bash
# --precision bf16 against fp32 on the same data: eval AUC and logloss after S steps (the
# issue's bound: |delta AUC| <= 0.002 after 300 steps) and samples/s, on the default shape
# and the bench's Kaggle-like shape, all in one run. Writes bench/results/<date>-bf16.md.
#
#   bash bench/bf16.sh [--steps S] [--repeats R] [--out FILE]
#
# Needs build/nestpipe and a CPU with avx512_bf16 (nestpipe --version names the ISA).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STEPS=300 REPEATS=3 OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --out) OUT=${2:?--out needs a value}; shift 2 ;;
  -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bf16.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for v in STEPS REPEATS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bf16.sh: --${v,,} must be a positive whole number" >&2; exit 2; }
done
NP=build/nestpipe
[[ -x $NP ]] || { echo "bf16.sh: build/nestpipe not found; build first: bash .ci/build" >&2; exit 2; }
KERNELS=$("$NP" --version | sed -n 's/^dense kernels: //p')
if ! grep -q 'avx512_core_\(bf16\|amx\)' <<<"$KERNELS"; then
  echo "bf16.sh: this CPU has no avx512_bf16 ($KERNELS)" >&2
  exit 2
fi
OUT=${OUT:-bench/results/$(date +%F)-bf16.md}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export STARPU_SILENT=1
declare -A SHAPE=(
  [default]=""
  [kaggle]="--rows 100000 --bottom 13-512-256-64-16 --top 512-256-1 --batch 2048"
)
: >"$WORK/rows"
for shape in default kaggle; do
  for prec in fp32 bf16; do
    for ((k = 1; k <= REPEATS; k++)); do
      echo "bf16.sh: $shape $prec run $k/$REPEATS" >&2
      # shellcheck disable=SC2086 # the shape is a list of flags
      "$NP" train ${SHAPE[$shape]} --steps "$STEPS" --precision "$prec" --quiet \
        --metrics-json "$WORK/m.json"
      python3 - "$WORK/m.json" "$shape" "$prec" >>"$WORK/rows" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["precision"] == sys.argv[3]
print(sys.argv[2], sys.argv[3], d["samples_per_s"], d["eval_auc"], d["eval_logloss"], sep="\t")
PY
    done
  done
done
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
python3 - "$WORK/rows" "$OUT" "$CPU" "$(nproc)" "$STEPS" "$REPEATS" "$KERNELS" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
out, cpu, nproc, steps, reps, kernels = sys.argv[2:8]
by = {}
for shape, prec, sps, auc, ll in rows:
    by.setdefault((shape, prec), []).append((float(sps), float(auc), float(ll)))
with open(out, "w") as f:
    print(f"# --precision bf16 vs fp32, {cpu}\n", file=f)
    print(f"{nproc} cores; {steps} steps, eval on the held-out samples; samples/s is the median "
          f"of {reps} runs (the model, and so AUC and logloss, is the same in every run). "
          f"Kernels: {kernels}. One `bash bench/bf16.sh` run.\n", file=f)
    print("| shape | fp32 samples/s | bf16 samples/s | bf16 speedup | fp32 AUC | bf16 AUC | ΔAUC | fp32 logloss | bf16 logloss | within 0.002 |", file=f)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|", file=f)
    for shape in ("default", "kaggle"):
        a, b = by[shape, "fp32"], by[shape, "bf16"]
        sa, sb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
        da = b[0][1] - a[0][1]
        print(f"| {shape} | {sa:.0f} | {sb:.0f} | {sb / sa:.2f}x | {a[0][1]:.5f} | {b[0][1]:.5f} "
              f"| {da:+.6f} | {a[0][2]:.5f} | {b[0][2]:.5f} | {'yes' if abs(da) <= 0.002 else 'NO'} |", file=f)
    print("\nShapes: default = `nestpipe train` defaults (26 x 20k rows, 13-64-16 / 64-1, batch "
          "1024); kaggle = 26 x 100k rows, 13-512-256-64-16 / 512-256-1, batch 2048.", file=f)
PY
echo "bf16.sh: wrote $OUT" >&2
cat "$OUT"
