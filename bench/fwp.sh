#!/usr/bin/env bash
# Frozen-Window Pipelining benchmark: 2 ranks over a bandwidth-limited link on this machine
# (a network namespace whose loopback is shaped by `tc qdisc ... tbf rate 2gbit`, MPI over
# TCP on it), all measured in this one run:
# - the ablation table: sequential, dbp, fwp, nestpipe, async at W windows, and the split
#   row exchange of the batch boundary toggled against each mode's default (dbp-whole: dbp
#   with --split-rows off; nestpipe-split: nestpipe with --split-rows on) (samples/s:
#   medians of untraced runs; exposed lookup and exchange: from a traced run of each, first
#   batches left out; eval AUC);
# - the ideal speedup T_seq / max(T_cpu_work, T_wire) from the sequential trace, per W;
# - exchanged row bytes per step with --cluster keys and --cluster none;
# - SVG timelines of sequential and nestpipe;
# - the split row exchange at one window (dbp's default shape): dbp with --split-rows on
#   and off, alternating, --split-repeats runs each (--split-only: this part alone, written
#   to bench/results/<date>-fwp-split.md).
# Writes bench/results/<date>-fwp.md (+ .svg). Needs root (ip netns, tc). See bench/README.md.
# --link emulated replaces the shaped TCP loopback by MPI over shared memory paced by
# NP_LINK_GBIT (runtime/comm/mpi.c): a link whose NIC moves the bytes without this host's cores
# (bench/README.md "An emulated link"); it writes <date>-fwp-emulated.md and needs no root.
#
#   bash bench/fwp.sh [--steps S] [--repeats R] [--windows "4 8"] [--rate 2gbit] [--quick]
#                     [--split-repeats N] [--split-only] [--link tc|emulated]
# (the committed results: the defaults)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STEPS=10 REPEATS=3 WINDOWS="4 8" RATE=2gbit QUICK=0 SPLIT_REPEATS=4 SPLIT_ONLY=0 LINK=tc
while [[ $# -gt 0 ]]; do
  case "$1" in
  --steps) STEPS=$2; shift 2 ;;
  --repeats) REPEATS=$2; shift 2 ;;
  --windows) WINDOWS=$2; shift 2 ;;
  --rate) RATE=$2; shift 2 ;;
  --quick) QUICK=1; shift ;;
  --split-repeats) SPLIT_REPEATS=$2; shift 2 ;;
  --split-only) SPLIT_ONLY=1; shift ;;
  --link) LINK=$2; shift 2 ;;
  *) echo "fwp.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
NP=$(realpath "${NESTPIPE:-build/nestpipe}")
[[ -x $NP ]] || { echo "fwp.sh: $NP not found; build first: bash .ci/build" >&2; exit 2; }
case $LINK in
tc) [[ $(id -u) == 0 ]] || { echo "fwp.sh: needs root for ip netns and tc" >&2; exit 2; } ;;
emulated) # the rate in Gbit/s for NP_LINK_GBIT: 2gbit -> 2, 500mbit -> 0.5
  if [[ ${RATE,,} =~ ^([0-9]+([.][0-9]+)?)gbit$ ]]; then GBIT=${BASH_REMATCH[1]}
  elif [[ ${RATE,,} =~ ^([0-9]+([.][0-9]+)?)mbit$ ]]; then GBIT=$(awk "BEGIN {print ${BASH_REMATCH[1]} / 1000}")
  else echo "fwp.sh: --rate '$RATE' is not NNgbit or NNmbit" >&2; exit 2; fi ;;
*) echo "fwp.sh: --link must be tc or emulated, not '$LINK'" >&2; exit 2 ;;
esac
# lookup- and exchange-heavy: 26 tables, dim 64, Zipf 1.05, 4 keys a bag on average, 16
# latent groups correlating keys across tables (what clustering can exploit). The dense
# part is sized so that, in sequential, the CPU work is about the time on the 2 Gbit/s wire.
SHAPE=(--tables 26 --rows 50000 --dim 64 --zipf 1.05 --hot 4 --groups 16
  --bottom 13-512-256-64 --top 1024-512-256-1 --batch 2048 --eval-samples 4096 --chunks 1
  --quiet)
TRACE_STEPS=8 WARM=3
if [[ $QUICK == 1 ]]; then
  SHAPE=(--tables 26 --rows 20000 --dim 64 --zipf 1.05 --hot 4 --groups 16
    --bottom 13-128-64 --top 256-128-1 --batch 2048 --eval-samples 2048 --chunks 1 --quiet)
  STEPS=5 REPEATS=1 TRACE_STEPS=5 WARM=2 WINDOWS=4 SPLIT_REPEATS=1
