#!/usr/bin/env bash
# Command-line tests of `nestpipe`: exit codes, one-line errors naming what and where,
# Criteo and binary data end to end, --dump-params determinism and --metrics-json keys.
# usage: test_cli.sh PATH/TO/nestpipe
set -u
NP=$1
DOCS=$(cd "$(dirname "$0")/.." && pwd)/docs/cli.md
W=$(mktemp -d /tmp/np_cli_XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

# A Criteo-format file: label, 13 ints, 26 hex categoricals; some fields missing, some
# ints negative. Labels follow I1 so that there is something to learn.
gen_criteo() {
  awk -v n="$1" 'BEGIN {
    srand(7);
    for (i = 0; i < n; i++) {
      x = int(rand() * 20) - 2;
      line = (x > 8 ? 1 : 0);
      for (j = 1; j <= 13; j++) {
        v = (j == 1) ? x : int(rand() * 1000) - 3;
        if (rand() < 0.1) line = line "\t"; else line = line "\t" v;
      }
      for (j = 1; j <= 26; j++) {
        if (rand() < 0.1) line = line "\t";
        else line = line "\t" sprintf("%08x", int(rand() * 4294967295));
      }
      print line;
    }
  }' >"$2"
}

gen_criteo 700 "$W/good.tsv"
SMALL=(--rows 1000 --bottom 13-16-16 --top 16-1 --batch 64 --quiet)

expect_ok "help" "$NP" --help
expect_ok "train help" "$NP" train --help
grep -q -- "--sparse-optim" "$W/out" && ok "train help lists flags" || bad "train help lists flags"
expect_fail "no command" 2 "usage" -- "$NP"
expect_fail "unknown command" 2 "unknown command 'trian' (did you mean 'train'?" -- "$NP" trian
expect_fail "unknown flag" 2 "unknown flag '--bogus' (see nestpipe train --help)" -- "$NP" train --bogus 3
expect_fail "a misspelt flag: did you mean" 2 "unknown flag '--setps' (did you mean --steps?" -- "$NP" train --setps 3
expect_fail "a data path without its kind" 2 "(did you mean criteo:train.txt?)" -- "$NP" train --data train.txt
expect_fail "a binary path without its kind" 2 "(did you mean bin:x.bin?)" -- "$NP" train --eval-data x.bin
expect_fail "a misspelt data word" 2 "(did you mean synthetic?)" -- "$NP" train --data synthtic
expect_fail "a misspelt eval-data word" 2 "(did you mean none?)" -- "$NP" train --eval-data non
expect_ok "convert help" "$NP" convert --help
grep -q "usage: nestpipe convert IN.tsv OUT.bin" "$W/out" && ok "convert --help is convert's" || bad "convert --help: $(head -n 2 "$W/out")"
expect_fail "convert: an unknown flag" 2 "see nestpipe convert --help" -- "$NP" convert a b --bogus
expect_fail "flag without value" 2 "--steps needs a value" -- "$NP" train --steps
expect_fail "bad value" 2 "--batch: bad value 'zero' for batch" -- "$NP" train --batch zero
expect_fail "sizes disagree" 2 "must equal dim 8" -- "$NP" train --dim 8
expect_fail "missing config" 2 "cannot open config file $W/none.ini" -- "$NP" train --config "$W/none.ini"
printf 'steps = 3\nstpes = 4\n' >"$W/typo.ini"
expect_fail "config typo" 2 "$W/typo.ini:2: unknown key 'stpes' (did you mean 'steps'?" -- "$NP" train --config "$W/typo.ini"
expect_fail "missing data" 2 "$W/nope.tsv" -- "$NP" train --data "criteo:$W/nope.tsv"
expect_fail "criteo needs 26 tables" 2 "26 categorical" -- "$NP" train --data "criteo:$W/good.tsv" --tables 8
head -c 100 /dev/urandom >"$W/junk.bin"
expect_fail "foreign binary" 2 "$W/junk.bin" -- "$NP" train --data "bin:$W/junk.bin" "${SMALL[@]}"
expect_fail "unknown scheduler" 2 "unknown StarPU policy 'fastest'" -- "$NP" train --sched fastest --steps 1
grep -q "modular-\* policies (STARPU_SCHED=help lists them))$" "$W/err" &&
  ok "unknown scheduler: the whole list, not cut off" || bad "scheduler list: $(cat "$W/err")"
expect_fail "a misspelt flag is named, not the value after it" 2 "unknown flag '--explain-placementx'" -- "$NP" train --explain-placementx --rows 2000
expect_fail "lr past its limit says the limit" 2 "expected a number > 0 and <= 1e6" -- "$NP" train --lr 1e9
# GPUs (docs/gpu.md): a count CUDA cannot serve, a pin with no GPU, a bad place spec
expect_fail "more GPUs than there are" 2 "gpus: 64 asked for, but" -- "$NP" train --gpus 64 --steps 1
expect_fail "a pin to cuda without a GPU" 2 "place: dense=cuda, but this rank runs no CUDA worker" -- "$NP" train --gpus 0 --place dense=cuda --steps 1
expect_fail "a bad place spec" 2 "bad value 'dense=gpu' for place" -- "$NP" train --place dense=gpu
expect_fail "the reference has no GPU" 2 "place: the reference trainer runs on the CPU only" -- "$NP" train --engine reference --place all=cuda
# one set of keys: every key of docs/cli.md's table is a flag in `train --help`, and every
# flag there is a key of the table (--config and --help aside)
"$NP" train --help >"$W/help.txt"
missing=""
for k in $(grep -o '^| `[a-z0-9-]*`' "$DOCS" | tr -d '|` '); do
  grep -q -- "--$k\b" "$W/help.txt" || missing+=" --$k"
done
for f in $(grep -o -- '--[a-z0-9-]*' "$W/help.txt" | sort -u); do
  [[ $f == --config || $f == --help || $f == --print-config ]] && continue
  grep -q "^| \`${f#--}\`" "$DOCS" || missing+=" $f(docs)"
done
[[ -z $missing ]] && ok "train --help and docs/cli.md list the same keys" ||
  bad "keys missing from train --help (or from docs/cli.md):$missing"
# the same defaults: docs/cli.md's default column is what `train --print-config` prints
# (the key table's defaults); "off" is 0 and an empty cell an unset key
"$NP" train --print-config | sed 's/^sched = lws # default$/sched = lws/' >"$W/config.ini"
wrong=""
while IFS='|' read -r _ key dflt _; do
  key=$(tr -d '` ' <<<"$key"); dflt=$(tr -d '`' <<<"$dflt" | sed 's/^ *//; s/ *$//')
  [[ $dflt == off ]] && dflt=0
  if [[ -z $dflt ]]; then
    grep -qx "# $key =" "$W/config.ini" || wrong+=" $key(unset)"
  else
    grep -qxF "$key = $dflt" "$W/config.ini" || wrong+=" $key=$dflt"
  fi
