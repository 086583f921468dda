#!/usr/bin/env bash
# MPI tests of `nestpipe train` under mpirun (oversubscribed, sizes kept small for a
# two-core machine): R = 1..4 ranks (and 8 once) match the reference trainer for row- and table-wise
# sharding and both sparse optimizers; repeated runs give the same bytes; tables shrink
# ~1/R per rank; data that ends mid-batch, a killed rank, a failing rank, set-up that fails
# on one rank only, a stalled rank (--rank-timeout) and bad R/batch combinations all end
# cleanly and quickly.
# usage: test_mpi.sh PATH/TO/nestpipe
set -u
NP=$1
W=$(mktemp -d /tmp/np_mpi_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

# one StarPU worker per rank: four ranks share two cores
export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME)
SM=(--rows 1000,700,1200,333,50,900 --tables 6 --hot 2 --bottom 13-16-16 --top 16-8-1
  --batch 48 --steps 30 --quiet --chunks 2)

run_np() { # R OUT.params [flags...]: mpirun with R ranks, 120 s at most
  local R=$1 out=$2
  shift 2
  timeout 120 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" --dump-params "$out" "$@" \
    >"$W/out" 2>"$W/err"
}

for optim in sgd rowwise-adagrad; do
  "$NP" train --engine reference "${SM[@]}" --sparse-optim "$optim" \
    --dump-params "$W/ref_$optim" >/dev/null 2>"$W/err" || bad "reference $optim: $(cat "$W/err")"
  for shard in row table; do
    for R in 1 2 3 4; do
      name="R=$R $shard $optim"
      if ! run_np "$R" "$W/p" --shard "$shard" --sparse-optim "$optim" \
        --metrics-json "$W/m_${R}_$shard.json"; then
        bad "$name: exit $?: $(tail -n 3 "$W/err")"
        continue
      fi
      if "$NP" compare "$W/p" "$W/ref_$optim" --rtol 1e-4 --atol 1e-5 >"$W/cmp"; then
        ok "$name matches the reference (rel 1e-4, abs 1e-5)"
      else
        bad "$name differs from the reference: $(grep -m3 OUT "$W/cmp")"
      fi
      if [[ $R == 3 && $optim == rowwise-adagrad ]]; then
        cp "$W/p" "$W/first"
        run_np 3 "$W/second" --shard "$shard" --sparse-optim "$optim"
        cmp -s "$W/first" "$W/second" && ok "$name: a second run gives the same bytes" \
          || bad "$name: repeated runs differ"
      fi
    done
  done
done

# eight ranks (6 samples each), nestpipe with 2 windows and pooled sums where cheaper:
# the reference's model (65-128 ranks: tests/test_many_ranks.sh, the extended tier)
if run_np 8 "$W/p8" --pipeline nestpipe --windows 2 --chunks 1 --sparse-optim rowwise-adagrad; then
  "$NP" compare "$W/p8" "$W/ref_rowwise-adagrad" --rtol 1e-4 --atol 1e-5 >"$W/cmp" &&
    ok "R=8 nestpipe, 2 windows, auto exchange matches the reference" ||
    bad "R=8 nestpipe differs from the reference: $(grep -m3 OUT "$W/cmp")"
else
  bad "R=8 nestpipe: exit $?: $(tail -n 3 "$W/err")"
fi

