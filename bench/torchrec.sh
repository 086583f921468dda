#!/usr/bin/env bash
# nestpipe against TorchRec as peers, across ranks, in one run: `nestpipe train` on R ranks
# (mpirun) and TorchRec's DLRM of the same shape on R ranks (bench/torchrec_dlrm.py: every
# table TABLE_WISE, fused EXACT_SGD, gloo), alternating round by round, at 4 keys a bag and
# at 1. With R > 1 both run inside one network namespace whose loopback is shaped with
# `tc tbf` (bench/fwp.sh's link: MPI over TCP and gloo over TCP share the same shaped lo);
# --ranks 1 is the one-process comparison (no link, no root).
# Writes bench/results/<date>-torchrec[-Nrank][-<NP_EXTRA>][-quick].md: samples/s per round and medians,
# the ratio, both sides' wire bytes per step, the machine. See bench/README.md.
#
#   bash bench/torchrec.sh [--ranks R] [--repeats N] [--steps S] [--warmup W] [--rate 2gbit]
#                          [--keys "4 1"] [--quick] [--out FILE]
#
# Environment: NP_EXTRA (flags appended to nestpipe's, e.g. "--exchange pooled"; later flags
# win), NP_PIPE (nestpipe's pipeline flags, default "--pipeline nestpipe --windows 8
# --cluster keys"), NESTPIPE (the binary, default build/nestpipe), TORCHREC_VENV (the
# virtualenv bench/lib.sh's torchrec_venv makes on first use, about 5.5 GB), RUN_TIMEOUT
# (seconds one process may run, default 900).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

RANKS=2 REPEATS=3 STEPS=30 WARMUP=3 RATE=2gbit KEYS="4 1" QUICK=0 OUT=""
usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [[ $# -gt 0 ]]; do
  case "$1" in
  --ranks) RANKS=${2:?--ranks needs a value}; shift 2 ;;
  --repeats) REPEATS=${2:?--repeats needs a value}; shift 2 ;;
  --steps) STEPS=${2:?--steps needs a value}; shift 2 ;;
  --warmup) WARMUP=${2:?--warmup needs a value}; shift 2 ;;
  --rate) RATE=${2:?--rate needs a value}; shift 2 ;;
  --keys) KEYS=${2:?--keys needs a value}; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --out) OUT=${2:?--out needs a value}; shift 2 ;;
  -h | --help) usage 0 ;;
  *) echo "torchrec.sh: unknown option '$1'" >&2; usage 2 >&2 ;;
  esac
done
for v in RANKS REPEATS STEPS WARMUP; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "torchrec.sh: --${v,,} must be a whole number, got '${!v}'" >&2; exit 2; }
done
for k in $KEYS; do
  [[ $k =~ ^[0-9]+$ ]] || { echo "torchrec.sh: --keys must be whole numbers, got '$KEYS'" >&2; exit 2; }
done
((RANKS >= 1 && REPEATS >= 1 && STEPS >= 1)) ||
  { echo "torchrec.sh: --ranks, --repeats and --steps must be at least 1" >&2; exit 2; }

# The issue's shape: 26 tables of 200 000 rows, dim 64, Zipf 1.05, global batch 4096, a large
# dense part (bench/fwp.sh's MLPs). --quick: a tiny shape that checks every piece runs.
TABLES=26 ROWS=200000 DIM=64 ZIPF=1.05 BATCH=4096 BOTTOM=13-512-256-64 TOP=1024-512-256-1
if [[ $QUICK == 1 ]]; then
  TABLES=8 ROWS=20000 DIM=16 BATCH=256 BOTTOM=13-32-16 TOP=64-32-1 STEPS=3 WARMUP=1 REPEATS=1