done < <(grep '^| `[a-z0-9-]*`' "$DOCS")
[[ -z $wrong ]] && ok "docs/cli.md's defaults are the key table's" ||
  bad "docs/cli.md defaults differ from train --print-config:$wrong"
# --print-config writes a config file that reads back to the same configuration
"$NP" train --print-config --batch 64 --rows 7 --lr 0.05 --pipeline nestpipe >"$W/c1.ini"
"$NP" train --config "$W/c1.ini" --print-config >"$W/c2.ini"
# (the policy's line ends with where it came from: the default, then c1.ini)
grep -qx "sched = lws # default" "$W/c1.ini" && grep -qx "sched = lws # $W/c1.ini:[0-9]*" "$W/c2.ini" &&
  sed -i 's/^sched = lws # .*/sched = lws/' "$W/c1.ini" "$W/c2.ini" &&
cmp -s "$W/c1.ini" "$W/c2.ini" && grep -qx "lr = 0.05" "$W/c1.ini" &&
  ok "--print-config reads back to itself" || bad "--print-config round trip: $(diff "$W/c1.ini" "$W/c2.ini" | head -3)"
# STARPU_SCHED: checked like --sched, used, and named in the metrics; --quiet silences
# StarPU's calibration notices too
expect_fail "STARPU_SCHED unknown" 2 "unknown StarPU policy 'nosuch'" -- env STARPU_SCHED=nosuch "$NP" train --steps 1
env -u STARPU_SILENT STARPU_HOME="$W/sphome" STARPU_SCHED=dmda "$NP" train --steps 3 "${SMALL[@]}" \
  --metrics-json "$W/dmda.json" >"$W/out" 2>"$W/err"
grep -q '"sched": "dmda"' "$W/dmda.json" && ok "STARPU_SCHED=dmda runs and is reported" ||
  bad "STARPU_SCHED: $(grep '"sched"' "$W/dmda.json")"
[[ ! -s $W/err && ! -s $W/out ]] && ok "--quiet: nothing printed, StarPU's notices included" ||
  bad "--quiet printed: $(head -c 300 "$W/err")"
# the policy that ran and where it came from: done line, metrics, trace, --print-config; the
# environment over a flag or a config file is a warning line
"$NP" train --steps 2 --rows 1000 --bottom 13-16-16 --top 16-1 --batch 64 --sched eager --metrics-json "$W/s1.json" --trace "$W/s1.trace" \
  >"$W/out" 2>"$W/err"
grep -q "^done: .*  sched eager (--sched)$" "$W/out" && ok "done line: the policy and its origin" ||
  bad "done line: $(grep done: "$W/out")"
grep -q '"sched_from": "--sched"' "$W/s1.json" && ok "metrics: sched_from" || bad "metrics: $(grep sched "$W/s1.json")"
"$NP" trace report "$W/s1.trace" >"$W/rep" 2>&1
grep -q "^run: sched eager (--sched)  pipeline dbp  windows 1  chunks 4$" "$W/rep" &&
  ok "trace: the policy and its origin" || bad "trace report: $(head -n 1 "$W/rep")"
printf 'sched = dmda\n' >"$W/s.ini"
STARPU_SCHED=prio "$NP" train --steps 2 "${SMALL[@]}" --config "$W/s.ini" --metrics-json "$W/s2.json" >"$W/out" 2>"$W/err"
[[ $(wc -l <"$W/err") == 1 ]] &&
  grep -qx "nestpipe: warning: STARPU_SCHED=prio overrides sched dmda from $W/s.ini:1; unset STARPU_SCHED to run dmda" "$W/err" &&
  grep -q "\"sched_from\": \"STARPU_SCHED, over dmda from $W/s.ini:1\"" "$W/s2.json" && grep -q '"sched": "prio"' "$W/s2.json" &&
  ok "STARPU_SCHED over a config file: one warning line, named in the metrics" ||
  bad "STARPU_SCHED over --config: $(cat "$W/err") $(grep sched "$W/s2.json")"
STARPU_SCHED=prio "$NP" train --config "$W/s.ini" --print-config 2>"$W/err" | grep -qx "sched = prio # STARPU_SCHED, over dmda from $W/s.ini:1" &&
  ok "--print-config: the policy's origin" || bad "--print-config: $(STARPU_SCHED=prio "$NP" train --config "$W/s.ini" --print-config | grep sched)"
# every command answers --help
for cmd in train convert generate compare trace predict export; do
  expect_ok "$cmd --help" "$NP" $cmd --help
  grep -q "usage" "$W/out" && ok "$cmd --help prints a usage" || bad "$cmd --help: $(head -n 2 "$W/out")"
done
# generate: the synthetic stream in a file trains the same model as the stream itself
GF=(--tables 3 --rows 500 --bottom 5-16-8 --top 16-1 --dim 8 --batch 64 --eval-every 7
    --eval-samples 100 --steps 15 --seed 9 --hot 3 --groups 4 --zipf 0.8 --quiet)
expect_ok "generate" "$NP" generate "$W/gen.bin" --samples 1200 "${GF[@]}"
[[ $(stat -c %s "$W/gen.bin") -gt 40 ]] && ok "generate wrote a file" || bad "generate: no file"
"$NP" train "${GF[@]}" --dump-params "$W/gen_syn.params" --metrics-json "$W/gen_syn.json" &&
  "$NP" train "${GF[@]}" --data "bin:$W/gen.bin" --dump-params "$W/gen_bin.params" \
    --metrics-json "$W/gen_bin.json" || bad "generate: a training run failed"
cmp -s "$W/gen_syn.params" "$W/gen_bin.params" &&
  ok "generate: bin:FILE trains the synthetic run's model, bit for bit" ||
  bad "generate: the models differ"
[[ $(grep -o '"eval_auc": [^,]*' "$W/gen_syn.json") == $(grep -o '"eval_auc": [^,]*' "$W/gen_bin.json") ]] &&
  ok "generate: the same held-out records" || bad "generate: eval differs"
"$NP" train "${GF[@]}" --seed 10 --dump-params "$W/gen_s10.params" &&
  ! cmp -s "$W/gen_s10.params" "$W/gen_bin.params" && ok "generate: the check can fail (another seed differs)" ||
  bad "generate: another seed gave the same model"
# the same without latent groups: the generator's teacher-weight cache on
GF0=(--tables 3 --rows 500,9000,40 --bottom 5-16-8 --top 16-1 --dim 8 --batch 64 --eval-every 7
     --eval-samples 100 --steps 15 --seed 4 --hot 3 --quiet)