# dbp reorders work, never arithmetic: the same bytes as sequential on R ranks, on data
# whose consecutive batches share rows; async (no sync) trains a different model
for optim in sgd rowwise-adagrad; do
  # SGD with the row exchange everywhere, Adagrad with the default form (auto, which pools
  # part of the exchange at 2 keys a bag): both forms through every pipeline
  XF=(--exchange auto)
  [[ $optim == sgd ]] && XF=(--exchange rows)
  for R in 2 4; do
    run_np "$R" "$W/seq" --sparse-optim "$optim" "${XF[@]}" --rows 300 --zipf 1.2 --pipeline sequential &&
      run_np "$R" "$W/dbp" --sparse-optim "$optim" "${XF[@]}" --rows 300 --zipf 1.2 --pipeline dbp \
        --metrics-json "$W/dbp.json" || bad "R=$R dbp run failed: $(tail -n 3 "$W/err")"
    cmp -s "$W/seq" "$W/dbp" && ok "R=$R $optim: dbp gives the bytes of sequential" ||
      bad "R=$R $optim: dbp differs from sequential"
    grep -q '"rows_synced": [1-9]' "$W/dbp.json" && ok "R=$R $optim: dbp synced rows" ||
      bad "R=$R $optim: no rows synced"
    # the split row exchange ran (its bitmaps make the row bytes exceed the gradient
    # bytes, which mirror the whole exchange's rows); --split-rows off sends them whole
    rb=$(sed -n 's/.*"rows": \([0-9]*\).*/\1/p' "$W/dbp.json" | head -n 1)
    gb=$(sed -n 's/.*"grads": \([0-9]*\).*/\1/p' "$W/dbp.json" | head -n 1)
    [[ -n $rb && -n $gb && $rb -gt $gb ]] && ok "R=$R $optim: dbp split its row exchanges" ||
      bad "R=$R $optim: dbp row bytes $rb, gradient bytes $gb: no split exchange"
    # whole row exchanges: both optimizers at 2 ranks, SGD at 4 (the suite's time)
    [[ $R == 2 || $optim == sgd ]] || continue
    run_np "$R" "$W/whole" --sparse-optim "$optim" "${XF[@]}" --rows 300 --zipf 1.2 \
      --pipeline dbp --split-rows off --metrics-json "$W/whole.json" ||
      bad "R=$R --split-rows off dbp run failed: $(tail -n 3 "$W/err")"
    cmp -s "$W/seq" "$W/whole" && ok "R=$R $optim: dbp with whole row exchanges, same bytes" ||
      bad "R=$R $optim: dbp with --split-rows off differs from sequential"
    rb=$(sed -n 's/.*"rows": \([0-9]*\).*/\1/p' "$W/whole.json" | head -n 1)
    gb=$(sed -n 's/.*"grads": \([0-9]*\).*/\1/p' "$W/whole.json" | head -n 1)
    [[ -n $rb && $rb == "$gb" ]] && ok "R=$R $optim: --split-rows off sends rows whole" ||
      bad "R=$R $optim: --split-rows off: row bytes $rb, gradient bytes $gb"
  done
done
# fwp and nestpipe reorder work, never arithmetic: with the same windows and clustering they
# give the bytes of sequential on R ranks, and match the reference
FW=(--rows 300 --zipf 1.2 --groups 3 --windows 4)
for optim in sgd rowwise-adagrad; do
  XF=(--exchange auto) # as for dbp above: SGD with rows, Adagrad with auto
  [[ $optim == sgd ]] && XF=(--exchange rows)
  "$NP" train --engine reference "${SM[@]}" --rows 300 --zipf 1.2 --groups 3 \
    --sparse-optim "$optim" --dump-params "$W/ref_fw" >/dev/null 2>"$W/err" ||
    bad "reference $optim: $(cat "$W/err")"
  for R in 2 4; do
    run_np "$R" "$W/seq" --sparse-optim "$optim" "${XF[@]}" "${FW[@]}" --pipeline sequential ||
      bad "R=$R sequential windows run failed: $(tail -n 3 "$W/err")"
    "$NP" compare "$W/seq" "$W/ref_fw" --rtol 1e-4 --atol 1e-5 >"$W/cmp" &&
      ok "R=$R $optim: 4 windows match the reference" ||
      bad "R=$R $optim: 4 windows differ from the reference: $(grep -m3 OUT "$W/cmp")"
    for p in fwp nestpipe; do
      run_np "$R" "$W/$p" --sparse-optim "$optim" "${XF[@]}" "${FW[@]}" --pipeline "$p" ||
        bad "R=$R $p run failed: $(tail -n 3 "$W/err")"
      cmp -s "$W/seq" "$W/$p" && ok "R=$R $optim: $p gives the bytes of sequential" ||
        bad "R=$R $optim: $p differs from sequential"
    done
    # nestpipe with the split row exchange forced on (two early windows): both optimizers
    # at 2 ranks, SGD at 4
    [[ $R == 2 || $optim == sgd ]] || continue
    run_np "$R" "$W/split" --sparse-optim "$optim" "${XF[@]}" "${FW[@]}" \
      --pipeline nestpipe --split-rows on || bad "R=$R --split-rows on nestpipe failed: $(tail -n 3 "$W/err")"
    cmp -s "$W/seq" "$W/split" && ok "R=$R $optim: nestpipe, split row exchange, same bytes" ||
      bad "R=$R $optim: nestpipe with --split-rows on differs from sequential"
  done
