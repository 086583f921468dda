#!/usr/bin/env bash
# Checkpoints (docs/formats.md "Checkpoints"), small sizes for a two-core machine:
# - kill -9 (a rank dies before a step, or inside a checkpoint's shard or manifest write),
#   then --resume, repeated, gives the --dump-params bytes of an uninterrupted run: R = 1
#   and 2, sequential and nestpipe, SGD and row-wise Adagrad;
# - an R = 2 checkpoint resumed at R = 1 and R = 4 matches the reference within tolerance;
# - a truncated file, a flipped byte, a missing shard, a corrupted manifest and a config
#   mismatch each exit 2 naming the file; --keep-checkpoints keeps the newest K;
# - SIGINT (R = 1) and SIGTERM to one rank (R = 2) stop after the step with a checkpoint
#   that resumes to the same bytes.
# usage: test_ckpt.sh PATH/TO/nestpipe
set -u
NP=$1
W=$(mktemp -d /tmp/np_ckpt_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME
  -x NP_TEST_KILL_RANK -x NP_TEST_KILL_STEP -x NP_TEST_CKPT_KILL)
# windows and chunks fixed, so sequential and nestpipe do the same arithmetic
SM=(--rows 300,200,350 --tables 3 --hot 2 --dim 8 --bottom 13-8-8 --top 8-1 --batch 32
  --eval-samples 64 --chunks 2 --windows 2 --quiet)
STEPS=12

np_run() { # R [flags...]: train with R ranks (no mpirun for R = 1), 120 s at most
  local R=$1
  shift
  if [[ $R == 1 ]]; then
    timeout 120 "$NP" train "${SM[@]}" "$@" >"$W/out" 2>"$W/err"
  else
    timeout 120 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "$@" >"$W/out" 2>"$W/err"
  fi
}

# ---------------------------------------------------------------- kill -9, then resume
# Each configuration: an uninterrupted run, then one run that is killed three times (before
# a step, inside a shard write, inside a manifest write) and resumed each time; its dump
# must be the uninterrupted run's bytes.
kill_resume() { # R pipeline optim
  local R=$1 pipe=$2 optim=$3 name="R=$1 $2 $3" D="$W/ck_$1_$2_$3"
  local F=(--pipeline "$pipe" --sparse-optim "$optim" --steps $STEPS)
  np_run "$R" "${F[@]}" --dump-params "$W/ref.params" || {
    bad "$name: uninterrupted run: $(tail -n 2 "$W/err")"
    return
  }
  local CK=(--checkpoint-dir "$D" --checkpoint-every 2 --keep-checkpoints 2)
  local rank=$((R - 1)) st
  # 1. a rank dies (SIGKILL) before step 5: checkpoint 4 is the newest
  NP_TEST_KILL_RANK=$rank NP_TEST_KILL_STEP=5 np_run "$R" "${F[@]}" "${CK[@]}"
  st=$?
  [[ $st -ne 0 && -f $D/ckpt-000000004/manifest ]] || {
    bad "$name: kill before step 5: exit $st, $(ls "$D" 2>&1 | tr '\n' ' ')"
    return
  }
  # 2. resumed, it dies inside checkpoint 8's shard write: 8 is torn, 6 is the newest whole
  NP_TEST_CKPT_KILL=8:shard np_run "$R" "${F[@]}" "${CK[@]}" --resume "$D"
  st=$?
  [[ $st -ne 0 && -d $D/ckpt-000000008 && ! -f $D/ckpt-000000008/manifest &&
    -f $D/ckpt-000000006/manifest ]] || {
    bad "$name: kill in shard write: exit $st, $(ls "$D" 2>&1 | tr '\n' ' ')"
    return
  }
  # 3. resumed from 6, it dies inside checkpoint 10's manifest write (every shard written)
  NP_TEST_CKPT_KILL=10:manifest np_run "$R" "${F[@]}" "${CK[@]}" --resume "$D"
  st=$?
  [[ $st -ne 0 && ! -f $D/ckpt-000000010/manifest && -f $D/ckpt-000000008/manifest ]] || {
    bad "$name: kill in manifest write: exit $st, $(ls "$D" 2>&1 | tr '\n' ' ')"
    return
  }
  # 4. resumed from 8 to the end
  np_run "$R" "${F[@]}" "${CK[@]}" --resume "$D" --dump-params "$W/res.params" || {
    bad "$name: final resume: $(tail -n 2 "$W/err")"
    return
  }
  if cmp -s "$W/ref.params" "$W/res.params"; then
    ok "$name: killed 3 times (before a step, in a shard write, in a manifest write), resumed: same bytes"
  else
    bad "$name: resumed dump differs from the uninterrupted run"
  fi
  # --keep-checkpoints 2: the newest two whole ones, no torn one left behind
  local left
  left=$(cd "$D" && echo ckpt-*)
  [[ $left == "ckpt-000000010 ckpt-000000012" ]] && ok "$name: keeps the newest 2 checkpoints" ||
    bad "$name: checkpoints left: $left"
}