"$NP" generate "$W/gen0.bin" --samples 1200 "${GF0[@]}" >/dev/null &&
  "$NP" train "${GF0[@]}" --dump-params "$W/gen0_syn.params" &&
  "$NP" train "${GF0[@]}" --data "bin:$W/gen0.bin" --dump-params "$W/gen0_bin.params" &&
  cmp -s "$W/gen0_syn.params" "$W/gen0_bin.params" &&
  ok "generate without groups: bin:FILE trains the synthetic run's model, bit for bit" ||
  bad "generate without groups: the models differ or a run failed"
# only the data's rules apply: a model too big for this machine or --steps 0 is no reason
expect_ok "generate ignores the model's memory" "$NP" generate "$W/big.bin" --samples 3 \
  --tables 2 --rows 1000000000 --zipf 0 --dim 64 --bottom 13-64 --steps 0
# a Criteo TSV sample: 40 fields a line, which the Criteo reader reads whole
expect_ok "generate a TSV sample" "$NP" generate "$W/sample.txt" --samples 300
awk -F'\t' 'NF != 40 || $1 !~ /^[01]$/ { bad++ } END { exit bad || NR != 300 }' "$W/sample.txt" &&
  ok "generate .txt: 300 Criteo lines of 40 fields" || bad "generate .txt: $(head -n 1 "$W/sample.txt")"
expect_ok "the TSV sample converts" "$NP" convert "$W/sample.txt" "$W/sample.bin"
grep -q "converted 300 records" "$W/out" && ok "every generated line is a valid Criteo record" || bad "convert sample: $(cat "$W/out")"
expect_fail "generate --format tsv needs Criteo's layout" 2 "writes Criteo's layout (13 dense features, 26 tables" \
  -- "$NP" generate "$W/s4.txt" --samples 5 --tables 4
expect_fail "generate --format csv" 2 "--format: bin or tsv, got csv" -- "$NP" generate "$W/s.csv" --samples 5 --format csv
expect_fail "generate without OUT" 2 "generate needs OUT.bin" -- "$NP" generate --samples 5
expect_fail "generate without --samples" 2 "needs --samples N" -- "$NP" generate "$W/g.bin"
expect_fail "generate --samples 0" 2 "--samples: need a whole number >= 1, got 0" -- "$NP" generate "$W/g.bin" --samples 0
expect_fail "generate --samples x" 2 "got x" -- "$NP" generate "$W/g.bin" --samples x
expect_fail "generate from a file" 2 "generate writes synthetic data" -- "$NP" generate "$W/g.bin" --samples 5 --data "bin:$W/gen.bin"
expect_fail "generate a bad flag" 2 "unknown flag '--bogus'" -- "$NP" generate "$W/g.bin" --samples 5 --bogus 1
expect_fail "generate into a missing folder" 2 "$W/nodir/g.bin" -- "$NP" generate "$W/nodir/g.bin" --samples 5
expect_fail "generate into a folder" 2 "generate $W: is a folder, not a file" -- "$NP" generate "$W" --samples 5
expect_fail "generate a row list of the wrong length" 2 "rows: 2 row counts for 3 tables" -- "$NP" generate "$W/g.bin" --samples 5 --tables 3 --rows 10,20
[[ ! -e $W/g.bin ]] && ok "failed generate leaves no file" || bad "failed generate left $W/g.bin"
# a write that fails midway (the file size limit): exit 2, and no file nor temporary left
( ulimit -f 64; trap '' XFSZ; "$NP" generate "$W/lim.bin" --samples 5000 "${GF[@]}" ) >"$W/out" 2>"$W/err"
rc=$?
[[ $rc == 2 ]] && grep -q "lim.bin" "$W/err" && ok "generate: a write failing midway exits 2" ||
  bad "generate under a file size limit: exit $rc: $(cat "$W/err")"
ls "$W"/lim.bin* >/dev/null 2>&1 && bad "generate left $(ls "$W"/lim.bin*)" || ok "generate: no file or temporary left after a failed write"
# output paths are checked before the first step: a run that could not save fails at once
start=$SECONDS
expect_fail "dump-params into a missing folder" 2 "--dump-params $W/nodir/m: the folder $W/nodir does not exist" \
  -- "$NP" train --steps 100000 --dump-params "$W/nodir/m"
expect_fail "metrics-json onto a folder" 2 "--metrics-json $W: is a folder, not a file" \
  -- "$NP" train --steps 100000 --metrics-json "$W"
expect_fail "trace into a missing folder" 2 "--trace $W/nodir/t.json: the folder $W/nodir does not exist" \
  -- "$NP" train --steps 100000 --trace "$W/nodir/t.json"
((SECONDS - start < 20)) && ok "bad output paths fail before training" || bad "bad output paths took $((SECONDS - start)) s"
# inline comments in a config file, with '#' or ';'
printf 'steps = 2 # two steps\nlr = 0.05 ; a comment\n' >"$W/inline.ini"
expect_ok "inline comments" "$NP" train --config "$W/inline.ini" "${SMALL[@]}" --metrics-json "$W/inline.json"
grep -q '"steps": 2,' "$W/inline.json" && grep -q '"lr": 0.05' "$W/inline.json" &&
  ok "inline comments: the values before them" || bad "inline comments: $(grep -E '"steps"|"lr"' "$W/inline.json")"
expect_fail "windows range" 2 "windows" -- "$NP" train --windows 0 --steps 1
expect_fail "cluster value" 2 "none or keys" -- "$NP" train --cluster maybe --steps 1
expect_fail "comm value" 2 "mpi or nccl" -- "$NP" train --comm gloo --steps 1
# --comm nccl where NCCL cannot serve: one line naming the key (a CPU-only build here; the
# CUDA flavour's checks need the device count: tests/test_comm_backend.c)
if "$NP" --version | grep -q '^cuda: not built'; then
  expect_fail "comm nccl on a CPU-only build" 2 "comm: nccl needs the CUDA flavour (docs/gpu.md)" \
    -- "$NP" train --comm nccl --steps 1
fi
expect_fail "too many pieces" 2 "windows x chunks <= 64" -- "$NP" train --windows 32 --chunks 4 --steps 1
expect_fail "reference has no pipeline" 2 "reference trainer has no pipeline" -- "$NP" train --engine reference --pipeline dbp --steps 1
expect_fail "trace needs starpu" 2 "reference engine runs no tasks" -- "$NP" train --engine reference --trace "$W/t.json"



# Criteo with missing fields trains to the end of the data, and reports a real eval
expect_ok "criteo trains" "$NP" train --data "criteo:$W/good.tsv" --steps 0 "${SMALL[@]}" \
  --dump-params "$W/tsv.params" --metrics-json "$W/tsv.json"
# data that ends before --steps: a warning --quiet does not hide, and the metrics say so
expect_ok "criteo ends before --steps" "$NP" train --data "criteo:$W/good.tsv" --steps 1000 \
  "${SMALL[@]}" --metrics-json "$W/short.json"