done
# the pooled exchange (docs/pipeline.md "Rows or pooled sums"): a bag's rows summed by
# their owner; 4 keys a bag, so most remote segments are cheaper pooled. Every pipeline gives
# the bytes of sequential with the same --exchange, each matches the reference, pooled
# sends fewer row bytes than rows, and the metrics say which form went
PX=(--rows 300 --zipf 1.2 --groups 3 --windows 4 --hot 4 --steps 12)
"$NP" train --engine reference "${SM[@]}" --rows 300 --zipf 1.2 --groups 3 --hot 4 --steps 12 \
  --dump-params "$W/ref_px" >/dev/null 2>"$W/err" || bad "reference --hot 4: $(cat "$W/err")"
share_of() { /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['exchange_pooled_share'], m['bytes_exchanged']['rows'])" "$1"; }
# (auto through dbp, fwp and nestpipe is the bit-identity loops' Adagrad half above)
for R in 2 4; do
  for x in pooled rows auto; do
    [[ $R == 4 && $x != pooled ]] && continue # auto at 4 ranks: the Adagrad loops above
    run_np "$R" "$W/seq_$x" "${PX[@]}" --exchange "$x" --pipeline sequential \
      --metrics-json "$W/px_$x.json" || bad "R=$R --exchange $x run failed: $(tail -n 3 "$W/err")"
    "$NP" compare "$W/seq_$x" "$W/ref_px" --rtol 1e-4 --atol 1e-5 >"$W/cmp" &&
      ok "R=$R --exchange $x matches the reference" ||
      bad "R=$R --exchange $x differs from the reference: $(grep -m3 OUT "$W/cmp")"
    [[ $x == rows ]] && continue
    for p in dbp nestpipe; do
      [[ $x == auto || ($R == 4 && $p == dbp) ]] && continue
      run_np "$R" "$W/${p}_$x" "${PX[@]}" --exchange "$x" --pipeline "$p" ||
        bad "R=$R --exchange $x $p run failed: $(tail -n 3 "$W/err")"
      cmp -s "$W/seq_$x" "$W/${p}_$x" && ok "R=$R --exchange $x: $p gives the bytes of sequential" ||
        bad "R=$R --exchange $x: $p differs from sequential"
    done
  done
  read -r sp bp < <(share_of "$W/px_pooled.json")
  [[ $sp == 1.0 ]] && ok "R=$R --exchange pooled: every remote segment pooled" ||
    bad "R=$R --exchange pooled: pooled share $sp"
  if [[ $R == 2 ]]; then
    read -r sa ba < <(share_of "$W/px_auto.json")
    /usr/bin/python3 -c "import sys; sys.exit(not 0 < float(sys.argv[1]) <= 1)" "$sa" &&
      ok "R=$R --exchange auto pools $sa of the remote segments" ||
      bad "R=$R --exchange auto: pooled share $sa"
    read -r sr br < <(share_of "$W/px_rows.json")
    [[ $sr == 0 || $sr == 0.0 ]] && ((bp < br && ba <= br)) &&
      ok "R=2 row bytes: pooled $bp, auto $ba < rows $br" ||
      bad "R=2 row bytes: pooled $bp, auto $ba, rows $br (rows share $sr)"
  fi
done

# clustering moves fewer rows than contiguous windows on grouped data
run_np 2 "$W/k" "${FW[@]}" --cluster keys --metrics-json "$W/keys.json" &&
  run_np 2 "$W/n" "${FW[@]}" --cluster none --metrics-json "$W/none.json" ||
  bad "cluster runs failed: $(tail -n 3 "$W/err")"
rows_of() { sed -n 's/.*"rows": \([0-9]*\).*/\1/p' "$1" | head -n 1; }
rk=$(rows_of "$W/keys.json") rn=$(rows_of "$W/none.json")
[[ -n $rk && -n $rn && $rk -lt $rn ]] && ok "clustering sends fewer row bytes ($rk < $rn)" ||
  bad "clustering does not cut row bytes (keys '$rk', none '$rn')"

