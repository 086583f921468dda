#!/usr/bin/env bash
# `nestpipe route-stats --ranks R` computes, in one process, the bytes R ranks exchange:
# they must equal (not approach) the bytes_exchanged that R real ranks count in their
# metrics, for R = 2, 3, 4, rows and pooled sums, contiguous and clustered windows, row-
# and table-wise sharding, a sequence feature with its negatives; per rank, they must equal what each rank's exchange tasks
# record in the trace. Bad arguments are refused with one line.
# usage: test_route_stats.sh PATH/TO/nestpipe
set -u
NP=$1
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
  python3 - "$W/t.json" "$W/rs.json" <<'PY' >"$W/py" 2>&1 && ok "$name: per rank" || bad "$name: per rank: $(cat "$W/py")"
import json, sys
t = json.load(open(sys.argv[1]))
rs = json.load(open(sys.argv[2]))
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
PY
}

check "R=2 sequential" 2 --pipeline sequential
check "R=3 nestpipe, hot 3, pooled where cheaper" 3 --pipeline nestpipe --hot 3
check "R=4 fwp, clustered windows, hot 2" 4 --pipeline fwp --windows 3 --cluster keys --hot 2
check "R=4 table-wise, exchange pooled" 4 --pipeline fwp --shard table --exchange pooled --hot 2
check "R=3 dbp, rows" 3 --pipeline dbp --exchange rows --hot 2
check "R=3 nestpipe, a sequence with negatives as rows, the bags pooled" 3 --pipeline nestpipe \
  --seq-len 12 --seq-negatives 4 --hot 3

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