grep -q "nestpipe: warning: the training data ended after [0-9]* steps" "$W/err" &&
  grep -q '"data_ended": true' "$W/short.json" && ok "data ended early: a warning under --quiet" ||
  bad "data ended early: '$(cat "$W/err")'"
for k in steps global_batch samples_per_s train_loss eval_logloss eval_auc engine pipeline ranks; do
  grep -q "\"$k\"" "$W/tsv.json" 2>/dev/null || bad "metrics key $k"
done
grep -q '"steps": 9,' "$W/tsv.json" && ok "criteo: 630 train records = 9 steps of 64" \
  || bad "criteo step count: $(grep steps "$W/tsv.json")"

# A malformed line stops training with file:line:column and exit 2...
cp "$W/good.tsv" "$W/bad.tsv"
sed -i '5s/^\([01]\)\t[^\t]*/\1\t12x/' "$W/bad.tsv"
expect_fail "malformed line" 2 "$W/bad.tsv:5:3:" -- "$NP" train --data "criteo:$W/bad.tsv" --steps 0 "${SMALL[@]}"
printf '1\t2\t3\n' >>"$W/bad.tsv"
# ...and --skip-bad-lines skips and counts such lines
"$NP" train --data "criteo:$W/bad.tsv" --steps 0 --skip-bad-lines --rows 1000 --bottom 13-16-16 \
  --top 16-1 --batch 64 >"$W/out" 2>"$W/err"
if [[ $? -eq 0 ]] && grep -q "skipped 2 malformed lines" "$W/out"; then ok "skip-bad-lines"; else
  bad "skip-bad-lines: $(cat "$W/out" "$W/err")"; fi

# The binary format gives the very same model as the TSV it came from
expect_ok "convert" "$NP" convert "$W/good.tsv" "$W/good.bin"
expect_ok "bin trains" "$NP" train --data "bin:$W/good.bin" --steps 0 "${SMALL[@]}" --dump-params "$W/bin.params"
cmp -s "$W/tsv.params" "$W/bin.params" && ok "bin == tsv params" || bad "bin and tsv params differ"
# --steps 0 over two passes: the total from the header (630 training records a pass, 19
# steps of 64), the epoch, and no word about the data ending, which was asked for
"$NP" train --data "bin:$W/good.bin" --steps 0 --epochs 2 --rows 1000 --bottom 13-16-16 \
  --top 16-1 --batch 64 --log-every 5 >"$W/out" 2>"$W/err"
grep -q "^step 10/19  epoch 2/2 " "$W/out" && grep -q "^step 19/19  epoch 2/2  train_loss" "$W/out" &&
  ! grep -q "ended" "$W/err" && ok "file data: step/total and epoch e/E, no data-ended line" ||
  bad "file progress: $(grep '^step' "$W/out" | head -n 3) $(cat "$W/err")"
# batches of 63: a pass is exactly 10 steps, and step 10 still belongs to the first
"$NP" train --data "bin:$W/good.bin" --steps 0 --epochs 2 --rows 1000 --bottom 13-16-16 \
  --top 16-1 --batch 63 --log-every 10 >"$W/out" 2>"$W/err"
grep -q "^step 10/20  epoch 1/2 " "$W/out" && grep -q "^step 20/20  epoch 2/2  train_loss" "$W/out" &&
  ok "file data: the step that ends a pass is in it" || bad "epoch boundary: $(grep '^step' "$W/out")"
expect_fail "convert malformed" 2 "$W/bad.tsv:5:3:" -- "$NP" convert "$W/bad.tsv" "$W/bad.bin"
[[ ! -e "$W/bad.bin" ]] && ok "failed convert leaves no file" || bad "failed convert left $W/bad.bin"

# Same config, same bytes
expect_ok "synthetic run 1" "$NP" train --steps 5 "${SMALL[@]}" --sparse-optim rowwise-adagrad --dump-params "$W/s1"
expect_ok "synthetic run 2" "$NP" train --steps 5 "${SMALL[@]}" --sparse-optim rowwise-adagrad --dump-params "$W/s2"
cmp -s "$W/s1" "$W/s2" && ok "dump-params deterministic" || bad "dump-params differ between runs"
expect_ok "synthetic run 3" "$NP" train --steps 5 "${SMALL[@]}" --seed 7 --dump-params "$W/s3"
cmp -s "$W/s1" "$W/s3" && bad "other seed gave the same model" || ok "seed changes the model"

# The StarPU engine (the default) trains the model the reference trainer trains
expect_ok "starpu run" "$NP" train --steps 20 "${SMALL[@]}" --sparse-optim rowwise-adagrad \
  --dump-params "$W/sp.params" --trace "$W/trace.json" --metrics-json "$W/sp.json"
expect_ok "reference run" "$NP" train --engine reference --steps 20 "${SMALL[@]}" \
  --sparse-optim rowwise-adagrad --dump-params "$W/ref.params"
expect_ok "starpu == reference within rel 1e-4" "$NP" compare "$W/sp.params" "$W/ref.params" --rtol 1e-4 --atol 1e-5
grep -q '"traceEvents"' "$W/trace.json" && ok "trace written" || bad "no trace"
nd=$(grep -o '"cat": *"data"' "$W/trace.json" | wc -l)
((nd == 20)) && grep -q '"driver"' "$W/trace.json" &&
  ok "the driver's batch reads are in the trace (20 data tasks on a driver row)" ||
  bad "driver rows: $nd data tasks"
"$NP" trace report "$W/trace.json" --from-batch 15 >"$W/rep.txt" 2>"$W/err" &&
  grep -q "(5 batches ended in the" "$W/rep.txt" && ok "trace report --from-batch: the window where batches 15..19 ended" ||
  bad "trace report --from-batch: $(head -n 3 "$W/rep.txt") $(cat "$W/err")"
expect_fail "trace report of a missing file" 2 "$W/none.json" -- "$NP" trace report "$W/none.json"
expect_fail "trace report past the last batch" 2 "no task of batches 1000 on; the trace holds batches 0 to 19" \
  -- "$NP" trace report "$W/trace.json" --from-batch 1000
# a window keeps the tasks of later batches that ran in it (dbp prefetches up to 4 ahead)
expect_ok "trace svg of batches 15-16" "$NP" trace svg "$W/trace.json" "$W/part.svg" --from-batch 15 --to-batch 16
grep -q '>b15[<,-]' "$W/part.svg" && ! grep -q '>b1[0-4][<,-]' "$W/part.svg" &&
  ok "trace svg --from-batch/--to-batch draws the window where batches 15-16 ended" || bad "trace svg batch range"
expect_ok "trace paje of batches 0-1" "$NP" trace paje "$W/trace.json" "$W/part.paje" --to-batch 1
grep -q 'ST_Task V_fwd 1 0 "top.0"$' "$W/part.paje" &&
  ! grep -qE 'ST_Task V_(pool_fwd|fwd|loss_fwd|loss_bwd|bwd|pool_bwd) ([4-9]|1[0-9]) ' "$W/part.paje" &&
  ok "paje keeps batch, window and layer, and the window of batches 0-1" || bad "paje batch/window/layer fields"