# async against the sequential run of the same settings (R = 2, SGD), both of which must
# run: a crashed async run must not pass as "different"
if run_np 2 "$W/seq2" --rows 300 --zipf 1.2 --pipeline sequential &&
  run_np 2 "$W/async" --rows 300 --zipf 1.2 --pipeline async; then
  cmp -s "$W/seq2" "$W/async" && bad "async gave the bytes of sequential" ||
    ok "async (stale rows) trains a different model"
  "$NP" compare "$W/async" "$W/seq2" --rtol 0.5 --atol 0.05 >/dev/null &&
    ok "async stays near sequential (a baseline, not garbage)" ||
    bad "async is far from sequential"
else
  bad "async or its sequential run failed: $(tail -n 3 "$W/err")"
fi

# the comparison can fail: a model trained for fewer steps is told apart
run_np 2 "$W/short" --steps 3 --log-json "$W/short.jsonl"
"$NP" compare "$W/short" "$W/ref_sgd" >/dev/null
[[ $? == 1 ]] && ok "compare tells a different model apart" || bad "compare missed a difference"

# --eval-interval at R = 2: the evaluation after step 3 of a 6-step run is the final one of
# the 3-step run (the model gathered between steps), and evaluating does not change training
evals() { sed -n "s/^{\"step\": $2, .*\(\"eval_samples\".*\)}/\1/p" "$1"; }
run_np 2 "$W/ei" --steps 6 --eval-interval 3 --log-json "$W/ei.jsonl" &&
  run_np 2 "$W/noei" --steps 6 || bad "eval-interval runs failed: $(tail -n 3 "$W/err")"
a=$(evals "$W/ei.jsonl" 3) b=$(evals "$W/short.jsonl" 3)
[[ -n $a && $a == "$b" ]] && ok "R=2 eval-interval: step 3's evaluation is the 3-step run's ($a)" ||
  bad "R=2 eval-interval: '$a' vs '$b'"
cmp -s "$W/ei" "$W/noei" && ok "R=2 eval-interval: the same trained bytes" ||
  bad "R=2 eval-interval changed the model"

# tables per rank shrink ~1/R (row-wise; memory from --metrics-json)
t1=$(grep -o '"table_bytes_max_rank": [0-9]*' "$W/m_1_row.json" | grep -o '[0-9]*$')
t4=$(grep -o '"table_bytes_max_rank": [0-9]*' "$W/m_4_row.json" | grep -o '[0-9]*$')
if [[ -n $t1 && -n $t4 ]] && ((t4 * 4 <= t1 * 105 / 100)); then
  ok "tables per rank: $t1 bytes on 1 rank, $t4 on each of 4"
else
  bad "tables per rank did not shrink ~1/4: $t1 vs $t4"
fi
grep -q '"keys": [1-9]' "$W/m_4_row.json" && grep -q '"rows": [1-9]' "$W/m_4_row.json" &&
  grep -q '"grads": [1-9]' "$W/m_4_row.json" && grep -q '"allreduce": [1-9]' "$W/m_4_row.json" &&
  grep -q '"ranks": 4' "$W/m_4_row.json" && ok "metrics report ranks and bytes per kind" ||
  bad "metrics lack ranks or bytes: $(cat "$W/m_4_row.json")"

# file data that ends mid-batch: every rank stops after the same step
awk 'BEGIN { srand(3); for (i = 0; i < 700; i++) { l = int(rand() * 2);
  for (j = 0; j < 13; j++) l = l "\t" int(rand() * 100);
  for (j = 0; j < 26; j++) l = l "\t" sprintf("%08x", int(rand() * 65536)); print l } }' >"$W/d.tsv"
CRITEO=(--data "criteo:$W/d.tsv" --steps 0 --tables 26 --rows 500 --batch 48 --quiet)
if timeout 120 "${MPIRUN[@]}" -np 3 "$NP" train "${CRITEO[@]}" --metrics-json "$W/c.json" \
  --dump-params "$W/c3" >"$W/out" 2>"$W/err" && grep -q '"steps": 13,' "$W/c.json"; then
  ok "data ending mid-batch: 630 train records = 13 steps on 3 ranks, no hang"
else
  bad "uneven data: $(tail -n 3 "$W/err")"
fi
"$NP" train "${CRITEO[@]}" --engine reference --dump-params "$W/c1" >/dev/null 2>&1
"$NP" compare "$W/c3" "$W/c1" >/dev/null && ok "3 ranks on Criteo data match the reference" ||
  bad "3 ranks on Criteo data differ from the reference"

