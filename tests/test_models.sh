#!/usr/bin/env bash
# Model files end to end through `nestpipe train`: examples/models/dlrm.ini and examples/models/dcnv2.ini
# train to the same --dump-params bytes as --model dlrm / dcnv2 under both engines; a model
# over pooled:A-B slices trains under the reference and the StarPU engine, which agree
# within compare's tolerance; bad model files stop with exit 2 and one line naming
# file:line; a model file with a builder key is refused.
# usage: test_models.sh PATH/TO/nestpipe PATH/TO/models
set -u
NP=$1
MODELS=$2
W=$(mktemp -d /tmp/np_models_XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

# same_file NAME A B: byte for byte
same_file() {
  if cmp -s "$2" "$3"; then ok "$1"; else bad "$1: $2 and $3 differ"; fi
}

# finite_loss NAME METRICS_JSON: a number (JSON has no NaN; nestpipe writes null for one)
finite_loss() {
  if grep -qE '"train_loss": *-?[0-9]' "$2"; then ok "$1"; else bad "$1: no finite train_loss in $(cat "$2")"; fi
}

SMALL=(--rows 1000 --batch 256 --steps 3 --eval-samples 256 --quiet)

# ---- the shipped files are the built-in models, to the byte
for m in dlrm dcnv2; do
  for eng in starpu reference; do
    expect_ok "$m.ini trains ($eng)" "$NP" train --model-file "$MODELS/$m.ini" --engine $eng \
      "${SMALL[@]}" --dump-params "$W/$m.$eng.file"
    expect_ok "--model $m trains ($eng)" "$NP" train --model $m --engine $eng "${SMALL[@]}" \
      --dump-params "$W/$m.$eng.builtin"
    same_file "$m.ini = --model $m ($eng)" "$W/$m.$eng.file" "$W/$m.$eng.builtin"
  done
done

# ---- a topology no builder makes: two interactions over halves of the tables, and a
# slice used twice (its gradient summed with another consumer's)
cat >"$W/sliced.ini" <<'EOF'
# two dots over halves of the tables
output = top
[bottom]
kind = mlp
in = dense
sizes = 32-16
[lo]
kind = dot
in = bottom, pooled:0-12
[hi]
kind = dot
in = bottom, pooled:13-25
[both]
kind = concat
in = lo, hi, pooled:13-25
[top]
kind = mlp
in = both
sizes = 32-1
relu-last = 0
EOF
expect_ok "sliced model trains (reference)" "$NP" train --model-file "$W/sliced.ini" \
  --engine reference "${SMALL[@]}" --dump-params "$W/sliced.ref" --metrics-json "$W/sliced.ref.json"
finite_loss "sliced model: finite loss (reference)" "$W/sliced.ref.json"
for chunks in 1 2; do
  expect_ok "sliced model trains (starpu, chunks $chunks)" "$NP" train --model-file "$W/sliced.ini" \
    --engine starpu --chunks $chunks "${SMALL[@]}" --dump-params "$W/sliced.sp$chunks" \
    --metrics-json "$W/sliced.sp$chunks.json"
  finite_loss "sliced model: finite loss (starpu, chunks $chunks)" "$W/sliced.sp$chunks.json"
  expect_ok "sliced model: starpu chunks $chunks = reference" "$NP" compare --rtol 1e-4 \
    "$W/sliced.sp$chunks" "$W/sliced.ref"
done

# ---- bad model files: exit 2, one line, file:line
printf '[bottom]\nkind = mlp\nin = dense\nsizes = 64-16\n[g]\nkind = gate\nin = bottom\n' >"$W/kind.ini"
expect_fail "unknown kind" 2 "$W/kind.ini:6: node g: unknown kind 'gate'" -- \
  "$NP" train --model-file "$W/kind.ini" "${SMALL[@]}"
grep -qF -- "--plugin" "$W/err" && ok "unknown kind: names --plugin" || bad "unknown kind: no --plugin in $(cat "$W/err")"
printf '[a]\nkind = dot\nin = bottom, pooled\n' >"$W/input.ini"
expect_fail "input names no node" 2 "$W/input.ini:3: node a: in: 'bottom' names no earlier node" -- \
  "$NP" train --model-file "$W/input.ini" "${SMALL[@]}"
printf '[b]\nkind = linear\nin = dense\nout = 3\n\n[a]\nkind = dot\nin = b, pooled\n' >"$W/shape.ini"
expect_fail "shape error at the node's section" 2 "$W/shape.ini:6: node a (dot): " -- \
  "$NP" train --model-file "$W/shape.ini" "${SMALL[@]}"
printf '[a]\nkind = linear\nin = pooled\nout = 1\nwidth = 3\n' >"$W/hp.ini"
expect_fail "unknown hyper-parameter" 2 "$W/hp.ini:5: node a: linear: no hyper-parameter 'width'" -- \
  "$NP" train --model-file "$W/hp.ini" "${SMALL[@]}"
printf 'output = top\n[top]\nkind = linear\nin = pooled:0-30\nout = 1\n' >"$W/range.ini"
expect_fail "tables out of range" 2 "$W/range.ini:4: node top: in: pooled:0-30" -- \
  "$NP" train --model-file "$W/range.ini" "${SMALL[@]}"
expect_fail "missing model file" 2 "$W/none.ini" -- \
  "$NP" train --model-file "$W/none.ini" "${SMALL[@]}"
expect_fail "model file and a builder key" 2 "top: the model comes from model-file" -- \
  "$NP" train --model-file "$MODELS/dlrm.ini" --top 32-1 "${SMALL[@]}"
expect_fail "model file and --model" 2 "model: the model comes from model-file" -- \
  "$NP" train --model-file "$MODELS/dlrm.ini" --model dcnv2 "${SMALL[@]}"

echo "test_models: $pass passed, $failed failed"
[[ $failed -eq 0 ]]
