#!/usr/bin/env bash
# A user's layer through `nestpipe train`: examples/custom_layer's gate, built as a plugin
# the way a user builds it, used from its model file (gate.ini), trains under the reference
# trainer and the StarPU engine's sequential, dbp and nestpipe pipelines on 1 and 2 ranks;
# the pipelines give the same bytes, and the reference within the engines' tolerance;
# checkpoints resume bit for bit; evaluation, metrics, predict and export work with it; a
# run without the plugin fails in one line.
# usage: test_plugin.sh NESTPIPE LIBGATE.so GATE.ini
set -u
NP=$1 LIB=$2 INI=$3
W=$(mktemp -d /tmp/np_plugin_XXXXXX)
trap 'rm -rf "$W"' EXIT
export STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0 failed=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
# Engine vs reference: chunked sums reassociate float additions (docs/model.md tolerances).
TOL=(--rtol 1e-4 --atol 1e-5)
TRAIN=(--plugin "$LIB" --model-file "$INI" --tables 4 --dim 8 --rows 1000 --batch 256 --steps 12
  --windows 2 --eval-samples 1024 --seed 7 --quiet)
run() { # R OUT ARGS...: a run on R ranks dumping to OUT
  local R=$1 out=$2
  shift 2
  if [[ $R == 1 ]]; then
    timeout 300 "$NP" train "${TRAIN[@]}" --dump-params "$out" "$@" >"$W/out" 2>"$W/err"
  else
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$R" --mca btl self,vader \
      -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME "$NP" train "${TRAIN[@]}" \
      --dump-params "$out" "$@" >"$W/out" 2>"$W/err"
  fi
}

run 1 "$W/ref" --engine reference || bad "reference run failed: $(tail -n 2 "$W/err")"
grep -q 'gate\.weight' "$W/ref" && grep -q 'gate\.bias' "$W/ref" &&
  ok "the dump names the plugin's tensors gate.weight, gate.bias" || bad "no gate tensors in the dump"
for R in 1 2; do
  for p in sequential dbp nestpipe; do
    run "$R" "$W/$p-$R" --pipeline "$p" --metrics-json "$W/m-$p-$R.json" ||
      bad "R=$R $p run failed: $(tail -n 2 "$W/err")"
  done
  cmp -s "$W/sequential-$R" "$W/dbp-$R" && cmp -s "$W/sequential-$R" "$W/nestpipe-$R" &&
    ok "R=$R: sequential, dbp and nestpipe give the same bytes" ||
    bad "R=$R: the pipelines differ"
  "$NP" compare "$W/nestpipe-$R" "$W/ref" "${TOL[@]}" >"$W/cmp" &&
    ok "R=$R: nestpipe matches the reference within rtol 1e-4" ||
    bad "R=$R: nestpipe differs from the reference: $(grep -m 3 OUT "$W/cmp")"
  python3 - "$W/m-nestpipe-$R.json" <<'EOF' && ok "R=$R: metrics with a finite eval AUC over 1024 samples" || bad "R=$R: metrics"
import json, math, sys
m = json.load(open(sys.argv[1]))
assert m["steps"] == 12 and m["eval_samples"] == 1024 and math.isfinite(m["eval_auc"])
assert m["config"]["plugin"] and m["config"]["model-file"]
EOF
done
# checkpoints: 6 steps and a checkpoint, then resumed to 12: the bytes of 12 straight
run 2 "$W/half" --pipeline nestpipe --steps 6 --checkpoint-dir "$W/ck" --checkpoint-every 6 ||
  bad "checkpointed run failed: $(tail -n 2 "$W/err")"
run 2 "$W/resumed" --pipeline nestpipe --resume "$W/ck" --eval-interval 3 --log-json "$W/log.jsonl" ||
  bad "resumed run failed: $(tail -n 2 "$W/err")"
cmp -s "$W/resumed" "$W/nestpipe-2" && ok "2 ranks: resumed from step 6, the bytes of 12 straight" ||
  bad "the resumed run differs from the uninterrupted one"
[[ $(grep -c '"eval_auc"' "$W/log.jsonl") == 2 ]] &&
  ok "eval-interval: an evaluation at step 9, then the run's own" || bad "eval-interval: $(cat "$W/log.jsonl")"
# a checkpoint of the gate model resumes only with the same graph
cp "$INI" "$W/other.ini" && sed -i 's/^sizes = 16-1/sizes = 8-1/' "$W/other.ini"
if run 2 "$W/x" --pipeline nestpipe --resume "$W/ck" --model-file "$W/other.ini"; then
  bad "a checkpoint resumed with another model file"
