#!/usr/bin/env bash
# Sequence features (--seq-len) end to end: an HSTU model file over table 0's sequence
# trains under the StarPU engine to the reference's model within rel 1e-4 on 1, 2 and 4
# ranks; every pipeline gives the bytes of sequential; a sequence always travels as rows
# (--exchange pooled pools only the other tables) and still matches; the built-in DLRM
# takes the sequence's slots; sequences longer than seq-len are refused, naming the record.
# The generative model (--model hstu, its nextitem loss and negatives): the same oracle on
# 1, 2 and 4 ranks and the pipelines bit for bit; it learns the planted chain (HR@10 from
# chance to well above it); its figures reach the metrics; its wrong settings are refused.
# usage: test_seq.sh PATH/TO/nestpipe PATH/TO/tests/models
set -u
NP=$1
MODELS=$2
W=$(mktemp -d /tmp/np_seq_XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
mpi_test_env
MPIRUN=(timeout 180 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np)

SM=(--model-file "$MODELS/hstu_rank.ini" --tables 4 --seq-len 6 --dim 8 --rows 500 --batch 64
    --steps 4 --eval-samples 64 --quiet)
matches() { # NAME A B: within rel 1e-4
  if "$NP" compare --rtol 1e-4 "$2" "$3" >"$W/cmp" 2>&1; then ok "$1"; else bad "$1: $(tail -3 "$W/cmp")"; fi
}

expect_ok "hstu model trains (reference)" "$NP" train "${SM[@]}" --engine reference \
  --dump-params "$W/ref" --metrics-json "$W/ref.json"
grep -qE '"train_loss": *[0-9]' "$W/ref.json" && ok "finite loss" || bad "no finite loss: $(cat "$W/ref.json")"
grep -qE '"seq_len": *6' "$W/ref.json" && ok "metrics name seq_len" || bad "metrics lack seq_len"
# the check can fail: one step more is another model
expect_ok "reference, 5 steps" "$NP" train "${SM[@]}" --engine reference --steps 5 --dump-params "$W/ref5"
if "$NP" compare --rtol 1e-4 "$W/ref5" "$W/ref" >/dev/null 2>&1; then bad "compare cannot tell 4 steps from 5"; else ok "compare tells 4 steps from 5"; fi

for chunks in 1 2; do
  expect_ok "starpu, chunks $chunks" "$NP" train "${SM[@]}" --chunks $chunks --dump-params "$W/sp$chunks"
  matches "starpu chunks $chunks = reference" "$W/sp$chunks" "$W/ref"
done

for R in 2 4; do
  if "${MPIRUN[@]}" $R "$NP" train "${SM[@]}" --dump-params "$W/r$R" >"$W/out" 2>&1; then
    matches "$R ranks = reference" "$W/r$R" "$W/ref"
  else bad "$R ranks: $(tail -3 "$W/out")"; fi
done

for p in sequential dbp fwp nestpipe; do
  "${MPIRUN[@]}" 2 "$NP" train "${SM[@]}" --pipeline $p --windows 2 --dump-params "$W/p_$p" \
    >"$W/out" 2>&1 || bad "2 ranks, $p: $(tail -3 "$W/out")"
done
for p in dbp fwp nestpipe; do
  cmp -s "$W/p_$p" "$W/p_sequential" && ok "$p = sequential, bit for bit" || bad "$p differs from sequential"
done
matches "nestpipe (2 ranks, 2 windows) = reference" "$W/p_nestpipe" "$W/ref"

# pooled sums for the bags, rows for the sequence: 3 of 4 tables' segments pooled
if "${MPIRUN[@]}" 2 "$NP" train "${SM[@]}" --exchange pooled --dump-params "$W/pooled" \
  --metrics-json "$W/pooled.json" >"$W/out" 2>&1; then
  matches "--exchange pooled = reference" "$W/pooled" "$W/ref"
  grep -qE '"exchange_pooled_share": *0\.75' "$W/pooled.json" && ok "the sequence went as rows" \
    || bad "pooled share: $(grep -o '"exchange_pooled_share": [^,]*' "$W/pooled.json")"
else bad "--exchange pooled: $(tail -3 "$W/out")"; fi

# the built-in DLRM over 3 tables and a sequence of 4: 6 slots, both engines agree
DL=(--model dlrm --tables 3 --seq-len 4 --rows 300 --batch 64 --steps 3 --eval-samples 64 --quiet)
expect_ok "dlrm with a sequence (reference)" "$NP" train "${DL[@]}" --engine reference --dump-params "$W/dl.ref"
expect_ok "dlrm with a sequence (starpu)" "$NP" train "${DL[@]}" --dump-params "$W/dl.sp"
matches "dlrm with a sequence: starpu = reference" "$W/dl.sp" "$W/dl.ref"
"$NP" train "${DL[@]}" --print-config >"$W/cfg" 2>&1
grep -qE '^seq-len = 4' "$W/cfg" && ok "print-config shows seq-len" || bad "print-config: $(grep seq "$W/cfg")"

# sequences longer than seq-len: generated with 8, trained with 5
expect_ok "generate sequences" "$NP" generate "$W/s8.bin" --samples 300 --tables 3 --seq-len 8 --rows 300
expect_fail "a longer sequence is refused" 2 "table 0 holds a sequence of" -- \
  "$NP" train --data "bin:$W/s8.bin" --tables 3 --seq-len 5 --rows 300 --batch 64 --steps 2 --quiet
grep -qF "s8.bin: record " "$W/err" && ok "the error names the file and record" || bad "error: $(cat "$W/err")"
expect_ok "the same file trains with seq-len 8" "$NP" train --data "bin:$W/s8.bin" --tables 3 \
  --seq-len 8 --rows 300 --batch 64 --steps 2 --quiet
expect_fail "seq-len out of range" 2 "seq-len" -- "$NP" train --seq-len 5000 --steps 1 --quiet
printf 'output = top\n[top]\nkind = hstu\nin = pooled:0-0\nlen = 5\n' >"$W/len.ini"
expect_fail "hstu len that does not divide the sequence" 2 "is not len (5) positions" -- \
  "$NP" train --model-file "$W/len.ini" --tables 2 --seq-len 6 --dim 8 --steps 1 --quiet

# ---- --model hstu: the generative recommender
HS=(--model hstu --tables 1 --seq-len 12 --seq-negatives 8 --dim 8 --hstu-heads 2 --rows 500
    --batch 64 --steps 6 --eval-samples 128 --sparse-optim rowwise-adagrad --lr 0.1 --quiet)
expect_ok "hstu (reference)" "$NP" train "${HS[@]}" --engine reference --dump-params "$W/h.ref" \
  --metrics-json "$W/h.json"
grep -qE '"eval_hr10": *0?\.[0-9]' "$W/h.json" && ok "metrics hold eval_hr10" || bad "metrics: $(grep -o '"eval_[a-z0-9]*": [^,]*' "$W/h.json")"
grep -qE '"eval_auc": *null' "$W/h.json" && ok "no AUC for a next-item loss" || bad "eval_auc: $(grep -o '"eval_auc": [^,]*' "$W/h.json")"
for R in 1 2 4; do
  if "${MPIRUN[@]}" $R "$NP" train "${HS[@]}" --pipeline nestpipe --windows 2 --chunks 2 \
    --dump-params "$W/h.r$R" >"$W/out" 2>&1; then
    matches "hstu: $R ranks (nestpipe) = reference" "$W/h.r$R" "$W/h.ref"
  else bad "hstu, $R ranks: $(tail -3 "$W/out")"; fi
done
for p in sequential dbp fwp; do
  "${MPIRUN[@]}" 2 "$NP" train "${HS[@]}" --pipeline $p --windows 2 --chunks 2 --dump-params "$W/h.$p" \
    >"$W/out" 2>&1 || bad "hstu, 2 ranks, $p: $(tail -3 "$W/out")"
done
for p in dbp fwp; do
  cmp -s "$W/h.$p" "$W/h.sequential" && ok "hstu: $p = sequential, bit for bit" || bad "hstu: $p differs"
done
cmp -s "$W/h.r2" "$W/h.sequential" && ok "hstu: nestpipe = sequential, bit for bit" || bad "hstu: nestpipe differs"

# a checkpoint at step 3, resumed at 2 ranks: the bytes of the uninterrupted 2-rank run
rm -rf "$W/ck" && mkdir -p "$W/ck"
if "${MPIRUN[@]}" 2 "$NP" train "${HS[@]}" --pipeline sequential --windows 2 --chunks 2 --steps 3 \
  --checkpoint-dir "$W/ck" --checkpoint-every 3 >"$W/out" 2>&1 &&
  "${MPIRUN[@]}" 2 "$NP" train "${HS[@]}" --pipeline sequential --windows 2 --chunks 2 \
    --resume "$W/ck" --dump-params "$W/h.resumed" >"$W/out" 2>&1; then
  cmp -s "$W/h.resumed" "$W/h.sequential" && ok "hstu: resumed at step 3 = uninterrupted, bit for bit" \
    || bad "hstu: the resumed run differs"
else bad "hstu checkpoint/resume: $(tail -3 "$W/out")"; fi

# it learns the planted chain: 2,000 items, 32 clusters; chance is HR@10 = 0.005
LEARN=(--model hstu --tables 1 --seq-len 20 --seq-negatives 16 --dim 16 --rows 2000 --batch 128
       --eval-samples 512 --sparse-optim rowwise-adagrad --lr 0.2)
"$NP" train "${LEARN[@]}" --steps 1 --engine reference >"$W/l1" 2>&1
"$NP" train "${LEARN[@]}" --steps 300 --engine reference >"$W/l300" 2>&1
hr() { sed -n 's/.*eval_hr@10 \([0-9.]*\).*/\1/p' "$1"; }
h1=$(hr "$W/l1") h300=$(hr "$W/l300")
if awk -v a="$h1" -v b="$h300" 'BEGIN { exit !(a != "" && a < 0.03 && b > 0.2) }'; then
  ok "hstu learns: HR@10 $h1 after 1 step, $h300 after 300"
else bad "hstu HR@10: $h1 after 1 step, $h300 after 300: $(tail -2 "$W/l300")"; fi

# MovieLens' ratings.dat: 80 users of 3 to 40 ratings in time order reversed (the reader
# sorts them), movies 1..300; both engines, 2 ranks, and the evaluation ranks every user
awk 'BEGIN { srand(5); for (u = 1; u <= 80; u++) { n = 3 + int(rand() * 38); m = 1 + int(rand() * 300)
  for (k = n; k >= 1; k--) printf "%d::%d::%d::%d\n", u, 1 + (m + 7 * k) % 300, 1 + int(rand() * 5), 1000 + 10 * k } }' \
  >"$W/ratings.dat"
