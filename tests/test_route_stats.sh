#!/usr/bin/env bash
# `nestpipe route-stats --ranks R` computes, in one process, the bytes R ranks exchange:
# they must equal (not approach) the bytes_exchanged that R real ranks count in their
# metrics, for R = 2, 3, 4, rows and pooled sums, contiguous and clustered windows, row-
# and table-wise sharding, a sequence feature with its negatives; per rank, they must equal what each rank's exchange tasks
# record in the trace. Bad arguments are refused with one line. With "many", only the same
# checks past 64 ranks (65 and 96 real ranks, a batch of 2 samples a rank: the extended tier).
# usage: test_route_stats.sh PATH/TO/nestpipe [many]
set -u
NP=$1 MANY=${2:-}
W=$(mktemp -d /tmp/np_route_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME)
# dbp's split rows add a bitmap to the row exchange that route-stats does not count
SM=(--rows 5000,700,1200,333,50,9000 --tables 6 --bottom 13-16-16 --top 16-8-1
  --batch 96 --steps 6 --quiet --chunks 2 --split-rows off)

# the figures of a route-stats --json and of a metrics file, as "keys rows grads"
bytes_of() { python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['bytes_exchanged']; print(b['keys'], b['rows'], b['grads'])" "$1"; }

check() { # NAME R [flags...]
  local name=$1 R=$2
  shift 2
  if ! timeout 180 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "$@" \
    --metrics-json "$W/m.json" --trace "$W/t.json" >"$W/out" 2>"$W/err"; then
    bad "$name: train exit $?: $(tail -n 2 "$W/err")"
    return
  fi
  if ! "$NP" route-stats --ranks "$R" "${SM[@]}" "$@" --json >"$W/rs.json" 2>"$W/err"; then
    bad "$name: route-stats: $(cat "$W/err")"
    return
  fi
  local real sim
  real=$(bytes_of "$W/m.json") sim=$(bytes_of "$W/rs.json")
  if [[ $real == "$sim" && $real != "0 0 0" ]]; then ok "$name: keys rows grads $sim"; else bad "$name: ran $real, route-stats $sim"; fi
  # where pooled sums are expected, some segments went pooled (else the case tests rows only)
  if [[ $name == *pooled* ]] && ! grep -q '"pooled": [1-9]' "$W/rs.json"; then bad "$name: no segment pooled"; fi
  # per rank: the trace's exchange tasks against route-stats' per-rank figures
  python3 - "$W/t.json" "$W/rs.json" "$W/m.json" "$R" "$name" "$*" <<'PY' >"$W/py" 2>&1 && ok "$name: per rank, per peer, counts" || bad "$name: per rank: $(cat "$W/py")"
import collections, json, sys
t = json.load(open(sys.argv[1]))
rs = json.load(open(sys.argv[2]))
m = json.load(open(sys.argv[3]))
R, name = int(sys.argv[4]), sys.argv[5]
kind = {"exchange_keys": "keys_sent", "exchange_emb": "rows_sent", "exchange_grad": "grads_sent"}
got = {}
for e in t["traceEvents"]:
    if e.get("ph") != "X": continue
    k = kind.get(e["args"]["kind"])
    if k: got[(e["pid"], k)] = got.get((e["pid"], k), 0) + e["args"]["bytes"]
for r in rs["per_rank"]:
    for k in kind.values():
        if got.get((r["rank"], k), 0) != r[k]:
            sys.exit("rank %d %s: trace %s, route-stats %s" % (r["rank"], k, got.get((r["rank"], k)), r[k]))
# what each task records (docs/tracing.md "What a task records")
X = [e for e in t["traceEvents"] if e.get("ph") == "X"]
peers, flops, keys = {}, collections.Counter(), collections.Counter()
for e in X:
    a, r = e["args"], e["pid"]
    if a["kind"] in ("exchange_keys", "exchange_emb", "exchange_grad", "allreduce"):
        # its collectives: a split inside its span, and the bytes it sent, peer by peer
        if a.get("colls", 0) < 1 or a["pack_us"] + a["comm_us"] + a["unpack_us"] > e["dur"] + 1 \
                or a["post_us"] + a["pace_us"] > a["comm_us"] + 1e-3:
            sys.exit("rank %d %s batch %d: no split, or one beyond its span: %s" % (r, e["name"], a["batch"], a))
        s, g = a.get("peer_sent"), a.get("peer_recv")
        if not s or len(s) != R or len(g) != R or s[r] or g[r] or sum(s) != a["bytes"]:
            sys.exit("rank %d %s batch %d: peers %s %s against %d bytes" % (r, e["name"], a["batch"], s, g, a["bytes"]))
        # the same task on every rank: the k-th of its name, batch, window, chunk and node in
        # submission order (the ranks submit the same graph)
        key = [r, e["name"], a["batch"], a["window"], a["chunk"], a["node"], a["id"]]
        peers.setdefault(tuple(key[:6]), []).append((a["id"], s, g))
    if a["kind"] in ("fwd", "bwd"):
        flops[(r, a["batch"], a["kind"])] += a.get("flops", 0)
    if a["kind"] == "route":
        if not 0 < a.get("uniq", 0) <= a.get("keys", 0): sys.exit("route without keys >= uniq > 0: %s" % a)
        keys[a["batch"]] += a["keys"]
# what rank r sent to q is what q received from r, task for task
for (r, n, b, w, c, node), tasks in peers.items():
    for k, (_, s, g) in enumerate(sorted(tasks)):
        for q in range(R):
            other = sorted(peers.get((q, n, b, w, c, node), []))
            got = other[k][2][r] if k < len(other) else None
            if q != r and s[q] != got:
                sys.exit("%s batch %d window %d chunk %d: rank %d sent %d to rank %d, which received %s" % (n, b, w, c, r, s[q], q, got))
# the layers' flops: each rank's batch share times the model's flops a sample
fwd, tot = m["dense_flop_per_sample_fwd"], m["dense_flop_per_sample"]
for (r, b, k), f in flops.items():
    want = m["global_batch"] // R * (fwd if k == "fwd" else tot - fwd)
    if f != want: sys.exit("rank %d batch %d %s: flops %s, the model says %s" % (r, b, k, f, want))
if not flops: sys.exit("no layer task")
# the route's keys: the batch's, bags of hot K keys each in [K - K/2, K + K/2] (the
# sequence's lengths vary more)
flags = sys.argv[6].split()
# every data-flow edge, however many a task has (8 chunks x 3 windows: a sum of 24)
ids = {(e["pid"], e["args"]["id"]) for e in X if "id" in e["args"]}
most = max(len(e["args"].get("deps", [])) for e in X)
if any((e["pid"], p) not in ids for e in X for p in e["args"].get("deps", [])):
    sys.exit("an edge to a task the trace does not have")
if "--chunks" in flags and int(flags[flags.index("--chunks") + 1]) >= 8 and most <= 16:
    sys.exit("no task with more than 16 producers: %d" % most)
# every task was submitted, then ready, then started (the profiling clock, to a microsecond)
for e in X:
    a = e["args"]
    if a["kind"] in ("data", "control"): continue
    if not a.get("submit", 0) - 1 <= a.get("ready", -9) <= e["ts"] + 1:
        sys.exit("%s batch %d: submitted %s, ready %s, started %s" % (e["name"], a["batch"], a.get("submit"), a.get("ready"), e["ts"]))
K = int(flags[flags.index("--hot") + 1]) if "--hot" in flags else 1
B = m["global_batch"]
lo, hi = B * 6 * (K - K // 2), B * 6 * (K + K // 2)
if "sequence" not in name and not all(lo <= v <= hi for v in keys.values()) or len(keys) != 6:
    sys.exit("route keys by batch %s, expected %d to %d each" % (dict(keys), lo, hi))
PY
}

if [[ $MANY == many ]]; then
  check "R=65 nestpipe, hot 3, pooled where cheaper" 65 --pipeline nestpipe --hot 3 --batch 130 \
    --windows 2 --chunks 1
  check "R=96 fwp, table-wise, exchange pooled" 96 --pipeline fwp --shard table --exchange pooled \
    --hot 2 --batch 192 --windows 2 --chunks 1
  echo "$pass passed, $failed failed"
  [[ $failed == 0 ]]
  exit
fi
check "R=2 sequential" 2 --pipeline sequential
check "R=3 nestpipe, hot 3, pooled where cheaper" 3 --pipeline nestpipe --hot 3
check "R=4 fwp, clustered windows, hot 2, 8 chunks" 4 --pipeline fwp --windows 3 --cluster keys --hot 2 \
  --chunks 8
check "R=4 table-wise, exchange pooled" 4 --pipeline fwp --shard table --exchange pooled --hot 2
check "R=3 dbp, rows" 3 --pipeline dbp --exchange rows --hot 2
check "R=3 nestpipe, a sequence with negatives as rows, the bags pooled" 3 --pipeline nestpipe \
  --seq-len 12 --seq-negatives 4 --hot 3

# one rank under mpirun: no collectives on the wire, so no control task, split or peers
if timeout 120 "${MPIRUN[@]}" -np 1 "$NP" train "${SM[@]}" --trace "$W/t1.json" >"$W/out" 2>&1; then
  if grep -q '"control"\|"colls"\|"peer_sent"' "$W/t1.json"; then bad "one rank under mpirun records collectives"
  else ok "one rank under mpirun: no control, split or peers"; fi
else bad "one rank under mpirun: $(tail -2 "$W/out")"; fi

# bad input: one line, exit 2
expect_refused() { # NAME PATTERN ARGS...
  local name=$1 pat=$2
  shift 2
  "$NP" route-stats "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [[ $rc == 2 && $(wc -l <"$W/err") == 1 ]] && grep -q -- "$pat" "$W/err"; then ok "refused: $name"; else bad "refused: $name: exit $rc: $(cat "$W/err")"; fi
}
expect_refused "no --ranks" "--ranks N is required" --steps 2
expect_refused "--ranks 0" "--ranks takes a count" --ranks 0
expect_refused "batch not divisible" "not divisible by 7 ranks" --ranks 7 --batch 96 --steps 1
expect_refused "unknown flag" "unknown flag" --ranks 2 --bogus 1
"$NP" generate "$W/small.bin" --samples 150 "${SM[@]:0:6}" >/dev/null 2>&1 || bad "generate small.bin"
expect_refused "too few batches" "the data has 1 batches of 96 samples, not 3" --ranks 2 \
  "${SM[@]:0:6}" --data "bin:$W/small.bin" --batch 96 --steps 3 --eval-every 0

echo "$pass passed, $failed failed"
((failed == 0))