expect_fail "trace: a window by batches and milliseconds" 2 "by batches or by milliseconds, not both" \
  -- "$NP" trace report "$W/trace.json" --from-batch 2 --to-ms 5
expect_fail "trace: --to-ms before --from-ms" 2 "--to-ms must come after --from-ms" \
  -- "$NP" trace report "$W/trace.json" --from-ms 5 --to-ms 2
expect_fail "trace: a window past the trace" 2 "no task between 1000000.000 and" \
  -- "$NP" trace report "$W/trace.json" --from-ms 1e6
# the window of a nestpipe trace is the whole trace restricted to it (an independent reference)
expect_ok "nestpipe traced run" "$NP" train --steps 12 "${SMALL[@]}" --pipeline nestpipe --windows 2 \
  --trace "$W/np.json"
"$NP" trace report "$W/np.json" --json --from-batch 4 --to-batch 8 >"$W/win.json" 2>"$W/err" &&
  python3 "$(dirname "$0")/trace_window_ref.py" "$W/np.json" "$W/win.json" batches 4 8 >"$W/out" 2>&1 &&
  ok "trace report of batches 4-8 equals the nestpipe trace restricted to their window" ||
  bad "window report: $(tail -n 3 "$W/out") $(cat "$W/err")"
# a window by time cuts tasks at both ends: the 40%..70% of the run
read -r A B < <(python3 -c "import json,sys; t=[(e['ts'],e['ts']+e['dur']) for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph')=='X']; lo=min(a for a,_ in t); hi=max(b for _,b in t); print((lo+0.4*(hi-lo))/1e3, (lo+0.7*(hi-lo))/1e3)" "$W/np.json")
"$NP" trace report "$W/np.json" --json --from-ms "$A" --to-ms "$B" >"$W/win.json" 2>"$W/err" &&
  python3 "$(dirname "$0")/trace_window_ref.py" "$W/np.json" "$W/win.json" ms "$A" "$B" >"$W/out" 2>&1 &&
  ok "trace report of $A-$B ms equals the nestpipe trace restricted to it" ||
  bad "time window report: $(tail -n 3 "$W/out") $(cat "$W/err")"
"$NP" trace report "$W/np.json" --from-ms "$A" --to-ms "$B" >"$W/rep.txt" 2>"$W/err" &&
  grep -q "^window [0-9.]* to [0-9.]* ms of the trace" "$W/rep.txt" && ok "trace report --from-ms/--to-ms" ||
  bad "trace report --from-ms: $(head -n 3 "$W/rep.txt") $(cat "$W/err")"
grep -q "exchange none: one rank" "$W/rep.txt" && ok "one rank reports no exchange" ||
  bad "one-rank exchange: $(grep exchange "$W/rep.txt")"
grep -q '"pipeline": "dbp"' "$W/sp.json" && ok "metrics name the pipeline (auto: dbp on one rank)" ||
  bad "metrics pipeline: $(grep -o '"pipeline": "[a-z]*"' "$W/sp.json")"
tr -d ' \n' <"$W/sp.json" | grep -q '"bytes_exchanged":{"allreduce":0,"grads":0,"keys":0,"rows":0}' &&
  ok "one rank reports no bytes exchanged" || bad "one rank reports bytes: $(grep -A5 bytes_ex "$W/sp.json")"
grep -q '"dense_kernels": "oneDNN' "$W/sp.json" && ok "metrics name the dense kernels" ||
  bad "metrics lack dense_kernels"
"$NP" compare "$W/sp.params" "$W/tsv.params" >/dev/null 2>&1
[[ $? -eq 1 ]] && ok "compare tells different models apart" || bad "compare missed a difference"

# --explain-placement: hwloc's plan on a clean environment, the user's when STARPU_NCPU is set
env -u STARPU_NCPU -u STARPU_NCPUS -u STARPU_WORKERS_CPUID -u STARPU_WORKERS_NOBIND \
  "$NP" train --steps 2 "${SMALL[@]}" --explain-placement --metrics-json "$W/pl.json" >"$W/out" 2>"$W/err"
grep -q "nestpipe: placement: rank 0: host of .* cores.*placed by hwloc; [1-4] CPU workers\? on cores 0-" "$W/err" &&
  ok "explain-placement: hwloc binds the workers of a lone rank" || bad "explain-placement: $(cat "$W/err")"
grep -q '"placement": "rank 0: host of' "$W/pl.json" && ok "metrics carry the placement" ||
  bad "metrics lack the placement"
STARPU_NCPU=1 "$NP" train --steps 2 "${SMALL[@]}" --explain-placement >"$W/out" 2>"$W/err"
grep -q "placed by the environment (STARPU_NCPU)" "$W/err" && ok "explain-placement: STARPU_NCPU wins" ||
  bad "explain-placement with STARPU_NCPU: $(cat "$W/err")"

# --precision bf16: where the CPU has avx512_bf16, one chunk gives the reference's bytes and
# the model stays within a loose tolerance of fp32's; elsewhere a one-line refusal, exit 2
BF=(--steps 20 --rows 1000 --bottom 13-64-16 --top 64-1 --batch 256 --quiet --precision bf16)
if "$NP" --version | grep -q 'avx512_core_\(bf16\|amx\)'; then
  expect_ok "bf16 run" "$NP" train "${BF[@]}" --chunks 1 --dump-params "$W/bf.params" \
    --metrics-json "$W/bf.json"
  expect_ok "bf16 reference run" "$NP" train "${BF[@]}" --engine reference --dump-params "$W/bfref.params"
  cmp -s "$W/bf.params" "$W/bfref.params" && ok "bf16: one chunk = the reference (bytes)" ||
    bad "bf16: one chunk differs from the reference"
  expect_ok "fp32 run" "$NP" train "${BF[@]}" --precision fp32 --chunks 1 --dump-params "$W/fp.params"
  cmp -s "$W/bf.params" "$W/fp.params" && bad "bf16 gave fp32's bytes: not in effect" ||
    ok "bf16 changes the arithmetic"
  "$NP" compare "$W/bf.params" "$W/fp.params" --rtol 0.05 --atol 2e-3 >"$W/cmp" &&
    ok "bf16 stays within rel 5e-2 / abs 2e-3 of fp32 after 20 steps" ||
    bad "bf16 drifts from fp32: $(grep -m2 OUT "$W/cmp")"
  grep -q '"precision": "bf16"' "$W/bf.json" && ok "metrics name the precision" || bad "metrics precision"
else
  expect_fail "bf16 without avx512_bf16" 2 "bf16 needs a CPU with avx512_bf16" -- "$NP" train "${BF[@]}"