ML=(--model hstu --tables 1 --data "movielens:$W/ratings.dat" --rows 301 --seq-len 16
    --seq-negatives 8 --dim 8 --batch 16 --steps 4 --sparse-optim rowwise-adagrad --lr 0.1 --quiet)
expect_ok "movielens (reference)" "$NP" train "${ML[@]}" --engine reference --dump-params "$W/ml.ref" \
  --metrics-json "$W/ml.json"
grep -qE '"eval_samples": *80[,}]' "$W/ml.json" && ok "movielens: 80 users evaluated" \
  || bad "movielens eval: $(grep -o '"eval_samples": [^,]*' "$W/ml.json")"
if "${MPIRUN[@]}" 2 "$NP" train "${ML[@]}" --dump-params "$W/ml.r2" >"$W/out" 2>&1; then
  matches "movielens: 2 ranks = reference" "$W/ml.r2" "$W/ml.ref"
else bad "movielens, 2 ranks: $(tail -3 "$W/out")"; fi
# converted to the binary format, the same batches: the same model, bit for bit (and the
# evaluation's figures)
expect_ok "convert movielens" "$NP" convert "movielens:$W/ratings.dat" "$W/ml.bin" --seq-len 16
expect_ok "movielens from the binary file" "$NP" train "${ML[@]}" --engine reference \
  --data "bin:$W/ml.bin" --eval-every 2 --dump-params "$W/ml.bin.ref" --metrics-json "$W/mlb.json"