fi
[[ $SPLIT_REPEATS =~ ^[0-9]+$ ]] || { echo "fwp.sh: --split-repeats must be a whole number" >&2; exit 2; }
if [[ $SPLIT_ONLY == 1 ]]; then
  WINDOWS=""
  ((SPLIT_REPEATS > 0)) || { echo "fwp.sh: --split-only needs --split-repeats >= 1" >&2; exit 2; }
fi
W=$(mktemp -d /tmp/np_fwp_XXXXXX)
NS=np_fwp_$$
cleanup() {
  if [[ $LINK == tc ]]; then ip netns del "$NS" 2>/dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT
if [[ $LINK == tc ]]; then
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
# the queue must hold the two ranks' bursts: loopback segments are 64 KB, and with the
# 5 ms queue first tried (about 19 segments) 8% of them were dropped, each drop costing a
# TCP retransmission timeout (200 ms, backing off to minutes: runs stalled for 6 minutes)
ip netns exec "$NS" tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 100ms
fi
STAMP=$(date +%Y-%m-%d)
TAG=fwp
[[ $LINK == emulated ]] && TAG=fwp-emulated
OUT=bench/results/$STAMP-$TAG.md
[[ $SPLIT_ONLY == 1 ]] && OUT=bench/results/$STAMP-$TAG-split.md
mkdir -p bench/results
export STARPU_SILENT=1 STARPU_HOME=$W/starpu OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

launch() { # ARGS...: one 2-rank run: MPI over TCP on the namespace's shaped lo, or
  # over shared memory paced by NP_LINK_GBIT
  if [[ $LINK == tc ]]; then
    timeout 600 ip netns exec "$NS" mpirun --allow-run-as-root --oversubscribe -np 2 \
      --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      -x STARPU_SILENT -x STARPU_HOME "$NP" train "${SHAPE[@]}" "$@"
  else
    NP_LINK_GBIT=$GBIT timeout 600 mpirun --allow-run-as-root --oversubscribe -np 2 \
      --mca btl self,vader -x STARPU_SILENT -x STARPU_HOME -x NP_LINK_GBIT \
      "$NP" train "${SHAPE[@]}" "$@"
  fi
}
jget() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d' + sys.argv[2]))" "$@"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

RES=$W/res.tsv
: >"$RES" >"$W/dense.tsv" >"$W/none.tsv" >"$W/split.tsv"
NT=$((TRACE_STEPS - WARM))
for win in $WINDOWS; do
  for p in sequential dbp dbp-whole fwp nestpipe nestpipe-split async; do
    case $p in # the mode, and --split-rows (auto: the mode's default)
    dbp-whole) pipe=dbp early=off ;;
    nestpipe-split) pipe=nestpipe early=on ;;
    *) pipe=$p early=auto ;;
    esac
    rates=""
    for ((k = 1; k <= REPEATS; k++)); do
      echo "fwp.sh: $(date +%T) W=$win $p run $k/$REPEATS" >&2
      launch --windows "$win" --pipeline "$pipe" --split-rows "$early" --steps "$STEPS" \
        --metrics-json "$W/m.json" \
        2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
      rates+="$(jget "$W/m.json" "['samples_per_s']") "
    done
    auc=$(jget "$W/m.json" "['eval_auc']")
    rowbytes=$(jget "$W/m.json" "['bytes_exchanged']['rows'] // $STEPS")
    echo "fwp.sh: $(date +%T) W=$win $p traced run" >&2
    launch --windows "$win" --pipeline "$pipe" --steps "$TRACE_STEPS" --trace "$W/t.json" \
      2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
    "$NP" trace report "$W/t.json" --json --from-batch "$WARM" >"$W/rep.json"
    # per rank and step: the report sums over the ranks
    o="['overall']"
    lookup=$(jget "$W/rep.json" "${o}['lookup_us'] / 2 / $NT / 1e3")
    lookup_x=$(jget "$W/rep.json" "${o}['lookup_exposed_us'] / 2 / $NT / 1e3")
    wire=$(jget "$W/rep.json" "${o}['exchange_us'] / 2 / $NT / 1e3")
    wire_x=$(jget "$W/rep.json" "${o}['exchange_exposed_us'] / 2 / $NT / 1e3")
    ratio=$(jget "$W/rep.json" "${o}['exchange_exposed_ratio']")
    # the windows' All2All alone (row and gradient exchanges, no dense all-reduce)
    a2a=$(/usr/bin/python3 -c "import json,sys; k=json.load(open(sys.argv[1]))['overall']['kinds']
x=('exchange_emb', 'exchange_grad'); print(sum(k[i]['exposed_us'] for i in x) / sum(k[i]['union_us'] for i in x))" "$W/rep.json")
    ar=$(jget "$W/rep.json" "${o}['kinds']['allreduce']['union_us'] / 2 / $NT / 1e3")
    # dense compute: every compute kind (the layers, pooling and the loss: fwd and bwd before
    # the node-kind table split pooling and the loss into kinds of their own)
    dense=$(/usr/bin/python3 -c "import json,sys; k=json.load(open(sys.argv[1]))['overall']['kinds']
print(sum(k[i]['union_us'] for i in ('pool_fwd', 'fwd', 'loss_fwd', 'loss_bwd', 'bwd', 'pool_bwd') if i in k) / 2 / $NT / 1e3)" "$W/rep.json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$win" "$p" \
      "$(echo "$rates" | median)" "$rates" "$auc" "$rowbytes" "$lookup" "$lookup_x" "$wire" \
      "$wire_x" "$ratio" "$a2a" "$ar" >>"$RES"
    # all CPU work per rank and step, per core the rank has: every task's time but the
    # collectives' (the report's own split: key, row and gradient exchanges, all-reduce),
    # the driver's batch generation included
    cpu=$(/usr/bin/python3 -c "import json,sys,os
o = json.load(open(sys.argv[1]))['overall']
us = sum(k['total_us'] for k in o['kinds'].values()) - o['collective_us']
print(us / 2 / $NT / 1e3 / (len(os.sched_getaffinity(0)) / 2))" "$W/rep.json")
    printf '%s\t%s\t%s\t%s\n' "$win" "$p" "$dense" "$cpu" >>"$W/dense.tsv"
    if [[ $win == "${WINDOWS%% *}" && ($p == sequential || $p == nestpipe) ]]; then
      "$NP" trace svg "$W/t.json" "bench/results/$STAMP-$TAG-W$win-$p.svg"
    fi
  done
  echo "fwp.sh: W=$win cluster none" >&2
  launch --windows "$win" --cluster none --steps "$STEPS" --metrics-json "$W/m.json" \
    2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
  printf '%s\t%s\n' "$win" "$(jget "$W/m.json" "['bytes_exchanged']['rows'] // $STEPS")" >>"$W/none.tsv"
done

# the split row exchange at one window, the two settings alternating
for ((k = 1; k <= SPLIT_REPEATS; k++)); do
  for early in 1 0; do
    echo "fwp.sh: $(date +%T) W=1 dbp --split-rows $early run $k/$SPLIT_REPEATS" >&2
    launch --windows 1 --pipeline dbp --split-rows "$early" --steps "$STEPS" \
      --metrics-json "$W/m.json" 2>"$W/err" || { echo "failed: $(tail -n 2 "$W/err")" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$early" "$(jget "$W/m.json" "['samples_per_s']")" \
      "$(jget "$W/m.json" "['eval_auc']")" >>"$W/split.tsv"
  done
done

LINK=$LINK RATE=$RATE SHAPE_TEXT="${SHAPE[*]}" /usr/bin/python3 - "$RES" "$W/dense.tsv" "$W/none.tsv" "$W/split.tsv" >"$OUT" <<'EOF'
import sys, os, platform, subprocess
res = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
dense = {(r[0], r[1]): float(r[2]) for r in (l.split("\t") for l in open(sys.argv[2]))}
cpuall = {(r[0], r[1]): float(r[3]) for r in (l.split("\t") for l in open(sys.argv[2]))}
emulated = os.environ.get("LINK") == "emulated"
none = {r[0]: int(r[1]) for r in (l.split("\t") for l in open(sys.argv[3]))}
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
flags = open("/proc/cpuinfo").read().split("flags", 1)[-1].split("\n", 1)[0].split()
isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
cpu += " (%s)" % isa
rate = os.environ.get("RATE", "2gbit")
print("# FWP benchmark: 2 ranks over a %s link%s\n" % (rate, " (emulated)" if emulated else ""))
if emulated:
    link = ("MPI runs over shared memory, and every data collective is paced to its bytes at "
            "%s per rank and direction (`NP_LINK_GBIT`, runtime/comm/mpi.c): a link whose NIC moves "
            "the bytes without this machine's cores (bench/README.md \"An emulated link\")" % rate)
else:
    link = ("MPI runs over TCP on the loopback of a network namespace shaped with `tc tbf` "
            "(see bench/fwp.sh): both directions share the %s, and the TCP stack's copies run "
            "on the same two cores as the training" % rate)
print("Machine: %s, %d cores, %s. Both ranks share this machine; %s." %
      (cpu, os.cpu_count(), platform.platform(), link))
print("\nShape: `%s`.\n" % " ".join(os.environ.get("SHAPE_TEXT", "").split()))
if res:
    print("samples/s: median of the untraced runs (all runs listed). Per rank and step, from a "
          "traced run with the first batches left out: lookup = routing (with the keys' All2All) + retrieve + sync, "
          "exchange = row/gradient exchanges + dense all-reduce; exposed = not overlapped by "
          "dense compute. Ratio = exposed exchange / exchange; All2All ratio: the same for the "
          "row and gradient exchanges alone; all-reduce ms: the dense all-reduce (part of "
          "exchange), which stays at the end of each batch in every mode. dbp-whole and "
          "nestpipe-split toggle the split row exchange of the batch boundary against the "
          "mode's default (docs/pipeline.md \"The batch boundary\"): dbp with --split-rows off "
          "(whole row exchanges), nestpipe with --split-rows on.\n")
    print("| W | pipeline | samples/s | vs sequential | runs | lookup ms | exposed | exchange ms | exposed | exposed ratio | All2All ratio | all-reduce ms | row bytes/step | eval AUC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    seq = {r[0]: float(r[2]) for r in res if r[1] == "sequential"}
    for r in res:
        w, p, med, runs, auc, rb, lk, lkx, wi, wix, ratio, a2a, ar = r
        print("| %s | %s | %.0f | %.2fx | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %s | %.4f |" % (
            w, p, float(med), float(med) / seq[w], " ".join("%.0f" % float(x) for x in runs.split()),
            float(lk), float(lkx), float(wi), float(wix), float(ratio), float(a2a), float(ar), rb,
            float(auc)))
    print("\n## Ideal speedup from the sequential trace\n")
    print("T_seq = batch / samples/s; T_cpu = lookup + dense compute (fwd + bwd union); T_wire = "
          "exchange time; ideal = T_seq / max(T_cpu, T_wire). T_all = all CPU work of a rank a "
          "step (every task but the wire's, the driver's batch generation, the updates and the "
          "write-back included) over the cores a rank has (%d cores / 2 ranks), an estimate from "
          "task wall times: the work the first ideal leaves out; ideal_all = T_seq / "
          "max(T_all, T_wire).\n" % len(os.sched_getaffinity(0)))
    print("| W | T_seq ms | T_cpu ms | T_all ms | T_wire ms | ideal | nestpipe | % of ideal | ideal_all | % of ideal_all | fwp | dbp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    batch = 2048
    for w in seq:
        row = {r[1]: r for r in res if r[0] == w}
        s = row["sequential"]
        tseq = batch / float(s[2]) * 1e3
        tcpu = float(s[6]) + dense[(w, "sequential")]
        twire = float(s[8])
        ideal = tseq / max(tcpu, twire)
        tall = cpuall[(w, "sequential")]
        ideal_all = tseq / max(tall, twire)
        sp = lambda p: float(row[p][2]) / float(s[2])
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.0f%% | %.2fx | %.0f%% | %.2fx | %.2fx |" % (
            w, tseq, tcpu, tall, twire, ideal, sp("nestpipe"), 100 * sp("nestpipe") / ideal,
            ideal_all, 100 * sp("nestpipe") / ideal_all, sp("fwp"), sp("dbp")))
    print("\n## Clustering: exchanged row bytes per step (rank 0, sequential)\n")
    print("| W | --cluster none | --cluster keys | cut |")
    print("|---|---|---|---|")
    for w in seq:
        k = int([r for r in res if r[0] == w and r[1] == "sequential"][0][5])
        print("| %s | %d | %d | %.1f%% |" % (w, none[w], k, 100 * (1 - k / none[w])))
split = [l.rstrip("\n").split("\t") for l in open(sys.argv[4])]
if split:
    med = lambda xs: sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
    on = [float(r[1]) for r in split if r[0] == "1"]
    off = [float(r[1]) for r in split if r[0] == "0"]
    print("\n## The split row exchange at one window (dbp's default)\n")
    print("`--pipeline dbp --windows 1`, %d runs with --split-rows on (split: batch t+1's "
          "fresh rows under batch t's compute, the shared ones after the sync) and %d with "
          "--split-rows off (whole row exchanges), alternating; samples/s.\n" % (len(on), len(off)))
    print("| row exchange | samples/s (median) | runs | eval AUC |")
    print("|---|---|---|---|")
    for name, xs, k in (("split", on, "1"), ("whole", off, "0")):
        aucs = sorted(set("%.4f" % float(r[2]) for r in split if r[0] == k))
        print("| %s | %.0f | %s | %s |" % (name, med(xs), " ".join("%.0f" % x for x in xs), " ".join(aucs)))
    print("\nsplit / whole: **%.2fx**." % (med(on) / med(off)))
EOF
echo "fwp.sh: wrote $OUT" >&2