fi
DNNL_MAX_CPU_ISA=AVX2 expect_fail "bf16 refused on an avx2 CPU" 2 "bf16 needs a CPU with avx512_bf16, and this one runs avx2" -- "$NP" train "${BF[@]}"

# --init-params: a dump loads back (one step from it on both engines gives one model), and a
# dump of another shape or a bad file is one line naming what, exit 2
expect_ok "init-params: reference" "$NP" train --engine reference --steps 3 "${SMALL[@]}" \
  --init-params "$W/ref.params" --dump-params "$W/init_ref.params"
expect_ok "init-params: starpu" "$NP" train --steps 3 "${SMALL[@]}" --init-params "$W/ref.params" \
  --dump-params "$W/init_sp.params"
expect_ok "init-params: both engines from one dump agree" "$NP" compare "$W/init_sp.params" \
  "$W/init_ref.params"
"$NP" compare "$W/init_ref.params" "$W/ref.params" >/dev/null 2>&1
[[ $? -eq 1 ]] && ok "init-params: training went on from the dump" || bad "init-params: no change"
expect_fail "init-params: a dump of another shape" 2 "in the file but cross.0.weight" -- \
  "$NP" train --model dcnv2 --steps 1 "${SMALL[@]}" --init-params "$W/ref.params"
head -c 100 "$W/ref.params" >"$W/trunc.params"
expect_fail "init-params: a truncated dump" 2 "tensor 0 (bottom.0.weight): more values than the 45 bytes left" -- \
  "$NP" train --steps 1 "${SMALL[@]}" --init-params "$W/trunc.params"
expect_fail "init-params: a missing file" 2 "cannot open" -- \
  "$NP" train --steps 1 "${SMALL[@]}" --init-params "$W/none.params"

# --eval-data, --log-json and predict: training evaluates every record of the eval file and
# logs one JSON line per step and one at the end; predict on the same file with the dumped
# model gives the same figures (the same scores, so to the last printed digit)
gen_criteo 300 "$W/eval.tsv"
expect_ok "train --eval-data --log-json" "$NP" train "${SMALL[@]}" --data "criteo:$W/good.tsv" \
  --steps 0 --eval-data "criteo:$W/eval.tsv" --log-json "$W/log.jsonl" --dump-params "$W/ev.params"
lines=$(wc -l <"$W/log.jsonl")
# 700 records, none held out: 10 full batches of 64, then the end line
[[ $lines -eq 11 ]] && grep -q '^{"step": 10, "train_loss": .*"eval_samples": 300,' "$W/log.jsonl" &&
  [[ $(grep -c '"loss": [0-9.]*, "samples_per_s": [0-9.e+]*, "seconds"' "$W/log.jsonl") -eq 10 ]] &&
  ok "--log-json: a line per step and the evaluation of all 300 eval records" ||
  bad "--log-json: $lines lines: $(tail -n 2 "$W/log.jsonl")"
want=$(tail -n 1 "$W/log.jsonl" | sed 's/.*"eval_logloss": \([^,]*\), "eval_auc": \([^}]*\)}/logloss \1  auc \2/')
expect_ok "predict" "$NP" predict --params "$W/ev.params" --data "criteo:$W/eval.tsv" \
  --out "$W/scores.txt" --rows 1000 --bottom 13-16-16 --top 16-1
got=$(sed 's/^predict: [0-9]* records  //' "$W/err")
[[ $(wc -l <"$W/scores.txt") -eq 300 && "$got" == "$want" ]] &&
  ok "predict reproduces the training run's evaluation ($got)" ||
  bad "predict: '$got', training logged '$want'"
expect_fail "predict: a model of another shape" 2 "predict --params $W/ev.params: tensor" -- \
  "$NP" predict --params "$W/ev.params" --data "criteo:$W/eval.tsv" --out "$W/s2.txt"
{ cat "$W/eval.tsv"; echo "a bad line"; } >"$W/eval_bad.tsv" # fails after 300 scores
expect_fail "predict: a bad record ends it" 2 "eval_bad.tsv:301" -- \
  "$NP" predict --params "$W/ev.params" --data "criteo:$W/eval_bad.tsv" --out "$W/s2.txt" \
  --rows 1000 --bottom 13-16-16 --top 16-1
if ls "$W" | grep -q '^s2.txt'; then bad "a failed predict left $(ls "$W" | grep '^s2.txt')"; else ok "a failed predict leaves no file"; fi
expect_fail "predict: no --params" 2 "predict needs --params" -- \
  "$NP" predict --data "criteo:$W/eval.tsv" --out "$W/s3.txt"
expect_fail "predict: synthetic data" 2 "needs --data criteo:PATH or bin:PATH" -- \
  "$NP" predict --params "$W/ev.params" --out "$W/s3.txt"
# --eval-interval: the evaluation after step 4 of an 8-step run is the final one of a 4-step
# run, bit for bit (JSON lines to 9 digits), and the trained model does not change
expect_ok "eval-interval, 4 steps" "$NP" train "${SMALL[@]}" --steps 4 --log-json "$W/e4.jsonl"
expect_ok "eval-interval, 8 steps" "$NP" train "${SMALL[@]}" --steps 8 --eval-interval 4 \
  --log-json "$W/e8.jsonl" --dump-params "$W/e8.params"
expect_ok "no eval-interval, 8 steps" "$NP" train "${SMALL[@]}" --steps 8 --dump-params "$W/n8.params"
a=$(sed -n 's/^{"step": 4, \("eval_samples".*\)}/\1/p' "$W/e8.jsonl")
b=$(sed -n 's/^{"step": 4, .*\("eval_samples".*\)}/\1/p' "$W/e4.jsonl")
[[ -n $a && $a == "$b" && $(grep -c eval_auc "$W/e8.jsonl") -eq 2 ]] &&
  ok "eval-interval: step 4's evaluation is the 4-step run's" || bad "eval-interval: '$a' vs '$b'"
cmp -s "$W/e8.params" "$W/n8.params" && ok "eval-interval leaves the model alone" ||
  bad "eval-interval changed the trained model"
# --epochs: 3 passes over a 700-record file train exactly as one pass over the file three
# times over (the held-out rule restarts with each pass, and 700 is a multiple of 10)
cat "$W/good.tsv" "$W/good.tsv" "$W/good.tsv" >"$W/good3.tsv"
expect_ok "epochs 3" "$NP" train "${SMALL[@]}" --data "criteo:$W/good.tsv" --steps 0 --epochs 3 \
  --dump-params "$W/ep3.params" --metrics-json "$W/ep3.json"
expect_ok "one pass over the file thrice" "$NP" train "${SMALL[@]}" --data "criteo:$W/good3.tsv" \
  --steps 0 --dump-params "$W/cat3.params"