cmp -s "$W/ml.bin.ref" "$W/ml.ref" && ok "movielens: bin = ratings.dat, bit for bit" \
  || bad "movielens: the converted file trains another model"
jh() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['eval_hr10'], m['eval_ndcg10'], m['eval_samples'])" "$1"; }
[[ $(jh "$W/mlb.json") == "$(jh "$W/ml.json")" ]] && ok "movielens: bin evaluates the same" \
  || bad "movielens eval: bin $(jh "$W/mlb.json"), ratings $(jh "$W/ml.json")"
expect_fail "convert movielens needs --seq-len" 2 "needs --seq-len L" -- \
  "$NP" convert "movielens:$W/ratings.dat" "$W/ml2.bin"
[[ ! -e $W/ml2.bin ]] && ok "no file after a refused convert" || bad "a refused convert left $W/ml2.bin"
expect_fail "movielens needs a sequence" 2 "set --seq-len L >= 2" -- \
  "$NP" train --data "movielens:$W/ratings.dat" --tables 1 --steps 1 --quiet
expect_fail "movielens holds out its own" 2 "eval-every: data movielens" -- \
  "$NP" train "${ML[@]}" --eval-every 5
printf '1::2::3::4\n1::2::x::4\n' >"$W/bad.dat"
expect_fail "a bad ratings line" 2 "bad.dat:2: '1::2::x::4' is not UserID::MovieID::Rating::Timestamp" -- \
  "$NP" train "${ML[@]}" --data "movielens:$W/bad.dat"