else
  grep -q "written with graph" "$W/err" && ok "another model file: the checkpoint is refused, naming the graph" ||
    bad "another model file: $(tail -n 1 "$W/err")"
fi
# predict with the plugin and the model file; a run without the plugin fails in one line
"$NP" generate "$W/d.bin" --samples 500 --tables 4 --rows 1000 --seed 7 >/dev/null 2>"$W/err" ||
  bad "generate: $(cat "$W/err")"
"$NP" predict --plugin "$LIB" --model-file "$INI" --tables 4 --dim 8 --rows 1000 \
  --params "$W/ref" --data "bin:$W/d.bin" --out "$W/scores" 2>"$W/err" &&
  [[ $(wc -l <"$W/scores") == 500 ]] && ok "predict scores 500 records with the plugin's model" ||
  bad "predict: $(cat "$W/err")"
if "$NP" train --model-file "$INI" --tables 4 --dim 8 --steps 2 --quiet 2>"$W/err"; then
  bad "a run without the plugin trained"
else
  [[ $(wc -l <"$W/err") == 1 ]] && grep -q "unknown kind 'gate'" "$W/err" && grep -q -- "--plugin" "$W/err" &&
    ok "without --plugin: one line naming the kind and the flag" || bad "without --plugin: $(cat "$W/err")"
fi
# the key in a config file loads it as the flag does
printf 'plugin = %s\nmodel-file = %s\n' "$LIB" "$INI" >"$W/p.ini"
"$NP" train --config "$W/p.ini" --tables 4 --dim 8 --rows 1000 --batch 256 --steps 2 --quiet \
  2>"$W/err" && ok "the plugin key in a config file" || bad "plugin key: $(cat "$W/err")"
# plugins that fail, through train: one line each, exit 2
if "$NP" train --plugin "$W/none.so" --steps 2 --quiet 2>"$W/err"; then
  bad "a missing plugin trained"
else
  [[ $? == 2 && $(wc -l <"$W/err") == 1 ]] && grep -q "plugin $W/none.so: cannot load it" "$W/err" &&
    ok "a missing plugin: exit 2, one line naming it" || bad "missing plugin: $(cat "$W/err")"
fi
# a plugin that loads on one rank only (the same path, a broken file on rank 1's host):
# both ranks stop in set-up, the failing one saying why, nobody waits
mkdir -p "$W/host0" "$W/host1"
cp "$LIB" "$W/host0/libg.so"
echo "not a shared object" >"$W/host1/libg.so"
TRAIN1=("${TRAIN[@]}")
TRAIN1[1]=./libg.so # --plugin ./libg.so: relative to each rank's folder
timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x STARPU_SILENT \
  -x STARPU_WORKERS_NOBIND -x STARPU_HOME -np 1 -wdir "$W/host0" "$NP" train "${TRAIN1[@]}" : \
  -np 1 -wdir "$W/host1" "$NP" train "${TRAIN1[@]}" >"$W/out" 2>"$W/err"
rc=$?
[[ $rc != 0 && $rc != 124 ]] && grep -q "rank 1: plugin ./libg.so: cannot load it" "$W/err" &&
  grep -q "1 of 2 ranks failed to set up" "$W/err" &&
  ok "a plugin failing on one rank: both stop in set-up (exit $rc), rank 1 says why" ||
  bad "a plugin failing on one rank: exit $rc: $(cat "$W/err")"
# its step graph: the gate's forward and backward in every chunk, the guarantees hold
G=(--plugin "$LIB" --model-file "$INI" --tables 4 --dim 8 --rows 1000 --batch 256 --windows 2 --chunks 2)
for p in sequential dbp nestpipe; do
  if "$NP" graph "${G[@]}" --pipeline "$p" >"$W/g.txt" 2>"$W/err" &&
    [[ $(grep -c ' fwd:gate ' "$W/g.txt") == 4 && $(grep -c ' bwd:gate ' "$W/g.txt") == 4 ]] &&
    "$NP" graph "${G[@]}" --pipeline "$p" --ranks 2 --check >"$W/c.txt" 2>&1; then
    ok "nestpipe graph --pipeline $p of the plugin's model: gate fwd/bwd in its 4 chunks, checks pass"
  else
    bad "nestpipe graph --pipeline $p of the plugin's model: $(head -n 2 "$W/err") $(grep -A1 VIOLATED "$W/c.txt")"
  fi
done
echo "$pass passed, $failed failed"
((failed == 0))