# 630 training records a pass (70 held out): 1890 / 64 = 29 full batches
cmp -s "$W/ep3.params" "$W/cat3.params" && grep -q '"steps": 29,' "$W/ep3.json" &&
  ok "--epochs 3: the same bytes as the file three times, 29 steps" ||
  bad "--epochs 3: $(grep -o '"steps": [0-9]*' "$W/ep3.json")"
# --shuffle-buffer: a pool of 1 is file order; a pool of 100 trains on another order of the
# same records (as many steps), the same way every time, and a run resumed from a
# checkpoint inside it continues the same order (the pool is rebuilt by the replay)
SH=("${SMALL[@]}" --data "criteo:$W/good.tsv")
expect_ok "shuffle-buffer 1" "$NP" train "${SH[@]}" --steps 0 --shuffle-buffer 1 --dump-params "$W/sh1.params"
expect_ok "file order" "$NP" train "${SH[@]}" --steps 0 --dump-params "$W/sh0.params"
expect_ok "shuffle-buffer 100" "$NP" train "${SH[@]}" --steps 0 --shuffle-buffer 100 \
  --dump-params "$W/sh100.params" --metrics-json "$W/sh100.json"
expect_ok "shuffle-buffer 100, 8 steps" "$NP" train "${SH[@]}" --steps 8 --epochs 2 \
  --shuffle-buffer 100 --dump-params "$W/sh8.params"
expect_ok "shuffle-buffer 100, 4 steps and a checkpoint" "$NP" train "${SH[@]}" --steps 4 \
  --epochs 2 --shuffle-buffer 100 --checkpoint-dir "$W/shck" --checkpoint-every 4
expect_ok "shuffle-buffer 100, resumed to 8 steps" "$NP" train "${SH[@]}" --steps 8 --epochs 2 \
  --shuffle-buffer 100 --resume "$W/shck" --dump-params "$W/sh8r.params"
cmp -s "$W/sh1.params" "$W/sh0.params" && ok "shuffle-buffer 1 is file order" ||
  bad "shuffle-buffer 1 changed the order"
! cmp -s "$W/sh100.params" "$W/sh0.params" && grep -q '"steps": 9,' "$W/sh100.json" &&
  ok "shuffle-buffer 100: another order of the same 9 batches" || bad "shuffle-buffer 100 trained the file order"
cmp -s "$W/sh8.params" "$W/sh8r.params" && ok "shuffle-buffer: a resumed run continues the same order" ||
  bad "shuffle-buffer: the resumed run differs"
expect_fail "epochs on synthetic data" 2 "epochs: 2 passes over synthetic data" -- \
  "$NP" train --epochs 2
# export: numpy.load reads the archive, every tensor's name, shape and bits as in the dump
PY=""
for p in /usr/bin/python3 python3; do "$p" -c 'import numpy' 2>/dev/null && PY=$p && break; done
expect_ok "export" "$NP" export "$W/ev.params" "$W/ev.npz"
if [[ -z $PY ]]; then
  bad "export: no python3 with numpy to check it (.ci/deps installs python3-numpy)"
else
  "$PY" - "$W/ev.params" "$W/ev.npz" >"$W/out" 2>&1 <<'PYEOF'
import struct, sys, numpy as np
b = open(sys.argv[1], "rb").read(); z = np.load(sys.argv[2])
n = struct.unpack_from("<I", b, 12)[0]; p = 16; names = []
for _ in range(n):
    (L,) = struct.unpack_from("<I", b, p); name = b[p+4:p+4+L].decode(); p += 4 + L
    (nd,) = struct.unpack_from("<I", b, p); dims = struct.unpack_from("<%dQ" % nd, b, p + 4)
    p += 4 + 8 * nd; cnt = int(np.prod(dims)); a = np.frombuffer(b, "<f4", cnt, p).reshape(dims)
    p += 4 * cnt; names.append(name); x = z[name]
    assert x.dtype == np.float32 and x.shape == tuple(dims), name
    assert np.array_equal(x.view(np.uint32), a.view(np.uint32)), name
assert sorted(z.files) == sorted(names)
print(len(names), "tensors")
PYEOF
  [[ $? == 0 ]] && ok "export: numpy.load reads $(cat "$W/out"), the dump's bits" ||
    bad "export: $(tail -n 3 "$W/out")"
fi
expect_fail "export: not a dump" 2 "export $W/eval.tsv: not an NPPARAMS dump" -- \
  "$NP" export "$W/eval.tsv" "$W/x.npz"
expect_fail "export: a missing dump" 2 "export: cannot open $W/none.params: No such file" -- \
  "$NP" export "$W/none.params" "$W/x.npz"
expect_fail "export: a missing folder" 2 "$W/no/x.npz" -- "$NP" export "$W/ev.params" "$W/no/x.npz"
expect_fail "eval-data: not a file spec" 2 "expected criteo:PATH, bin:PATH or none" -- \
  "$NP" train --eval-data "$W/eval.tsv"
expect_fail "log-json: a missing folder, before training" 2 "--log-json $W/no/l.jsonl: the folder" -- \
  "$NP" train "${SMALL[@]}" --steps 2 --log-json "$W/no/l.jsonl"
# ---- robust inputs (issue 14 part 4): each check fails on the code before its fix
R=(--engine reference --steps 2 "${SMALL[@]}")
leftovers() { compgen -G "$1.??????" >/dev/null || compgen -G "$1.np-*" >/dev/null || [[ -e $1.tmp && ! -d $1.tmp ]]; }
# D10: outputs go through unique temporaries: another run's PATH.tmp (here a folder in the
# way) does not stop a write, and nothing is left beside the output
for f in d10.params d10.json d10.bin d10.trace d10.svg d10.paje; do mkdir "$W/$f.tmp"; done
expect_ok "D10: dump and metrics beside a foreign PATH.tmp" "$NP" train "${R[@]}" \
  --dump-params "$W/d10.params" --metrics-json "$W/d10.json"
expect_ok "D10: convert beside a foreign PATH.tmp" "$NP" convert "$W/good.tsv" "$W/d10.bin"
expect_ok "D10: trace beside a foreign PATH.tmp" "$NP" train --steps 2 "${SMALL[@]}" --trace "$W/d10.trace"
expect_ok "D10: trace svg beside a foreign PATH.tmp" "$NP" trace svg "$W/d10.trace" "$W/d10.svg"
expect_ok "D10: trace paje beside a foreign PATH.tmp" "$NP" trace paje "$W/d10.trace" "$W/d10.paje"
n=0
for f in d10.params d10.json d10.bin d10.trace d10.svg d10.paje; do
  [[ -s $W/$f ]] && ! leftovers "$W/$f" && n=$((n + 1))
done
((n == 6)) && ok "D10: all six outputs written, no temporary left" || bad "D10: $n of 6 outputs clean"
cmp -s "$W/d10.bin" "$W/good.bin" && ok "D10: convert's bytes unchanged" || bad "D10: convert differs"
[[ $(stat -c %a "$W/d10.params") == $(printf '%o' $((0666 & ~$(umask)))) ]] &&
  ok "D10: the output has fopen's mode, not mkstemp's 0600" || bad "D10: mode $(stat -c %a "$W/d10.params")"