for R in 1 2; do
  for pipe in sequential nestpipe; do
    for optim in sgd rowwise-adagrad; do
      kill_resume $R $pipe $optim
    done
  done
done

# ---------------------------------------------------------------- resharding
# an R = 2 checkpoint at step 6 resumed at R = 1 and R = 4: within tolerance of the
# reference trainer (another rank count sums the dense gradients in another order)
AD=(--sparse-optim rowwise-adagrad --steps $STEPS)
"$NP" train --engine reference "${SM[@]}" "${AD[@]}" --dump-params "$W/oracle.params" \
  >/dev/null 2>"$W/err" || bad "reference run: $(cat "$W/err")"
RD="$W/reshard"
np_run 2 "${AD[@]}" --steps 6 --checkpoint-dir "$RD" --checkpoint-every 6 ||
  bad "R=2 checkpoint for resharding: $(tail -n 2 "$W/err")"
for R in 1 4; do
  if np_run $R "${AD[@]}" --resume "$RD" --dump-params "$W/reshard_$R.params" &&
    "$NP" compare "$W/reshard_$R.params" "$W/oracle.params" >"$W/cmp" 2>&1; then
    ok "R=2 checkpoint resumed at R=$R matches the reference ($(tail -n 1 "$W/cmp" | cut -c1-40))"
  else
    bad "R=2 checkpoint resumed at R=$R: $(tail -n 2 "$W/err" "$W/cmp")"
  fi
done
# resumed at the same R, pipeline changed: the same bytes as an uninterrupted R = 2 run
np_run 2 "${AD[@]}" --dump-params "$W/r2.params" &&
  np_run 2 "${AD[@]}" --resume "$RD" --pipeline sequential --dump-params "$W/r2res.params" &&
  cmp -s "$W/r2.params" "$W/r2res.params" && ok "R=2 resumed at R=2 under another pipeline: same bytes" ||
  bad "R=2 resumed at R=2 under another pipeline differs"

# ---------------------------------------------------------------- bad checkpoints
# a copy of the R = 2 checkpoint, damaged one way at a time, resumed at R = 1 (which reads
# every file); exit 2 and a one-line message naming the file and the fault
expect_refused() { # name pattern [flags...]; $W/bad holds the damaged checkpoint
  local name=$1 pat=$2
  shift 2
  np_run 1 "${AD[@]}" --resume "$W/bad" "$@"
  local st=$?
  if [[ $st -eq 2 && $(wc -l <"$W/err") -eq 1 ]] && grep -q -- "$pat" "$W/err"; then
    ok "refused: $name ($(cut -c1-110 "$W/err"))"
  else
    bad "$name: exit $st, stderr: $(head -c 300 "$W/err")"
  fi
}
fresh() { rm -rf "$W/bad" && cp -r "$RD" "$W/bad"; }
C=ckpt-000000006
fresh && truncate -s -100 "$W/bad/$C/shard-1-of-2"
expect_refused "truncated shard" "$C/shard-1-of-2: .* bytes, but the manifest says .*truncated"
fresh && printf '\x55' | dd of="$W/bad/$C/shard-0-of-2" bs=1 seek=500 conv=notrunc status=none
expect_refused "flipped byte in a shard" "$C/shard-0-of-2: checksum .* corrupted"
fresh && printf '\x55' | dd of="$W/bad/$C/dense" bs=1 seek=60 conv=notrunc status=none
expect_refused "flipped byte in the dense file" "$C/dense: checksum .* corrupted"
fresh && rm "$W/bad/$C/shard-1-of-2"
expect_refused "missing shard" "$C/shard-1-of-2: missing"
fresh && sed -i 's/^step 6$/step 7/' "$W/bad/$C/manifest"
expect_refused "edited manifest" "$C/manifest: checksum .* corrupted"
fresh
expect_refused "config mismatch" "$C/manifest: written with lr = 0.1, but this run has 0.2" --lr 0.2
expect_refused "another shape" "$C/manifest: written with dim = 8, but this run has 4" \
  --dim 4 --bottom 13-8-4
