#!/usr/bin/env bash
# `nestpipe simulate` on a real 2-rank trace (docs/scale.md): it replays the run's own step
# at 2 ranks close to the measured one, SimGrid and the alpha-beta model agree on a flat and
# a two-tier platform (when SimGrid is installed), the projection's step grows with N on a
# slow link, its outputs are written, the step graph of the flags' run projects without a
# trace, and bad input is refused with one line. The replay's
# exact behaviour is checked on hand-made traces by tests/test_scale.c.
# usage: test_simulate.sh PATH/TO/nestpipe
set -u
NP=$1
W=$(mktemp -d /tmp/np_sim_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
export STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
SM=(--rows 5000 --tables 6 --hot 2 --bottom 13-16-16 --top 16-8-1 --batch 256 --quiet --chunks 2
  --pipeline nestpipe --windows 2)
if ! NP_LINK_GBIT=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader \
  -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x NP_LINK_GBIT -x STARPU_HOME \
  "$NP" train "${SM[@]}" --steps 16 --trace "$W/g.json" >"$W/out" 2>"$W/err"; then
  bad "the 2-rank run: $(tail -n 2 "$W/err")"
  echo "$pass passed, $failed failed"
  exit 1
fi
"$NP" trace report "$W/g.json" --from-batch 2 --json >"$W/m.json"
measured=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['overall']['step_us'])" "$W/m.json")
# 1. its own step, replayed at 2 ranks over the same link (the link fact of the trace)
if "$NP" simulate --graph "$W/g.json" --ranks 2 "${SM[@]}" --latency-us 0 --msg-us 0 \
  --model alpha-beta --json >"$W/s.json" 2>"$W/err"; then
  python3 - "$W/s.json" "$measured" <<'PY' >"$W/py" 2>&1 && ok "replay at 2 ranks: $(cat "$W/py")" || bad "replay at 2 ranks: $(cat "$W/py")"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m = float(sys.argv[2])
e = (r["step_us"] - m) / m
print("step %.0f us, measured %.0f us (%+.1f%%)" % (r["step_us"], m, 100 * e))
sys.exit(abs(e) > 0.25)  # 2 ranks on 2 shared cores are noisy: the 5% check is bench/scale.sh's V1
PY
else
  bad "replay at 2 ranks: $(cat "$W/err")"
fi
# 2. on a slow link the step grows with N (more peers, the same bytes a rank: latency)
if "$NP" simulate --graph "$W/g.json" --ranks 2,64 "${SM[@]}" --link-gbit 1 --latency-us 20 \
  --model alpha-beta --json --table "$W/t.md" --svg "$W/e.svg" --replay-trace "$W/r.json" >"$W/s.json" 2>"$W/err"; then
  python3 -c "
import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
sys.exit(not (r[1]['step_us'] > r[0]['step_us'] and 0 < r[1]['efficiency'] < 1))" "$W/s.json" &&
    ok "the step grows from 2 to 64 ranks on a 1 Gbit/s link" || bad "N=64 not slower: $(cat "$W/s.json")"
  grep -q "^| 64 | alpha-beta |" "$W/t.md" && grep -q "<polyline" "$W/e.svg" && ok "--table and --svg written" ||
    bad "--table or --svg"
  "$NP" trace report "$W/r.json" >/dev/null 2>&1 && ok "--replay-trace reads back" || bad "--replay-trace"
  # the replayed timeline keeps none of the recorded run's measured split or bytes by peer
  if grep -q '"colls"\|"peer_sent"\|"ready"' "$W/r.json"; then bad "--replay-trace keeps measured splits"
  elif grep -q '"colls"' "$W/g.json"; then ok "--replay-trace drops the measured split"
  else bad "the graph's trace has no split to drop"; fi
else
  bad "simulate to 64: $(cat "$W/err")"