# D9: --metrics-json on a full disk (a 1 KiB file size limit) fails and leaves the old file
echo '{"old": 1}' >"$W/d9.json"
(trap '' XFSZ; ulimit -f 1; "$NP" train "${R[@]}" --metrics-json "$W/d9.json") >"$W/out" 2>"$W/err"
rc=$?
[[ $rc -eq 2 ]] && grep -q "metrics-json: cannot write $W/d9.json" "$W/err" &&
  [[ $(cat "$W/d9.json") == '{"old": 1}' ]] && ! leftovers "$W/d9.json" &&
  ok "D9: a failed metrics write keeps the old file whole" ||
  bad "D9: exit $rc, file '$(head -c 80 "$W/d9.json")', $(cat "$W/err")"
# D1: compare checks every size from the file: a dim of 2^62+1 (4 x that wraps to 4 bytes)
# and dims whose product overflows are one line each, exit 2, not a read past the buffer
hdr='NPPARAMS\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00w'
printf "$hdr"'\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x40\x00\x00\x80\x3f' >"$W/d1a.params"
printf "$hdr"'\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x80\x3f' >"$W/d1b.params"
expect_fail "D1: compare, a dim larger than the file" 2 "$W/d1a.params: tensor 0 (w): more values than the 4 bytes left" \
  -- "$NP" compare "$W/d1a.params" "$W/d1a.params"
expect_fail "D1: compare, dims whose product overflows" 2 "$W/d1b.params: tensor 0 (w): more values than the 4 bytes left" \
  -- "$NP" compare "$W/d1b.params" "$W/d1b.params"
# D12: names from a file reach the terminal escaped (here ESC [ 3 1 m)
printf 'NPPARAMS\x01\x00\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00\x1b[31m\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f' >"$W/esc.params"
# (and such a name is refused, issue 26: export wrote a member of that name)
expect_fail "D12: compare a tensor named with a control byte" 2 "tensor 0: a name with a control byte: '\x1b[31m'" \
  -- "$NP" compare "$W/esc.params" "$W/esc.params"
! grep -q $'\x1b' "$W/err" && ok "D12: compare escapes control bytes" ||
  bad "D12: compare printed $(od -c "$W/err" | head -n 2)"
head -n 1 "$W/good.tsv" | awk -F'\t' -v OFS='\t' '{ $2 = "1\033[2J"; print }' >"$W/esc.tsv"
expect_fail "D12: a Criteo field with a control byte" 2 "esc.tsv:1:3: field I1 (integer): '1\x1b[2J' is not" \
  -- "$NP" train --data "criteo:$W/esc.tsv" "${R[@]}"
! grep -q $'\x1b' "$W/err" && ok "D12: no raw control byte in the message" || bad "D12: raw ESC in $(od -c "$W/err" | head -n 2)"
# D2: a trace whose span is 1e-320 us draws (the axis loop used to run forever), bounded by timeout
ev='"ph":"X","name":"t","pid":0,"tid":0,"args":{"kind":"fwd","batch":0,"window":-1,"bytes":0}'
echo "{\"traceEvents\":[{$ev,\"ts\":0,\"dur\":1e-320}]}" >"$W/tiny.json"
expect_ok "D2: trace svg of a 1e-320 us span ends" timeout 20 "$NP" trace svg "$W/tiny.json" "$W/tiny.svg"
(($(stat -c %s "$W/tiny.svg") < 100000)) && ok "D2: and writes a small picture" || bad "D2: svg is $(stat -c %s "$W/tiny.svg") bytes"
# D12: times past 1e15 us are bad input (the report printed 300-digit or inf step times)
echo "{\"traceEvents\":[{$ev,\"ts\":1e300,\"dur\":1e300}]}" >"$W/huge.json"
expect_fail "D12: a trace with huge times" 2 'traceEvents[0] ("ph":"X", kind '"'fwd'"'): "ts" or "dur" beyond 1e15' \
  -- "$NP" trace report "$W/huge.json"
# D5: a NaN or inf dense feature in binary data is bad input naming the record (the run
# used to end 0 with NaN parameters); in a TSV "nan" is not an integer and never was
cp "$W/good.bin" "$W/nan.bin"
printf '\x00\x00\xc0\x7f' | dd of="$W/nan.bin" bs=1 seek=$((40 + 368 * 2 + 4 + 4 * 3)) conv=notrunc status=none
expect_fail "D5: NaN in binary dense features" 2 "$W/nan.bin: record 2 (byte 776): dense feature 3 is nan, not a finite number" \
  -- "$NP" train --data "bin:$W/nan.bin" --steps 0 "${SMALL[@]}" --engine reference
head -n 1 "$W/good.tsv" | awk -F'\t' -v OFS='\t' '{ $3 = "nan"; print }' >"$W/nan.tsv"
expect_fail "D5: nan in a Criteo TSV" 2 "nan.tsv:1:" -- "$NP" train --data "criteo:$W/nan.tsv" "${R[@]}"
# D7: a config line longer than libinih's buffer is refused with file:line (its tail used to
# be read as a line of its own: here 'steps = 1')
{ echo "steps = 2"; printf '#'; printf 'x%.0s' {1..250}; echo " steps = 1"; } >"$W/long.ini"
expect_fail "D7: an over-long config line" 2 "$W/long.ini:2: line of 261 bytes; config lines may have at most 198" \
  -- "$NP" train --config "$W/long.ini" "${R[@]}"
# D8: --config naming a folder is refused (it read as an empty file)
expect_fail "D8: --config naming a folder" 2 "config file $W is a folder" -- "$NP" train --config "$W" "${R[@]}"
# D12: dense layers that cannot fit in memory are bad input before anything is allocated
# (exit 1, out of memory, after the tables were built)
expect_fail "D12: dense layers too large" 2 "model: the dense layers hold 3.01e+12 parameters" \
  -- "$NP" train --model dcnv2 --tables 1000 --dim 1000 --bottom 13-1000 --rows 100 --batch 64 --steps 1
# D12: a write error on stdout is an error (--version to a full device exited 0)
expect_fail "D12: stdout on a full device" 2 "cannot write to standard output: No space left on device" \
  -- bash -c '"$0" --version >/dev/full' "$NP"
# D6: divergence that leaves NaN parameters (the loss stayed finite: exit 0 with 35% of the
# model NaN) stops at the update that made them, naming step and tensor, on both engines
for e in reference starpu; do
  expect_fail "D6: --lr 1e3 diverges ($e)" 2 "training diverged: the update of step 4 left a NaN or inf in" \
    -- "$NP" train --engine $e --steps 20 "${SMALL[@]}" --lr 1e3
done

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