fi
((BATCH % RANKS == 0)) || { echo "torchrec.sh: --ranks $RANKS must divide the batch $BATCH" >&2; exit 2; }
NP_PIPE=${NP_PIPE:---pipeline nestpipe --windows 8 --cluster keys}
NP_EXTRA=${NP_EXTRA:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
read -ra NP_PIPE_ARGS <<<"$NP_PIPE"
read -ra NP_EXTRA_ARGS <<<"$NP_EXTRA"

NP=$(realpath "${NESTPIPE:-build/nestpipe}")
[[ -x $NP ]] || { echo "torchrec.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
if ((RANKS > 1)); then
  [[ $(id -u) == 0 ]] || { echo "torchrec.sh: --ranks $RANKS needs root for ip netns and tc (--ranks 1 does not)" >&2; exit 2; }
  for tool in ip tc mpirun; do
    command -v "$tool" >/dev/null || { echo "torchrec.sh: needs $tool (iproute2, Open MPI)" >&2; exit 2; }
  done
fi

W=$(mktemp -d /tmp/np_torchrec_XXXXXX)
NS=np_torchrec_$$
cleanup() {
  if ((RANKS > 1)); then ip netns del "$NS" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
log() { echo "torchrec.sh: $*" >&2; }

# bench/lib.sh, without its torch_venv (TorchRec pins its own torch): BENCH_TORCH=system only
# looks for a system torch, whose lines are dropped here; its start-up notes go to a file.
BENCH_TORCH=system
unset PYTHON
# shellcheck source=bench/lib.sh disable=SC1091
. bench/lib.sh 2>"$W/lib.log"
TORCH_PYS=() TORCH_TAGS=() TORCH_SHOWN=() TORCH_LINES=() TORCH_MISSING=""
torchrec_venv || { echo "torchrec.sh: no TorchRec virtualenv (see above)" >&2; exit 2; }
TRPY=$TORCHREC_VENV/bin/python
add_torch "$TRPY" PyPI "PyPI, virtualenv ${TORCHREC_VENV/#$HOME/\~} (bench/lib.sh torchrec_venv)"
TR_VERSIONS=$("$TRPY" -c 'import torchrec, fbgemm_gpu
print("TorchRec", torchrec.__version__, "with fbgemm-gpu-cpu", fbgemm_gpu.__version__)' 2>/dev/null)
TORCH_LINES+=("$TR_VERSIONS")

# PyPI torch's MKL takes its non-Intel path on AMD CPUs: bench/mkl_intel_cpu.c makes it
# dispatch by instruction set. torch_isa_forced keeps each knob only where it changes
# something; TorchRec then runs both ways each round, and its best variant is compared.
declare -A TR_ENV=([default]="")
TR_VARIANTS=(default)
SHIM=$W/mkl_intel_cpu.so
gcc -std=c11 -O2 -shared -fPIC bench/mkl_intel_cpu.c -o "$SHIM" 2>/dev/null || SHIM=""
torch_isa_forced "$TRPY" "$SHIM"
if [[ -n $FORCED_ENV ]]; then TR_VARIANTS+=(forced); fi
TR_ENV[forced]=$FORCED_ENV
log "TorchRec's torch: $BLAS_DEFAULT, ATen $CAP_DEFAULT; ISA knobs: $FORCED_NOTE"

if ((RANKS > 1)); then tc_link_up "$NS" "$RATE"; fi # bench/fwp.sh's link
export STARPU_SILENT=1 STARPU_HOME=$W/starpu OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run_np K OUT.json: one nestpipe run at K keys a bag (--hot K)
run_np() {
  local k=$1 m=$2
  local args=(train --tables "$TABLES" --rows "$ROWS" --dim "$DIM" --zipf "$ZIPF" --hot "$k"
    --bottom "$BOTTOM" --top "$TOP" --batch "$BATCH" "${NP_PIPE_ARGS[@]}" --steps "$STEPS"
    --eval-samples 0 --quiet --metrics-json "$m" "${NP_EXTRA_ARGS[@]}")
  if ((RANKS > 1)); then
    timeout "$RUN_TIMEOUT" ip netns exec "$NS" mpirun --allow-run-as-root --oversubscribe \
      -np "$RANKS" --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      -x STARPU_SILENT -x STARPU_HOME "$NP" "${args[@]}"
  else
    timeout "$RUN_TIMEOUT" "$NP" "${args[@]}"
  fi
}
# run_tr K VARIANT OUT.json: one TorchRec run, 1 thread a rank, gloo on the (shaped) lo
run_tr() {
  local k=$1 var=$2 out=$3 envs=() ns=()
  read -ra envs <<<"${TR_ENV[$var]}"
  if ((RANKS > 1)); then ns=(ip netns exec "$NS"); fi
  timeout "$RUN_TIMEOUT" "${ns[@]}" env "${envs[@]}" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    OPENBLAS_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo "$TRPY" bench/torchrec_dlrm.py \
    --ranks "$RANKS" --tables "$TABLES" --rows "$ROWS" --dim "$DIM" --zipf "$ZIPF" \
    --keys-per-bag "$k" --bottom "$BOTTOM" --top "$TOP" --batch "$BATCH" --steps "$STEPS" \
    --warmup "$WARMUP" --threads 1 >"$out"
}
# jnum FILE EXPR: a number from a JSON file (EXPR indexes d)
jnum() { "$JPY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# Rounds: nestpipe, then each TorchRec variant, for every K; one line per run in RES:
# system, variant, K, round, status (ok / failed), samples/s or the message, JSON file.
RES=$W/res.tsv
: >"$RES"
for ((r = 1; r <= REPEATS; r++)); do
  for k in $KEYS; do
    f=$W/np-$k-$r.json
    log "$(date +%T) round $r/$REPEATS, $k key(s) a bag: nestpipe on $RANKS rank(s)"
    if run_np "$k" "$f" >"$W/out" 2>"$W/err" &&
      [[ $(jnum "$f" "d['steps']") == "$STEPS" ]] && is_finite "$(jnum "$f" "d['train_loss']")"; then
      printf 'nestpipe\t-\t%s\t%s\tok\t%s\t%s\n' "$k" "$r" "$(jnum "$f" "d['samples_per_s']")" "$f" >>"$RES"
    else
      printf 'nestpipe\t-\t%s\t%s\tfailed\t%s\t\n' "$k" "$r" "$(tail -n 1 "$W/err" | tr '\t|' '  ')" >>"$RES"
    fi
    for var in "${TR_VARIANTS[@]}"; do
      f=$W/tr-$k-$var-$r.json
      log "$(date +%T) round $r/$REPEATS, $k key(s) a bag: TorchRec ($var) on $RANKS rank(s)"
      if run_tr "$k" "$var" "$f" 2>"$W/err" && [[ -s $f ]]; then
        printf 'torchrec\t%s\t%s\t%s\tok\t%s\t%s\n' "$var" "$k" "$r" \
          "$(jnum "$f" "d['samples_per_s_median']")" "$f" >>"$RES"
      else
        printf 'torchrec\t%s\t%s\t%s\tfailed\t%s\t\n' "$var" "$k" "$r" \
          "$(grep -v '^\s*$' "$W/err" | tail -n 1 | tr '\t|' '  ')" >>"$RES"
      fi
    done
  done
done

# ---- the report
machine_facts
NPROC=$(nproc)
STAMP=$(date +%Y-%m-%d)
if [[ -z $OUT ]]; then # <date>-torchrec[-1rank][-<NP_EXTRA as a slug>][-quick].md
  slug=$(tr -cs 'A-Za-z0-9' '-' <<<"$NP_EXTRA" | sed 's/^-*//; s/-*$//')
  suffix=""
  if ((RANKS != 2)); then suffix+="-${RANKS}rank"; fi
  if [[ -n $slug ]]; then suffix+="-$slug"; fi
  if [[ $QUICK == 1 ]]; then suffix+="-quick"; fi
  OUT=bench/results/$STAMP-torchrec$suffix.md
fi
mkdir -p "$(dirname "$OUT")"
# what the report's text needs, for its Python
export RANKS RATE STEPS WARMUP BATCH QUICK
export NP_SHOWN="nestpipe train --tables $TABLES --rows $ROWS --dim $DIM --zipf $ZIPF --hot K --bottom $BOTTOM --top $TOP --batch $BATCH $NP_PIPE --steps $STEPS --eval-samples 0${NP_EXTRA:+ $NP_EXTRA}"
export TR_SHOWN="torchrec_dlrm.py --ranks $RANKS --tables $TABLES --rows $ROWS --dim $DIM --zipf $ZIPF --keys-per-bag K --bottom $BOTTOM --top $TOP --batch $BATCH --steps $STEPS --warmup $WARMUP --threads 1"
export FORCED="${FORCED_ENV//"$W"\//}" FORCED_NOTE="${FORCED_NOTE//"$W"\//}"
{
  "$JPY" - "$RES" <<'PYEOF'
import json, os, statistics, sys
env = os.environ
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1], encoding="utf-8")]
R, rate = int(env["RANKS"]), env["RATE"]
steps = int(env["STEPS"])
title = (f"# nestpipe vs TorchRec: {R} ranks over a {rate} link" if R > 1 else
         "# nestpipe vs TorchRec: one process")
print(title + "\n")
if env["QUICK"] == "1":
    print("**--quick: a tiny shape and one round; these numbers mean nothing.**\n")
if R > 1:
    print(f"Both systems run {R} ranks on this machine inside one network namespace whose "
          f"loopback is shaped with `tc qdisc add dev lo root tbf rate {rate} burst 256kb "
          "latency 100ms` (bench/fwp.sh's link): nestpipe's MPI over TCP "
          "(`--mca btl self,tcp`), TorchRec's gloo over TCP, both on that lo. The link's rate "
          "is shared by both directions of both ranks, and the TCP stacks' copies run on the "
          "same cores as the training.\n")
else:
    print("One process each, no link.\n")
print(f"- nestpipe: `{env['NP_SHOWN']}`" + (f" under `mpirun -np {R}`" if R > 1 else "")
      + "; samples/s from its `--metrics-json`: every step from the first, synthetic batch "
      "generation included.")
print(f"- TorchRec: `{env['TR_SHOWN']}` (bench/torchrec_dlrm.py): TorchRec's DLRM on an "
      "EmbeddingBagCollection, every table TABLE_WISE, FBGEMM's fused EXACT_SGD, dense SGD "
      "(DDP), gloo, 1 thread a rank; samples/s = global batch / median step time (the "
      f"slowest rank's), after warm-up steps (--warmup), on batches made beforehand: both "
      "differences favour TorchRec.")
if env.get("FORCED"):
    print(f"- TorchRec ran twice a round: with the library defaults (`default`) and with "
          f"`{env['FORCED']}` (`forced`: {env['FORCED_NOTE']}); its faster variant is the "
          "one compared.")
else:
    print(f"- TorchRec's ISA knobs: {env['FORCED_NOTE']}.")
print()

def med(xs):
    return statistics.median(xs) if xs else None

keys = list(dict.fromkeys(r[2] for r in rows))
summary = []
for k in keys:
    print(f"## {k} key{'s' if k != '1' else ''} a bag\n")
    print("| system | samples/s (median) | step ms | rounds (samples/s) |")
    print("|---|---:|---:|---|")
    meds = {}
    labels = list(dict.fromkeys((r[0], r[1]) for r in rows if r[2] == k))
    for system, var in labels:
        runs = [r for r in rows if r[0] == system and r[1] == var and r[2] == k]
        ok = [float(r[5]) for r in runs if r[4] == "ok"]
        name = "nestpipe" if system == "nestpipe" else f"TorchRec ({var})"
        cells = " ".join(f"{float(r[5]):.0f}" if r[4] == "ok" else f"failed: {r[5]}"
                         for r in runs)
        m = med(ok)
        if m:
            meds[name] = (m, runs)
        print(f"| {name} | {m:.0f} | {1e3 * int(env['BATCH']) / m:.1f} | {cells} |" if m else
              f"| {name} | – | – | {cells} |")
    tr = [n for n in meds if n.startswith("TorchRec")]
    best = max(tr, key=lambda n: meds[n][0]) if tr else None
    print()
    if "nestpipe" in meds and best:
        ratio = meds["nestpipe"][0] / meds[best][0]
        print(f"**nestpipe / TorchRec: {ratio:.2f}x** (against {best}, TorchRec's best).\n")
        summary.append((k, meds["nestpipe"][0], meds[best][0], ratio))
    # wire bytes a step, from the last good run of each side
    npj = next((json.load(open(r[6])) for r in reversed(meds.get("nestpipe", (0, []))[1])
                if r[4] == "ok"), None)
    trj = next((json.load(open(r[6])) for r in reversed(meds[best][1]) if r[4] == "ok"),
               None) if best else None
    if R > 1 and (npj or trj):
        print("Wire bytes a step (one global batch): what the ranks send, summed over the ranks, "
              "and that sum divided by the ranks:\n")
        print("| system | embedding exchange | per rank | parts | dense all-reduce |")
        print("|---|---:|---:|---|---:|")
        xchg = None
        if npj:
            b = {n: v / npj["steps"] for n, v in npj["bytes_exchanged"].items()}
            emb = b["keys"] + b["rows"] + b["grads"]
            print(f"| nestpipe | {emb:,.0f} | {emb / R:,.0f} | keys {b['keys']:,.0f}, rows {b['rows']:,.0f}, "
                  f"grads {b['grads']:,.0f} (off-rank only) "
                  f"| {b['allreduce']:,.0f} |")
            xchg = npj.get("config", {}).get("exchange")
        if trj:
            s = trj["wire_bytes_per_step_sent_all_ranks"]
            print(f"| TorchRec | {s['total']:,.0f} | {s['total'] / R:,.0f} | keys {s['keys']:,.0f}, lengths "
                  f"{s['lengths']:,.0f}, splits {s['meta']:,.0f}, pooled {s['pooled_fwd']:,.0f}, "
                  f"pooled grads {s['pooled_grad_bwd']:,.0f} (off-rank only) | payload "
                  f"{trj['dense_param_bytes']:,.0f} a rank (DDP; wire not counted) |")
        print()
        if npj and xchg is not None:
            share = npj.get("exchange_pooled_share")
            print(f"nestpipe's embedding exchange: `--exchange {xchg}`"
                  + (f", {100 * share:.0f}% of its remote segments sent pooled "
                     f"({npj.get('exchange_segments')} segments)" if share is not None else "")
                  + ".\n")
        if trj:
            m = trj["wire_bytes_per_step_rank0"]
            chk = trj["wire_check_first_step"]
            same = all(c["counted"] == c["computed"] for c in chk)
            print(f"TorchRec, rank 0's own batch through the exchange (its keys and lengths "
                  f"out, its pooled vectors in, their gradients out; off-rank only): "
                  f"**{m['total']:,.0f} bytes a step** (keys {m['keys']:,.0f}, lengths "
                  f"{m['lengths']:,.0f}, pooled {m['pooled_fwd']:,.0f}, pooled grads "
                  f"{m['pooled_grad_bwd']:,.0f}); tables per rank {trj['tables_per_rank']}. "
                  f"Checked against the bytes its all_to_all_single calls sent in one step: "
                  + ("equal on every rank." if same else
                     "**differ**: " + "; ".join(f"rank {i}: counted {c['counted']}, computed "
                                                f"{c['computed']}" for i, c in enumerate(chk)))
                  + "\n")
if summary:
    print("## Summary\n")
    print("| keys a bag | nestpipe samples/s | TorchRec best samples/s | nestpipe / TorchRec |")
    print("|---:|---:|---:|---:|")
    for k, a, b, x in summary:
        print(f"| {k} | {a:.0f} | {b:.0f} | {x:.2f}x |")
    print()
PYEOF
  machine_section
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT" # a report that failed halfway never replaces a whole one
log "wrote $OUT"
