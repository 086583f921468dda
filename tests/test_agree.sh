#!/usr/bin/env bash
# Ranks given different options (mpirun MPMD: `-np 1 nestpipe train A : -np 1 nestpipe
# train B`) or different files under the same path (each rank in its own folder): every
# rank stops within seconds with exit 2, and rank 0 names each key that differs, its values
# and the ranks holding them, one line each. Before 0.5 these crashed (heap corruption,
# a double free, SIGSEGV), hung (also under --rank-timeout) or trained a model no single
# configuration describes (exit 0).
# usage: test_agree.sh NESTPIPE
set -u
NP=$(realpath "$1")
W=$(mktemp -d /tmp/np_agree_XXXXXX)
trap 'rm -rf "$W"' EXIT
source "$(dirname "$0")/lib.sh"
mpi_test_env
MPI=(timeout 60 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x STARPU_SILENT
  -x STARPU_WORKERS_NOBIND -x STARPU_HOME)
BASE=(--tables 4 --rows 1000 --dim 8 --bottom 13-32-8 --top 16-1 --batch 256 --steps 4 --eval-samples 512 --rank-timeout 20
  --quiet)

# disagree NAME "FLAGS OF RANK 1" LINE...: rank 0 gets BASE, rank 1 BASE and its flags (and
# A_DIR / B_DIR as their folders when set); exit 2, and nestpipe's lines begin with those given
disagree() {
  local name=$1 flags=$2
  shift 2
  local a=${A_DIR:-$W} b=${B_DIR:-$W}
  # shellcheck disable=SC2086
  "${MPI[@]}" -np 1 -wdir "$a" "$NP" train "${BASE[@]}" ${A_FLAGS:-} : \
    -np 1 -wdir "$b" "$NP" train "${BASE[@]}" $flags >"$W/out" 2>"$W/err"
  local rc=$?
  grep '^nestpipe:' "$W/err" >"$W/lines"
  printf 'nestpipe: %s\n' "$@" >"$W/want"
  local same=1 i=0 line # each wanted line begins its line of the output, no line more
  [[ $(wc -l <"$W/lines") -eq $# ]] || same=0
  while IFS= read -r line; do
    i=$((i + 1))
    [[ $(sed -n "${i}p" "$W/lines") == "$line"* ]] || same=0
  done <"$W/want"
  if [[ $rc -ne 2 ]]; then
    bad "$name: exit $rc, want 2 (124: a hang); stderr: $(head -c 600 "$W/err")"
  elif [[ $same -ne 1 ]]; then
    bad "$name: rank 0 said
$(cat "$W/lines")
want
$(cat "$W/want")"
  else
    ok "$name"
  fi
}

# the options of the crashes and hangs, then those that trained a wrong model silently
disagree "--tables 5" "--tables 5" "ranks disagree on tables: '4' on rank 0; '5' on rank 1"
disagree "--windows 2" "--windows 2" "ranks disagree on windows: 'auto' on rank 0; '2' on rank 1"
disagree "--rows 600" "--rows 600" "ranks disagree on rows: '1000' on rank 0; '600' on rank 1"
disagree "--rows 400" "--rows 400" "ranks disagree on rows: '1000' on rank 0; '400' on rank 1"
disagree "--shard table" "--shard table" \
  "ranks disagree on shard: 'row' on rank 0; 'table' on rank 1"
disagree "--pipeline sequential" "--pipeline sequential" \
  "ranks disagree on pipeline: 'auto' on rank 0; 'sequential' on rank 1"
disagree "--model dcnv2" "--model dcnv2" \
  "ranks disagree on model: 'dlrm' on rank 0; 'dcnv2' on rank 1"
disagree "--resume /nonexistent" "--resume /nonexistent" \
  "ranks disagree on resume: (none) on rank 0; '/nonexistent' on rank 1"
disagree "--lr" "--lr 0.2" "ranks disagree on lr: '0.1' on rank 0; '0.2' on rank 1"
disagree "--seed" "--seed 7" "ranks disagree on seed: '42' on rank 0; '7' on rank 1"
disagree "--batch" "--batch 512" "ranks disagree on batch: '256' on rank 0; '512' on rank 1"
disagree "--sparse-optim" "--sparse-optim rowwise-adagrad" \
  "ranks disagree on sparse-optim: 'sgd' on rank 0; 'rowwise-adagrad' on rank 1"
disagree "--hot" "--hot 3" "ranks disagree on hot: '1' on rank 0; '3' on rank 1"
disagree "--zipf" "--zipf 1.2" "ranks disagree on zipf: '1.05' on rank 0; '1.2' on rank 1"
disagree "--eval-every" "--eval-every 5" \
  "ranks disagree on eval-every: '10' on rank 0; '5' on rank 1"
disagree "three keys at once, in the help's order" "--seed 7 --lr 0.2 --zipf 1.2" \
  "ranks disagree on zipf: '1.05' on rank 0; '1.2' on rank 1" \
  "ranks disagree on lr: '0.1' on rank 0; '0.2' on rank 1" \
  "ranks disagree on seed: '42' on rank 0; '7' on rank 1"
disagree "--help on one rank" "--help" \
  "ranks disagree on --help and --print-config: some ranks were given them, some not"

# keys a rank may hold alone: what it prints, rank 0's outputs
expect_ok "--quiet, --explain-placement, --log-every, --metrics-json differ: trains" \
  "${MPI[@]}" -np 1 -wdir "$W" "$NP" train "${BASE[@]}" --metrics-json "$W/m.json" : \
  -np 1 -wdir "$W" "$NP" train "${BASE[@]}" --explain-placement --log-every 2
[[ -s $W/m.json ]] && ok "rank 0's metrics written" || bad "rank 0's metrics missing"

# the same path, other files: each rank in its own folder
mkdir -p "$W/a" "$W/b"
"$NP" generate "$W/a/d.bin" --samples 3000 --tables 4 --rows 1000 >/dev/null
"$NP" generate "$W/b/d.bin" --samples 2000 --tables 4 --rows 1000 >/dev/null
A_DIR=$W/a B_DIR=$W/b A_FLAGS="--data bin:d.bin" disagree "a data file of another size" \
  "--data bin:d.bin" \
  "ranks disagree on the size of the data file: 312160 bytes on rank 0; 208128 bytes on rank 1"
# (0.5.0 said "ranks disagree on the nestpipe build: ..., 50 items on rank 0; ..., 49 items")
A_DIR=$W/a B_DIR=$W/b A_FLAGS="--data bin:d.bin" disagree "--data on one rank only" "" \
  "ranks disagree on data: 'bin:d.bin' on rank 0; 'synthetic' on rank 1"
cat >"$W/a/m.ini" <<'EOF'
[bottom]
kind = mlp
in = dense
sizes = 64-8
relu-last = 1
[interaction]
kind = dot
in = bottom, pooled
[top]
kind = mlp
in = interaction
sizes = 16-1
EOF
sed 's/16-1/32-1/' "$W/a/m.ini" >"$W/b/m.ini"
A_DIR=$W/a B_DIR=$W/b A_FLAGS="--model-file m.ini" disagree "a model file that differs" \
  "--model-file m.ini" "ranks disagree on the model graph: 5 nodes, hash"
cp "$W/a/d.bin" "$W/b/d.bin"
"$NP" train "${BASE[@]}" --data "bin:$W/a/d.bin" --dump-params "$W/a/p.params" >/dev/null 2>&1
A_DIR=$W/a B_DIR=$W/b A_FLAGS="--init-params p.params" disagree \
  "--init-params missing on one host" "--init-params p.params" \
  "ranks disagree on the size of the init-params file: $(stat -c %s "$W/a/p.params") bytes on rank 0; missing on rank 1"

# a checkpoint folder on one host only: both ranks stop in set-up, the failing one says why
"${MPI[@]}" -np 2 -wdir "$W/a" "$NP" train "${BASE[@]}" --checkpoint-dir ck --checkpoint-every 2 \
  >/dev/null 2>&1
mkdir -p "$W/b/ck"
"${MPI[@]}" -np 1 -wdir "$W/a" "$NP" train "${BASE[@]}" --resume ck : \
  -np 1 -wdir "$W/b" "$NP" train "${BASE[@]}" --resume ck >"$W/out" 2>"$W/err"
rc=$?
if [[ $rc -eq 2 ]] && grep -q '^nestpipe: rank 1: resume ck' "$W/err"; then
  ok "--resume with no checkpoint on one host: exit 2, rank 1 says why"
else
  bad "--resume on one host: exit $rc; $(grep nestpipe "$W/err")"
fi

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