# the dense all-reduce: reduce-scatter + all-gather (above 2 ranks) gives the all-gather
# form's bytes, and each rank sends half as much at 4 ranks (2 (R-1)/R n against (R-1) n)
ab() { sed -n 's/.*"allreduce": \([0-9]*\).*/\1/p' "$1" | head -n 1; }
NP_ALLREDUCE=allgather timeout 120 "${MPIRUN[@]}" -x NP_ALLREDUCE -np 4 "$NP" train "${SM[@]}" \
  --steps 3 --dump-params "$W/ag" --metrics-json "$W/ag.json" >"$W/out" 2>"$W/err" ||
  bad "R=4 all-gather run failed: $(tail -n 3 "$W/err")"
run_np 4 "$W/rs" --steps 3 --metrics-json "$W/rs.json" ||
  bad "R=4 reduce-scatter run failed: $(tail -n 3 "$W/err")"
cmp -s "$W/ag" "$W/rs" && ok "R=4: reduce-scatter + all-gather = all-gather (bytes)" ||
  bad "R=4: the all-reduce forms differ"
a=$(ab "$W/ag.json") r=$(ab "$W/rs.json")
[[ -n $a && -n $r ]] && ((r * 2 == a)) && ok "R=4: reduce-scatter sends half the all-reduce bytes ($r vs $a)" ||
  bad "R=4 all-reduce bytes: reduce-scatter '$r', all-gather '$a'"

# 2 workers a rank: the last runs the collectives and the others a compute scheduling
# context of their own (the tests elsewhere run 1 worker a rank); the same bytes as 1 worker
if run_np 2 "$W/w1" --steps 4 --pipeline nestpipe --windows 2 &&
  STARPU_NCPU=2 run_np 2 "$W/w2" --steps 4 --pipeline nestpipe --windows 2 --explain-placement; then
  grep -q "worker 1 runs the collectives" "$W/err" && ok "2 workers a rank: worker 1 runs the collectives" ||
    bad "2 workers a rank: no comm worker: $(grep placement "$W/err")"
  cmp -s "$W/w1" "$W/w2" && ok "R=2: 2 workers a rank (compute context + comm worker) = 1 worker (bytes)" ||
    bad "R=2: 2 workers a rank differ from 1"
else
  bad "R=2 worker-count runs failed: $(tail -n 3 "$W/err")"
fi

# placement: each rank knows the host's ranks and gives one worker the collectives
timeout 60 env -u STARPU_NCPU -u STARPU_NCPUS -u STARPU_WORKERS_CPUID -u STARPU_WORKERS_NOBIND \
  mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$NP" train "${SM[@]}" \
  --steps 2 --explain-placement >"$W/out" 2>&1
if grep -Eq "rank 1: host of .*, 2 ranks on it; placed by (hwloc|the launcher's binding).*worker [0-9] runs the collectives" "$W/out" &&
  grep -q "rank 0: host of .*, 2 ranks on it" "$W/out"; then
  ok "placement: 2 ranks on one host, each with a comm worker"
else
  bad "placement of 2 ranks: $(grep placement "$W/out")"
fi

# a rank that dies: the others exit non-zero in time, and the rank is named
start=$SECONDS
timeout 60 env NP_TEST_KILL_RANK=1 NP_TEST_KILL_STEP=5 "${MPIRUN[@]}" -x NP_TEST_KILL_RANK \
  -x NP_TEST_KILL_STEP -np 3 "$NP" train "${SM[@]}" --steps 1000 >"$W/out" 2>&1
rc=$?
took=$((SECONDS - start))
if [[ $rc != 0 && $rc != 124 && $took -le 30 ]] && grep -q "rank 1" "$W/out"; then
  ok "killed rank 1: job exits $rc after ${took}s, naming rank 1"
else
  bad "killed rank: exit $rc after ${took}s: $(tail -n 5 "$W/out")"
fi

# a rank that fails: it says why, the job stops
start=$SECONDS
timeout 60 env NP_TEST_FAIL_RANK=2 NP_TEST_FAIL_STEP=4 "${MPIRUN[@]}" -x NP_TEST_FAIL_RANK \
  -x NP_TEST_FAIL_STEP -np 3 "$NP" train "${SM[@]}" --steps 1000 >"$W/out" 2>&1
