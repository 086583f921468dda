#!/usr/bin/env bash
# The embedding exchange's form (docs/pipeline.md "Rows or pooled sums"), over a link, at
# the shape of issue 27: 2 ranks (--ranks), 26 tables of 200k rows, dim 64, batch 4096, Zipf 1.05,
# 16 latent groups, W = 8 windows, key-centric clustering; 4 keys a bag and 1 key a bag.
# For each form (--exchange rows; auto; auto with --shard table, where pooled is
# TorchRec's exchange) it runs, alternating, round after round:
#   - sequential without the link limit: T_cpu, the pipeline-free run's CPU time a step
#     (MPI over shared memory, not paced);
#   - sequential over the link: T_seq; T_wire = T_seq - T_cpu;
#   - nestpipe over the link;
# and reports samples/s (medians), bytes on the wire a step (both ranks: keys, rows,
# gradients, all-reduce), the ideal T_seq / max(T_cpu, T_wire) and nestpipe's share of it.
# The link: `tc` (a network namespace whose loopback is shaped by `tc tbf`, MPI over TCP
# on it; needs root) or `emulated` (shared memory paced by NP_LINK_GBIT, runtime/comm/mpi.c).
# Writes bench/results/<date>-exchange-<link>-R<ranks>-W<windows>.md.
#
#   bash bench/exchange.sh [--link tc|emulated] [--rate 2gbit] [--repeats 3] [--steps 8]
#                          [--hot "4 1"] [--windows 8] [--forms "rows auto table"] [--ranks 2]
#                          [--quick]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# bench/lib.sh for machine_facts and machine_section only: no PyTorch to find or install
BENCH_TORCH=system
# shellcheck source=bench/lib.sh
source bench/lib.sh 2>/dev/null
LINK=tc RATE=2gbit REPEATS=3 STEPS=8 HOTS="4 1" WIN=8 FORMS="rows auto table" QUICK=0 RANKS=2
while [[ $# -gt 0 ]]; do
  case "$1" in
  --link) LINK=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --steps) STEPS=$2; shift 2 ;;
  --hot) HOTS=$2; shift 2 ;;
  --windows) WIN=$2; shift 2 ;;
  --forms) FORMS=$2; shift 2 ;;
  --ranks) RANKS=$2; shift 2 ;;
  --quick) QUICK=1; shift ;;
  *) echo "exchange.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
NP=$(realpath "${NESTPIPE:-build/nestpipe}")
[[ -x $NP ]] || { echo "exchange.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
[[ $REPEATS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ ]] ||
  { echo "exchange.sh: --repeats and --steps must be whole numbers >= 1" >&2; exit 2; }
[[ $RANKS =~ ^[2-9]$ ]] || { echo "exchange.sh: --ranks must be 2 to 9, not '$RANKS'" >&2; exit 2; }
for f in $FORMS; do
  [[ $f == rows || $f == auto || $f == pooled || $f == table ]] ||
    { echo "exchange.sh: --forms takes rows, auto, pooled and table, not '$f'" >&2; exit 2; }
done
case $LINK in
tc) [[ $(id -u) == 0 ]] || { echo "exchange.sh: --link tc needs root (ip netns, tc)" >&2; exit 2; } ;;
emulated)
  if [[ ${RATE,,} =~ ^([0-9]+([.][0-9]+)?)gbit$ ]]; then GBIT=${BASH_REMATCH[1]}
  elif [[ ${RATE,,} =~ ^([0-9]+([.][0-9]+)?)mbit$ ]]; then GBIT=$(awk "BEGIN {print ${BASH_REMATCH[1]} / 1000}")
  else echo "exchange.sh: --rate '$RATE' is not NNgbit or NNmbit" >&2; exit 2; fi ;;
*) echo "exchange.sh: --link must be tc or emulated, not '$LINK'" >&2; exit 2 ;;
esac
BATCH=4096 ROWS=200000
if [[ $QUICK == 1 ]]; then BATCH=1024 ROWS=20000 REPEATS=1 STEPS=3; fi
shape() { # HOT: the shape's flags
  echo --tables 26 --rows $ROWS --dim 64 --zipf 1.05 --hot "$1" --groups 16 \
    --bottom 13-512-256-64 --top 1024-512-256-1 --batch $BATCH --chunks 1 --cluster keys \
    --windows "$WIN" --eval-samples 4096 --quiet
}
W=$(mktemp -d /tmp/np_exchange_XXXXXX)
NS=np_exchange_$$
cleanup() {
  if [[ $LINK == tc ]]; then ip netns del "$NS" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
if [[ $LINK == tc ]]; then tc_link_up "$NS" "$RATE"; fi # bench/fwp.sh's link
export STARPU_SILENT=1 STARPU_HOME=$W/starpu OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

launch() { # LIMIT(0|1) ARGS...: one run of RANKS ranks, over the link (1) or shared memory
  # unpaced (0)
  local limit=$1
  shift
  if [[ $limit == 0 ]]; then
    timeout 900 mpirun --allow-run-as-root --oversubscribe -np "$RANKS" --mca btl self,vader \
      -x STARPU_SILENT -x STARPU_HOME "$NP" train "$@"
  elif [[ $LINK == tc ]]; then
    timeout 900 ip netns exec "$NS" mpirun --allow-run-as-root --oversubscribe -np "$RANKS" \
      --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      -x STARPU_SILENT -x STARPU_HOME "$NP" train "$@"
  else
    NP_LINK_GBIT=$GBIT timeout 900 mpirun --allow-run-as-root --oversubscribe -np "$RANKS" \
      --mca btl self,vader -x STARPU_SILENT -x STARPU_HOME -x NP_LINK_GBIT "$NP" train "$@"
  fi
}
form_flags() { # FORM: its flags
  case $1 in
  table) echo --shard table --exchange auto ;;
  *) echo --shard row --exchange "$1" ;;
  esac
}