expect_fail "hstu needs negatives" 2 "model hstu needs a sequence" -- \
  "$NP" train --model hstu --tables 1 --seq-len 8 --steps 1 --quiet
expect_fail "hstu reads one table" 2 "use --tables 1" -- \
  "$NP" train --model hstu --tables 2 --seq-len 8 --seq-negatives 4 --steps 1 --quiet
expect_fail "hstu heads split dim" 2 "hstu-heads: 3 heads do not split dim 16" -- \
  "$NP" train --model hstu --tables 1 --seq-len 8 --seq-negatives 4 --hstu-heads 3 --steps 1 --quiet
expect_fail "loss output needs a loss kind" 2 "loss output: the output node top.1 is a linear layer" -- \
  "$NP" train --loss output --steps 1 --quiet
printf 'output = loss\n[hist]\nkind = slice\nin = pooled\nfrom = 32\nto = 128\n[neg]\nkind = slice\nin = pooled\nto = 32\n[loss]\nkind = nextitem\nin = hist, hist, neg\nlen = 12\n' >"$W/ni.ini"
expect_fail "a nextitem output needs loss output" 2 "loss: the output node loss is a nextitem loss" -- \
  "$NP" train --model-file "$W/ni.ini" --tables 1 --seq-len 12 --seq-negatives 4 --dim 8 --steps 1 --quiet
expect_ok "the same with --loss output" "$NP" train --model-file "$W/ni.ini" --tables 1 --seq-len 12 \
  --seq-negatives 4 --dim 8 --steps 2 --loss output --quiet
expect_fail "negatives need a sequence" 2 "seq-negatives: 4 negatives go before a sequence" -- \
  "$NP" train --seq-negatives 4 --steps 1 --quiet
expect_fail "hstu trains on its own loss" 2 "loss: model hstu is trained on its own loss" -- \
  "$NP" train --model hstu --tables 1 --seq-len 8 --seq-negatives 4 --loss bce --steps 1 --quiet

echo "test_seq: $pass passed, $failed failed"
[[ $failed -eq 0 ]]