expect_refused "another exchange form" "$C/manifest: written with exchange = auto, but this run has pooled" \
  --exchange pooled
grep -qx "exchange auto" "$W/bad/$C/manifest" && ok "the manifest records the exchange form" ||
  bad "no 'exchange auto' line in $C/manifest"
fresh && rm "$W/bad/$C/manifest"
expect_refused "only a torn checkpoint" "no whole checkpoint there"
expect_refused "no such folder" "resume $W/nothing: cannot open" --resume "$W/nothing"
np_run 1 --steps 4 --checkpoint-every 2
[[ $? -eq 2 ]] && grep -q "no checkpoint-dir" "$W/err" && ok "checkpoint-every needs checkpoint-dir" ||
  bad "checkpoint-every without checkpoint-dir: $(cat "$W/err")"

# ---------------------------------------------------------------- signals
# SIGINT to a long run: it finishes the step, checkpoints and exits 130; resumed to a few
# steps further it gives the bytes of an uninterrupted run of that length
signal_test() { # R signal rank-to-signal expected-exit
  local R=$1 sig=$2 D="$W/sig_$1"
  local L=(--sparse-optim rowwise-adagrad --pipeline nestpipe --checkpoint-dir "$D")
  if [[ $R == 1 ]]; then
    "$NP" train "${SM[@]}" "${L[@]}" --steps 1000000 >"$W/out" 2>"$W/err" &
  else
    "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "${L[@]}" --steps 1000000 >"$W/out" 2>"$W/err" &
  fi
  local job=$! target
  sleep 3
  if [[ $R == 1 ]]; then
    target=$job
  else # the last rank only: the others must learn of it and stop at the same step
    target=$(pgrep -P "$job" -f "nestpipe train" | tail -n 1)
  fi
  kill -s "$sig" "$target"
  wait "$job"
  local st=$? step
  step=$(sed -n 's/^step //p' "$D"/ckpt-*/manifest 2>/dev/null | tail -n 1)
  if [[ $st -eq 0 || -z $step ]]; then
    bad "R=$R SIG$sig: exit $st, no checkpoint: $(tail -n 2 "$W/err")"
    return
  fi
  grep -q "SIG$sig: stopped after step $step" "$W/err" && ok "R=$R SIG$sig to rank $((R - 1)): exit $st, checkpoint at step $step" ||
    bad "R=$R SIG$sig: $(tail -n 2 "$W/err")"
  local N=$((step + 3))
  np_run "$R" "${L[@]}" --steps $N --dump-params "$W/sig_ref.params" &&
    np_run "$R" "${L[@]}" --steps $N --resume "$D" --dump-params "$W/sig_res.params" &&
    cmp -s "$W/sig_ref.params" "$W/sig_res.params" &&
    ok "R=$R SIG$sig: resumed to step $N, same bytes as uninterrupted" ||
    bad "R=$R SIG$sig: resumed run differs or failed: $(tail -n 2 "$W/err")"
}
signal_test 1 INT
signal_test 2 TERM

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