rc=$?
took=$((SECONDS - start))
if [[ $rc != 0 && $rc != 124 && $took -le 30 ]] && grep -q "nestpipe: rank 2: injected failure" "$W/out"; then
  ok "failing rank 2: job exits $rc after ${took}s with rank 2's message"
else
  bad "failing rank: exit $rc after ${took}s: $(tail -n 5 "$W/out")"
fi

# set-up that fails on one rank only, where the ranks agree on the configuration: the same
# path names a good data file on rank 0's host and a damaged one of the same size on rank
# 1's (each rank in its own folder): every rank ends, in time, with rank 1's message (rank
# 1 used to exit alone while rank 0 waited in the trainer's barrier)
mkdir -p "$W/host0" "$W/host1"
"$NP" generate "$W/host0/d.bin" --samples 500 "${SM[@]}" >/dev/null
head -c "$(stat -c %s "$W/host0/d.bin")" /dev/zero >"$W/host1/d.bin"
start=$SECONDS
timeout 60 "${MPIRUN[@]}" -np 1 -wdir "$W/host0" "$NP" train "${SM[@]}" --data bin:d.bin : \
  -np 1 -wdir "$W/host1" "$NP" train "${SM[@]}" --data bin:d.bin >"$W/out" 2>&1
rc=$?
took=$((SECONDS - start))
if [[ $rc == 2 && $took -le 30 ]] && grep -q "nestpipe: rank 1: d.bin: " "$W/out" &&
  grep -q "nestpipe: 1 of 2 ranks failed to set up" "$W/out"; then
  ok "set-up failing on rank 1 only: exit 2 after ${took}s with rank 1's message"
else
  bad "set-up failing on one rank: exit $rc after ${took}s: $(tail -n 5 "$W/out")"
fi
# the same for a config file that only rank 0 can read
printf 'steps = 2\n' >"$W/ok.ini"
start=$SECONDS
timeout 60 "${MPIRUN[@]}" -np 1 "$NP" train "${SM[@]}" --config "$W/ok.ini" : -np 1 "$NP" train \
  "${SM[@]}" --config "$W/none.ini" >"$W/out" 2>&1
rc=$?
took=$((SECONDS - start))
if [[ $rc == 2 && $took -le 30 ]] && grep -q "cannot open config file $W/none.ini" "$W/out"; then
  ok "config missing on rank 1 only: exit 2 after ${took}s"
else
  bad "config missing on one rank: exit $rc after ${took}s: $(tail -n 5 "$W/out")"
fi

# a stalled rank (NP_TEST_STALL_RANK/STEP: its driver sleeps for an hour, as a hung node
# would): the --rank-timeout watchdog names it and ends the job within seconds; while it
# waits, neither rank takes a core (they used to poll at 100% each: runtime/core/backoff.h)
start=$SECONDS
timeout 60 env NP_TEST_STALL_RANK=1 NP_TEST_STALL_STEP=3 "${MPIRUN[@]}" -x NP_TEST_STALL_RANK \
  -x NP_TEST_STALL_STEP -np 2 "$NP" train "${SM[@]}" --steps 1000 --rank-timeout 4 >"$W/out" 2>&1 &
job=$!
sleep 1.5 # set-up and 3 steps: the stall has begun
# this job's ranks only: the nestpipe processes below $job (not any other on the machine)
below() { local c; for c in $(pgrep -P "$1"); do echo "$c"; below "$c"; done; }
ranks_of_job() {
  local p
  for p in $(below $job | sort -n); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$NP train" && echo "$p"
  done
}
cpu_ticks() { for p in $(ranks_of_job); do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd' '; }
t0=$(cpu_ticks)
sleep 2
t1=$(cpu_ticks)
wait $job
rc=$?
took=$((SECONDS - start))
busy=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN { n = split(a, p, " ");
  split(b, q, " "); m = 0; for (i = 1; i <= n; i++) { u = (q[i] - p[i]) / hz / 2 * 100;
  if (u > m) m = u }; printf "%.0f", n == 2 ? m : 999 }')
if [[ $busy -le 30 ]]; then
  ok "stalled rank 1: the ranks wait at ${busy}% of a core at most"
else
  bad "stalled rank 1: a waiting rank took ${busy}% of a core (999: not 2 processes seen: '$t0' '$t1')"
