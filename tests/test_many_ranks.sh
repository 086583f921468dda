#!/usr/bin/env bash
# Past 64 ranks (the extended tier): 65, 96 and 128 real ranks under mpirun, one StarPU
# worker each, oversubscribed on the machine's cores, a tiny shape (2 samples a rank, 4
# steps). Each matches the reference trainer (rel 1e-4, abs 1e-5): sequential row-wise
# with auto exchange at every count, nestpipe table-wise pooled at 96 and 128; at 65 the
# pipelines that only reorder work give the bytes of sequential with the same windows
# (dbp; fwp and nestpipe with 2 windows), row- and table-wise, rows, auto and pooled; the
# watchdog names a rank stalled deep in its tree (rank R-1, watched by its parent).
# usage: test_many_ranks.sh PATH/TO/nestpipe [R...]
set -u
NP=$1
shift
RANKS=("$@")
((${#RANKS[@]})) || RANKS=(65 96 128)
W=$(mktemp -d /tmp/np_many_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

export STARPU_NCPU=1 STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME)
SM=(--rows 1000,700,1200,333,50,900 --tables 6 --hot 2 --bottom 13-16-16 --top 16-8-1
  --steps 4 --quiet --chunks 1)

run_np() { # R OUT.params [flags...]: R ranks, 300 s at most
  local R=$1 out=$2
  shift 2
  timeout 300 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" --batch $((2 * R)) \
    --dump-params "$out" "$@" >"$W/out" 2>"$W/err"
}

# NAME R REF FLAGS...: a run that must match the reference REF within the tolerance
matches() {
  local name=$1 R=$2 ref=$3
  shift 3
  if ! run_np "$R" "$W/p" "$@"; then
    bad "$name: exit $?: $(tail -n 3 "$W/err")"
    return 1
  fi
  if "$NP" compare "$W/p" "$ref" --rtol 1e-4 --atol 1e-5 >"$W/cmp"; then
    ok "$name matches the reference"
  else
    bad "$name differs from the reference: $(grep -m3 OUT "$W/cmp")"
  fi
}

# NAME R BASE FLAGS...: a run that must give the bytes of the params file BASE
same() {
  local name=$1 R=$2 base=$3
  shift 3
  if ! run_np "$R" "$W/q" "$@"; then
    bad "$name: exit $?: $(tail -n 3 "$W/err")"
    return
  fi
  cmp -s "$W/q" "$base" && ok "$name: the bytes of sequential" || bad "$name differs from sequential"
}

for R in "${RANKS[@]}"; do
  "$NP" train --engine reference "${SM[@]}" --batch $((2 * R)) --dump-params "$W/ref" \
    >/dev/null 2>"$W/err" || bad "reference at batch $((2 * R)): $(cat "$W/err")"
  # row-wise, rows or pooled sums where cheaper (auto)
  if matches "R=$R sequential, row-wise, auto" "$R" "$W/ref" --pipeline sequential; then
    cp "$W/p" "$W/seq1"
    [[ $R == "${RANKS[0]}" ]] && same "R=$R dbp, row-wise, auto" "$R" "$W/seq1" --pipeline dbp
  fi
  if [[ $R != "${RANKS[0]}" ]]; then # the larger counts: nestpipe, table-wise, pooled
    matches "R=$R nestpipe, 2 windows, table-wise, pooled" "$R" "$W/ref" --pipeline nestpipe \
      --windows 2 --shard table --exchange pooled
    continue
  fi
  # the first count: every pipeline bit for bit against sequential with its windows
  if matches "R=$R sequential, 2 windows, table-wise, pooled" "$R" "$W/ref" --pipeline sequential \
    --windows 2 --shard table --exchange pooled; then
    cp "$W/p" "$W/seq2"
    same "R=$R nestpipe, 2 windows, table-wise, pooled" "$R" "$W/seq2" --pipeline nestpipe \
      --windows 2 --shard table --exchange pooled
  fi
  if matches "R=$R sequential, 2 windows, row-wise, rows" "$R" "$W/ref" --pipeline sequential \
    --windows 2 --exchange rows; then
    cp "$W/p" "$W/seq3"
    same "R=$R nestpipe, 2 windows, row-wise, rows, split rows" "$R" "$W/seq3" \
      --pipeline nestpipe --windows 2 --exchange rows --split-rows on
    same "R=$R fwp, 2 windows, row-wise, rows" "$R" "$W/seq3" --pipeline fwp --windows 2 \
      --exchange rows
  fi
done

# a stalled rank far from rank 0: its tree parent names it, the job ends within seconds
R=${RANKS[0]}
last=$((R - 1))
timeout 120 env NP_TEST_STALL_RANK=$last NP_TEST_STALL_STEP=2 "${MPIRUN[@]}" -x NP_TEST_STALL_RANK \
  -x NP_TEST_STALL_STEP -np "$R" "$NP" train "${SM[@]}" --batch $((2 * R)) --steps 1000 \
  --rank-timeout 5 >"$W/out" 2>&1
rc=$?
parent=$(((last - 1) / 2))
if [[ $rc != 0 && $rc != 124 ]] &&
  grep -q "nestpipe: rank $parent: rank $last has made no progress for [0-9]* s" "$W/out"; then
  ok "R=$R: the watchdog's rank $parent names stalled rank $last (exit $rc)"
else
  bad "R=$R stalled rank $last: exit $rc: $(grep -m2 nestpipe "$W/out")"
fi

echo "$pass passed, $failed failed"
((failed == 0))