RES=$W/res.tsv
: >"$RES"
for ((k = 1; k <= REPEATS; k++)); do
  for hot in $HOTS; do
    for f in $FORMS; do
      for run in cpu seq nestpipe; do
        limit=1 pipe=$run
        [[ $run == cpu ]] && limit=0 pipe=sequential
        [[ $run == seq ]] && pipe=sequential
        echo "exchange.sh: $(date +%T) round $k/$REPEATS hot $hot $f $run" >&2
        rm -f "$W/m.json"
        # shellcheck disable=SC2046 # the flags are words
        launch "$limit" $(shape "$hot") $(form_flags "$f") --pipeline "$pipe" --steps "$STEPS" \
          --metrics-json "$W/m.json" 2>"$W/err" >/dev/null ||
          { echo "exchange.sh: run failed: $(tail -n 3 "$W/err")" >&2; exit 1; }
        /usr/bin/python3 -c "import json,sys
m = json.load(open(sys.argv[1])); b = m['bytes_exchanged']
print('\t'.join(str(x) for x in (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], m['samples_per_s'],
      b['keys'] / m['steps'], b['rows'] / m['steps'], b['grads'] / m['steps'], b['allreduce'] / m['steps'],
      m['exchange_pooled_share'], m['eval_auc'])))" "$W/m.json" "$k" "$hot" "$f" "$run" >>"$RES"
      done
    done
  done
done

machine_facts
NPROC=$(nproc) TORCH_LINES=() TORCH_MISSING="not part of this bench (bench/torchrec.sh)"
OUT=bench/results/$(date +%Y-%m-%d)-exchange-$LINK-R$RANKS-W$WIN.md
[[ $QUICK == 1 ]] && OUT=${OUT%.md}-quick.md # numbers that mean nothing: never over a result
mkdir -p bench/results
{
  echo "# The embedding exchange's form over a $RATE link ($LINK), $RANKS ranks, W = $WIN"
  echo
  if [[ $LINK == tc ]]; then
    echo "MPI over TCP on the loopback of a network namespace shaped by \`tc tbf rate $RATE\`: both"
    echo "directions share the rate, and the TCP stack's copies run on the two cores that train."
  else
    echo "MPI over shared memory, each data collective paced to its off-rank bytes at $RATE per"
    echo "rank and direction (\`NP_LINK_GBIT\`): a NIC that moves the bytes without these cores."
  fi
  echo
  echo "Shape: \`$(shape H) \` with H keys a bag; $STEPS steps a run; $REPEATS alternating rounds"
  echo "(every setting once a round). \`bash bench/exchange.sh --link $LINK --rate $RATE --repeats $REPEATS --steps $STEPS --windows $WIN --ranks $RANKS --hot \"$HOTS\" --forms \"$FORMS\"\`."
  echo
  machine_section
  echo
  BATCH=$BATCH /usr/bin/python3 - "$RES" <<'EOF'
import os, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
batch = int(os.environ["BATCH"])
forms = {"rows": "rows (`--exchange rows`)", "auto": "auto (`--exchange auto`)",
         "pooled": "pooled (`--exchange pooled`)", "table": "auto, `--shard table`"}
med = lambda xs: statistics.median(xs)
print("T_cpu: the step of sequential without the link limit; T_seq: with it; T_wire = T_seq - "
      "T_cpu; ideal = T_seq / max(T_cpu, T_wire); share = (nestpipe / sequential) / ideal. "
      "Bytes a step: sent to other ranks, all ranks together (keys, rows, gradients, "
      "dense all-reduce). samples/s: medians (all runs listed).\n")
print("| keys a bag | form | pooled share | MB/step: keys | rows | grads | all-reduce | total | sequential, no limit | sequential | nestpipe | T_cpu ms | T_seq ms | T_wire ms | ideal | nestpipe vs seq | share of ideal | eval AUC |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
hots = []
for r in rows:
    if r[1] not in hots: hots.append(r[1])
order = []
for r in rows:
    if r[2] not in order: order.append(r[2])
best = {}
for h in hots:
    for f in order:
        sel = lambda run: [r for r in rows if r[1] == h and r[2] == f and r[3] == run]
        sps = {run: [float(r[4]) for r in sel(run)] for run in ("cpu", "seq", "nestpipe")}
        last = sel("seq")[-1]
        mb = [float(last[i]) / 1e6 for i in (5, 6, 7, 8)]
        tcpu = batch / med(sps["cpu"]) * 1e3
        tseq = batch / med(sps["seq"]) * 1e3
        twire = max(tseq - tcpu, 0.0)
        ideal = tseq / max(tcpu, twire)
        sp = med(sps["nestpipe"]) / med(sps["seq"])
        best[(h, f)] = med(sps["nestpipe"])
        runs = lambda run: "%.0f (%s)" % (med(sps[run]), " ".join("%.0f" % x for x in sps[run]))
        print("| %s | %s | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %.0f%% | %.4f |" % (
            h, forms[f], float(last[9]), *mb, sum(mb), runs("cpu"), runs("seq"), runs("nestpipe"),
            tcpu, tseq, twire, ideal, sp, 100 * sp / ideal, float(sel("nestpipe")[-1][10])))
print()
for h in hots:
    if (h, "rows") in best:
        for f in order:
            if f != "rows":
                print("- %s keys a bag: nestpipe with %s at **%.2fx** nestpipe with rows." % (
                    h, forms[f], best[(h, f)] / best[(h, "rows")]))
EOF
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT" # a report that failed halfway never replaces a whole one
echo "exchange.sh: wrote $OUT" >&2