fi
if [[ $rc == 1 && $took -le 30 ]] &&
  grep -q "nestpipe: rank 0: rank 1 has made no progress for [0-9]* s at step 4 while the others wait for it; stopping the job (--rank-timeout 4)" "$W/out"; then
  ok "stalled rank 1: the watchdog names it, exit 1 after ${took}s"
else
  bad "stalled rank: exit $rc after ${took}s: $(grep -v '^$' "$W/out" | head -n 3)"
fi

# a 2-rank traced run: one merged trace that loads, a report in which sequential mode
# leaves the exchanges fully exposed (one worker per rank: nothing can overlap them), Paje
# that pj_dump parses and an SVG that renders
if run_np 2 "$W/tp" --steps 4 --pipeline sequential --trace "$W/t.json" --metrics-json "$W/tm.json" &&
  "$NP" trace report "$W/t.json" --json >"$W/rep.json" 2>"$W/err"; then
  ok "2-rank trace written and read back"
  grep -q '"rank": 1' "$W/rep.json" && ok "the trace holds both ranks" || bad "rank 1 missing from the trace"
  ratio=$(tr -d ' \n' <"$W/rep.json" | grep -o '"overall":{.*' | grep -o '"exchange_exposed_ratio":[0-9.]*' | head -n 1)
  [[ $ratio == '"exchange_exposed_ratio":1.0' || $ratio == '"exchange_exposed_ratio":1' ]] &&
    ok "sequential: exchange fully exposed ($ratio)" || bad "sequential exchange ratio: $ratio"
  grep -q '"exchange_exposed_ratio": 1' "$W/tm.json" && ok "metrics of a traced run carry the report" ||
    bad "metrics lack the trace figures"
  if "$NP" trace paje "$W/t.json" "$W/t.paje" && "$NP" trace svg "$W/t.json" "$W/t.svg"; then
    if command -v pj_dump >/dev/null; then
      n=$(pj_dump "$W/t.paje" 2>"$W/err" | grep -c '^State,')
      x=$(grep -o '"ph": *"X"' "$W/t.json" | wc -l)
      [[ $n == "$x" && ! -s $W/err ]] && ok "pj_dump parses the Paje trace ($n states)" ||
        bad "pj_dump: $n states for $x tasks: $(head -c 300 "$W/err")"
    else
      echo "note: pj_dump not installed (apt-get install pajeng); Paje check skipped"
    fi
    if command -v rsvg-convert >/dev/null; then
      rsvg-convert "$W/t.svg" -o "$W/t.png" && [[ $(head -c 8 "$W/t.png" | od -An -tx1 | tr -d ' ') == 89504e470d0a1a0a ]] &&
        ok "the SVG renders to PNG" || bad "rsvg-convert failed on the SVG"
    else
      echo "note: rsvg-convert not installed (apt-get install librsvg2-bin); render check skipped"
    fi
  else
    bad "trace paje/svg failed"
  fi
else
  bad "2-rank traced run: $(tail -n 3 "$W/err")"
fi
# under dbp the split row exchange's two parts carry their names from both ranks into the
# merged trace, and rows do go early (fresh parts that moved bytes)
if run_np 2 "$W/td" --steps 4 --pipeline dbp --trace "$W/td.json"; then
  for part in fresh shared; do
    for pid in 0 1; do
      n=$(grep -o "\"name\":\"exchange_rows_$part\",[^}]*\"pid\":$pid," "$W/td.json" | wc -l)
      [[ $n -ge 2 ]] && ok "dbp trace: rank $pid has $n exchange_rows_$part tasks" ||
        bad "dbp trace: rank $pid has $n exchange_rows_$part tasks"
    done
  done
  n=$(grep -o '"name":"exchange_rows_fresh",[^}]*"bytes":[1-9]' "$W/td.json" | wc -l)
  [[ $n -ge 2 ]] && ok "dbp trace: $n fresh parts moved rows" ||
    bad "dbp trace: $n fresh parts moved rows"
else
  bad "2-rank dbp traced run: $(tail -n 3 "$W/err")"
fi