fi
# 3. SimGrid against alpha-beta: equal on the projection and on a two-tier collective
"$NP" simulate --collective alltoall --bytes 1 --ranks 2 --model simgrid >"$W/probe" 2>&1
probe=$?
if [[ $probe != 0 ]] && grep -q "SimGrid is not installed" "$W/probe"; then
  echo "skip SimGrid (libsimgrid3.32 not installed)"
elif [[ $probe != 0 ]]; then
  bad "SimGrid is installed but failed: $(cat "$W/probe")"
else
  "$NP" simulate --graph "$W/g.json" --ranks 8 "${SM[@]}" --json >"$W/s.json" 2>"$W/err" &&
    python3 -c "
import json,sys
r={x['model']: x['step_us'] for x in map(json.loads, open(sys.argv[1]))}
sys.exit(abs(r['simgrid'] - r['alpha-beta']) > 0.01 * r['alpha-beta'])" "$W/s.json" &&
    ok "SimGrid and alpha-beta agree on the replay at 8 ranks" || bad "SimGrid vs alpha-beta: $(cat "$W/s.json" "$W/err")"
  "$NP" simulate --collective alltoall --bytes 4000000 --ranks 16 --host-ranks 4 --oversub 2 \
    --link-gbit 10 >"$W/c.txt" 2>"$W/err" && # (ASan warns on stderr about SimGrid's contexts)
    awk '$1 == "alltoall" {d = $4 - $5; n++} END {exit !(n == 1 && d < 0.01 * $4 && d > -0.01 * $4)}' "$W/c.txt" &&
    ok "SimGrid and alpha-beta agree on a two-tier All2All" || bad "two tiers: $(cat "$W/c.txt")"
fi
# 4. the step graph without a trace: the train flags' run at 2 ranks, each node's cost from
# the shape; the same efficiency at 2 ranks as itself, less at 64 on a 1 Gbit/s link
if "$NP" simulate --ranks 2,64 "${SM[@]}" --link-gbit 1 --model alpha-beta --json >"$W/s.json" 2>"$W/err"; then
  python3 - "$W/s.json" <<'PY' >"$W/py" 2>&1 && ok "the step graph without a trace: $(cat "$W/py")" || bad "the step graph without a trace: $(cat "$W/py")"
import json, sys
r = {x["N"]: x for x in map(json.loads, open(sys.argv[1]))}
print("step %.0f us at 2, %.0f us at 64" % (r[2]["step_us"], r[64]["step_us"]))
sys.exit(not (r[2]["step_us"] > 0 and r[64]["step_us"] > r[2]["step_us"]))
PY
else
  bad "the step graph without a trace: $(cat "$W/err")"
fi
# 5. bad input: one line, exit 2
refused() { # NAME PATTERN ARGS...
  local name=$1 pat=$2
  shift 2
  "$NP" simulate "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [[ $rc == 2 && $(wc -l <"$W/err") == 1 ]] && grep -q -- "$pat" "$W/err"; then ok "refused: $name"; else bad "refused: $name: exit $rc: $(cat "$W/err")"; fi
}
refused "--workers" "--workers takes" --ranks 4 --workers 0.5
refused "--workers with a trace" "--workers is for the step graph" --graph "$W/g.json" --ranks 4 --workers 2
refused "an odd batch without --graph" "give an even one" --ranks 4 --batch 255
refused "windows that differ" "ran 2 windows, the flags give 4" --graph "$W/g.json" --ranks 4 "${SM[@]}" --windows 4
refused "--a2a" "--a2a takes" --graph "$W/g.json" --ranks 4 --a2a ring
refused "--ranks" "--ranks takes" --graph "$W/g.json" --ranks 4,x
refused "hosts that do not divide" "does not divide" --graph "$W/g.json" --ranks 6 "${SM[@]}" --host-ranks 4
refused "not a trace" "no \"traceEvents\"" --graph "$W/m.json" --ranks 4
echo "$pass passed, $failed failed"
((failed == 0))