# NP_LINK_GBIT paces the data collectives to an emulated link (bench/fwp.sh --link
# emulated): the same bytes as unpaced, and a run at least as long as its rank's bytes take
# at that rate (an unpaced run is far under that bound, so the check can fail; a note says
# so if this machine was too slow to show it); a bad rate is refused in one line per
# process, exit 2
link_run() { # GBIT OUT.params METRICS: 2 ranks, paced unless GBIT is empty
  local g=$1
  shift
  if [[ -n $g ]]; then
    NP_LINK_GBIT=$g timeout 120 "${MPIRUN[@]}" -x NP_LINK_GBIT -np 2 "$NP" train "${SM[@]}" \
      --steps 10 --dump-params "$1" --metrics-json "$2" >"$W/out" 2>"$W/err"
  else
    timeout 120 "${MPIRUN[@]}" -np 2 "$NP" train "${SM[@]}" --steps 10 --dump-params "$1" \
      --metrics-json "$2" >"$W/out" 2>"$W/err"
  fi
}
LINK_GBIT=0.0005 # 62.5 kB/s: 10 steps of SM take about 3 s paced
if link_run "" "$W/lu" "$W/lu.json" && link_run "$LINK_GBIT" "$W/lp" "$W/lp.json"; then
  cmp -s "$W/lu" "$W/lp" && ok "NP_LINK_GBIT: the paced run gives the unpaced bytes" ||
    bad "NP_LINK_GBIT: the paced run differs from the unpaced one"
  read -r bound tu tp < <(/usr/bin/python3 -c "import json,sys
u, p = (json.load(open(f)) for f in sys.argv[1:3])
b = p['bytes_exchanged']
# bytes to the other rank, summed over the 2 ranks, so one rank sends at least half
print(0.9 * (b['allreduce'] + b['rows'] + b['grads']) / 2 / ($LINK_GBIT * 1e9 / 8),
      u['train_seconds'], p['train_seconds'])" "$W/lu.json" "$W/lp.json")
  if /usr/bin/python3 -c "import sys; b, u, p = map(float, sys.argv[1:]); sys.exit(not b <= p)" \
    "$bound" "$tu" "$tp"; then
    ok "NP_LINK_GBIT=$LINK_GBIT: ${tp} s paced, bound ${bound} s (unpaced ${tu} s)"
    /usr/bin/python3 -c "import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))" "$tu" \
      "$bound" && echo "note: the unpaced run took longer than the bound: the check proved nothing here"
  else
    bad "NP_LINK_GBIT=$LINK_GBIT: ${tp} s paced, bound ${bound} s (unpaced ${tu} s)"
  fi
else
  bad "NP_LINK_GBIT runs failed: $(tail -n 3 "$W/err")"
fi
for v in 0 -1 fast 2x 1e-320; do
  NP_LINK_GBIT=$v timeout 60 "${MPIRUN[@]}" -x NP_LINK_GBIT -np 2 "$NP" train "${SM[@]}" \
    --steps 2 >"$W/out" 2>"$W/err"
  rc=$?
  grep -qF "NP_LINK_GBIT: '$v' is not a link rate in Gbit/s (1e-6 or more)" "$W/err" && [[ $rc == 2 ]] &&
    ok "NP_LINK_GBIT=$v refused (exit 2)" || bad "NP_LINK_GBIT=$v: exit $rc: $(head -n 2 "$W/err")"
done
NP_LINK_GBIT=fast "$NP" train "${SM[@]}" --steps 2 >"$W/out" 2>"$W/err"
rc=$?
[[ $rc == 2 && $(grep -c "NP_LINK_GBIT" "$W/err") == 1 ]] && ok "NP_LINK_GBIT=fast refused on one process" ||
  bad "NP_LINK_GBIT=fast on one process: exit $rc: $(cat "$W/err")"

# bad rank/batch combinations: exit 2 and one nestpipe line
expect_bad_r() { # NAME R FRAGMENT FLAGS...
  local name=$1 R=$2 frag=$3
  shift 3
  timeout 60 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "$@" >"$W/out" 2>"$W/err"
  local rc=$? n
  n=$(grep -c "^nestpipe:" "$W/err")
  if [[ $rc == 2 && $n == 1 ]] && grep -qF -- "$frag" "$W/err"; then ok "$name"; else
    bad "$name: exit $rc, $n nestpipe lines: $(grep nestpipe "$W/err")"; fi
}
expect_bad_r "batch not divisible by ranks" 3 "global batch 50 is not divisible by 3 ranks" --batch 50
expect_bad_r "more chunks than local samples" 4 "chunks: 8 chunks of a local batch of 4" --batch 16 --chunks 8
expect_bad_r "reference engine needs one process" 2 "reference trainer runs in one process" --engine reference

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
