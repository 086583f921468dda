#!/usr/bin/env bash
# The two-level All2All (--a2a hier, docs/scale.md "A two-level All2All") gives the flat
# one's bytes: on 2, 3, 4 and 6 ranks with pseudo-hosts (--ranks-per-host) of 1 to 4 ranks,
# ranks placed host after host and round the hosts (NP_TEST_HOSTS_CYCLIC), under every
# pipeline, the row and the pooled exchange, row- and table-wise, the trained model of a
# hier run is the flat run's, byte for byte (cmp), and its trace says it went in two
# levels (auto: across hosts of 4 ranks or more, checked on 8). The dense all-reduce in buckets of layers (--allreduce-bucket) gives the bytes of
# one a layer. The spread layout (--shard spread) matches the reference, gives row-wise's
# bytes with the rows exchange, and reshards from a checkpoint. Bad host counts and link
# settings are refused in one line. With `many` (the
# extended tier): 8 and 16 oversubscribed ranks with pseudo-hosts of 2 and 4.
# usage: test_a2a.sh PATH/TO/nestpipe [many]
set -u
NP=$1
MODE=${2:-}
W=$(mktemp -d /tmp/np_a2a_XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

export STARPU_NCPU=1 STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME
  -x NP_TEST_HOSTS_CYCLIC -x NP_LINK_US)
SM=(--rows 1000,700,1200,333,50,900 --tables 6 --hot 2 --bottom 13-16-16 --top 16-8-1
  --steps 4 --quiet --chunks 1)

run_np() { # R OUT.params [flags...]: R ranks, 300 s at most
  local R=$1 out=$2
  shift 2
  rm -f "$out"
  timeout 300 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" --batch $((4 * R)) \
    --dump-params "$out" "$@" >"$W/out" 2>"$W/err"
}

# NAME R G FLAGS...: flat, then hier over pseudo-hosts of G ranks: the same bytes
same() {
  local name=$1 R=$2 G=$3
  shift 3
  if ! run_np "$R" "$W/flat" --a2a flat "$@"; then
    bad "$name: flat: exit $?: $(tail -n 2 "$W/err")"
    return
  fi
  if ! run_np "$R" "$W/hier" --a2a hier --ranks-per-host "$G" "$@"; then
    bad "$name: hier: exit $?: $(tail -n 2 "$W/err")"
    return
  fi
  cmp -s "$W/flat" "$W/hier" && ok "$name: hier gives flat's bytes" ||
    bad "$name: hier differs from flat"
}

# NAME R FLAGS...: one all-reduce a layer (--allreduce-bucket 0), the default's one bucket
# and buckets of 1 KB (several, on these layers of 65 to 272 floats): the same bytes
buckets() { # NAME R KB... FLAGS...: one a layer against buckets of each KB
  local name=$1 R=$2 kbs=()
  shift 2
  while [[ $1 =~ ^[0-9]+$ ]]; do kbs+=("$1"); shift; done
  if ! run_np "$R" "$W/layer" --allreduce-bucket 0 "$@"; then
    bad "$name: a layer at a time: exit $?: $(tail -n 2 "$W/err")"
    return
  fi
  local kb
  for kb in "${kbs[@]}"; do
    if ! run_np "$R" "$W/fused" --allreduce-bucket $kb "$@"; then
      bad "$name: buckets of $kb KB: exit $?: $(tail -n 2 "$W/err")"
    elif cmp -s "$W/layer" "$W/fused"; then
      ok "$name: buckets of $kb KB give the bytes of a layer at a time"
    else
      bad "$name: buckets of $kb KB differ from a layer at a time"
    fi
  done
}

# the runs say how their All2Alls went (the trace's facts): hier in two levels over the
# pseudo-hosts, flat in one; auto takes hier across hosts of 4 ranks or more
levels() { # NAME R WANT_A2A WANT_G FLAGS...
  local name=$1 R=$2 want=$3 g=$4
  shift 4
  if ! run_np "$R" "$W/p" --trace "$W/t.json" "$@"; then
    bad "$name: exit $?: $(tail -n 2 "$W/err")"
    return
  fi
  local got
  got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["otherData"]["run"]; print(r["a2a"], r["a2a_host_ranks"])' "$W/t.json" 2>&1)
  [[ $got == "$want $g" ]] && ok "$name: the trace says $got" || bad "$name: the trace says '$got', not '$want $g'"
}
levels "4 ranks, --a2a hier --ranks-per-host 2" 4 hier 2 --a2a hier --ranks-per-host 2
levels "4 ranks, --a2a auto --ranks-per-host 2 (under 4 a host)" 4 flat 1 --ranks-per-host 2
levels "8 ranks, --a2a auto --ranks-per-host 4" 8 hier 4 --ranks-per-host 4
levels "4 ranks, one real host, --a2a auto" 4 flat 1
levels "4 ranks, --a2a flat --ranks-per-host 2" 4 flat 1 --a2a flat --ranks-per-host 2

if [[ $MODE == many ]]; then # every pipeline at 8 ranks, two at 16; hosts of 2 and 4
  same "R=8 G=2 sequential" 8 2 --pipeline sequential
  same "R=8 G=4 dbp" 8 4 --pipeline dbp
  same "R=8 G=2 fwp, 2 windows, table-wise, pooled" 8 2 --pipeline fwp --windows 2 \
    --shard table --exchange pooled
  same "R=8 G=4 nestpipe, 2 windows, rows, spread" 8 4 --pipeline nestpipe --windows 2 \
    --exchange rows --shard spread
  same "R=16 G=4 dbp, spread" 16 4 --pipeline dbp --shard spread
  same "R=16 G=2 nestpipe, 2 windows, pooled" 16 2 --pipeline nestpipe --windows 2 \
    --exchange pooled
else
  same "R=2 G=2 nestpipe, 2 windows" 2 2 --pipeline nestpipe --windows 2
  same "R=3 G=1 fwp, 2 windows, table-wise, pooled" 3 1 --pipeline fwp --windows 2 \
    --shard table --exchange pooled
  same "R=4 G=2 sequential, rows" 4 2 --pipeline sequential --exchange rows
  same "R=4 G=2 dbp" 4 2 --pipeline dbp
  same "R=4 G=2 nestpipe, 2 windows, table-wise" 4 2 --pipeline nestpipe --windows 2 --shard table
  same "R=4 G=4 nestpipe, 2 windows" 4 4 --pipeline nestpipe --windows 2
  NP_TEST_HOSTS_CYCLIC=1 same "R=4 G=2 ranks round the hosts, dbp" 4 2 --pipeline dbp
  NP_TEST_HOSTS_CYCLIC=1 same "R=4 G=2 ranks round the hosts, nestpipe" 4 2 --pipeline nestpipe \
    --windows 2 --exchange pooled
  # G != H off block placement: an index swapped between the two levels shows here
  NP_TEST_HOSTS_CYCLIC=1 same "R=6 G=2 (3 hosts) round the hosts, dbp" 6 2 --pipeline dbp
  NP_TEST_HOSTS_CYCLIC=1 same "R=6 G=3 (2 hosts) round the hosts, nestpipe" 6 3 \
    --pipeline nestpipe --windows 2
  buckets "R=2 sequential" 2 25600 --pipeline sequential
  buckets "R=3 dbp, hier over 3 hosts" 3 25600 --pipeline dbp --a2a hier --ranks-per-host 1
  # several buckets; a per-message link latency changes the time, never the bytes
  NP_LINK_US=50 buckets "R=4 nestpipe, 2 windows, hier over 2 hosts, NP_LINK_US=50" 4 25600 1 \
    --pipeline nestpipe --windows 2 --a2a hier --ranks-per-host 2
fi

# ---- the spread layout (--shard spread): the tables' hot rows R / T ranks apart, so it
# differs from row-wise once R >= 2 T: 4 ranks of 2 tables (offsets 0 and 2)
SP=(--tables 2 --rows 1000,700)
if "$NP" train --engine reference "${SM[@]}" "${SP[@]}" --batch 16 --dump-params "$W/spref" \
  >/dev/null 2>"$W/err"; then
  if run_np 4 "$W/sp" "${SP[@]}" --shard spread --pipeline sequential &&
    "$NP" compare "$W/sp" "$W/spref" --rtol 1e-4 --atol 1e-5 >"$W/cmp"; then
    ok "spread, 4 ranks, sequential: matches the reference"
    cp "$W/sp" "$W/spseq"
  else
    bad "spread, 4 ranks, sequential: $(tail -n 2 "$W/err") $(grep -m2 OUT "$W/cmp")"
  fi
  # rows: every owner sums a row's gradients in rank order, whoever it is: row's bytes
  run_np 4 "$W/a" "${SP[@]}" --shard row --exchange rows --pipeline dbp &&
    run_np 4 "$W/b" "${SP[@]}" --shard spread --exchange rows --pipeline dbp &&
    cmp -s "$W/a" "$W/b" && ok "spread, rows exchange: the bytes of row-wise" ||
    bad "spread, rows exchange: differs from row-wise (or failed: $(tail -n 1 "$W/err"))"
  run_np 4 "$W/c" "${SP[@]}" --shard spread --pipeline dbp && cmp -s "$W/c" "$W/spseq" &&
    ok "spread, dbp: the bytes of sequential" || bad "spread, dbp differs from sequential"
  run_np 4 "$W/d" "${SP[@]}" --shard spread --pipeline dbp --a2a hier --ranks-per-host 2 &&
    cmp -s "$W/d" "$W/c" && ok "spread, dbp, hier: flat's bytes" || bad "spread, hier differs"
  # a spread checkpoint at 4 ranks resumed at 2: within tolerance of the reference; at
  # another layout: refused
  CK="$W/ck"
  if run_np 4 "$W/e" "${SP[@]}" --shard spread --steps 2 --checkpoint-dir "$CK" \
    --checkpoint-every 2 && run_np 2 "$W/f" "${SP[@]}" --shard spread --resume "$CK" \
    --batch 16 && "$NP" compare "$W/f" "$W/spref" --rtol 1e-4 --atol 1e-5 >"$W/cmp"; then
    ok "spread, a 4-rank checkpoint resumed at 2 ranks: matches the reference"
  else
    bad "spread, resharded: $(tail -n 2 "$W/err") $(grep -m2 OUT "$W/cmp" 2>/dev/null)"
  fi
  if run_np 2 "$W/g" "${SP[@]}" --shard row --resume "$CK" --batch 16; then
    bad "a spread checkpoint resumed row-wise: accepted"
  else
    grep -q "shard = spread" "$W/err" && ok "a spread checkpoint resumed row-wise: refused" ||
      bad "a spread checkpoint resumed row-wise: $(tail -n 1 "$W/err")"
  fi
else
  bad "reference of 2 tables: $(cat "$W/err")"
fi

# refusals: one line naming the key, a non-zero exit
refused() { # NAME PATTERN FLAGS...
  local name=$1 pat=$2
  shift 2
  if run_np 4 "$W/p" "$@"; then
    bad "$name: accepted"
  elif grep -q -- "$pat" "$W/err"; then
    ok "$name: refused ($(grep -m1 -- "$pat" "$W/err" | cut -c1-100))"
  else
    bad "$name: not the message '$pat': $(tail -n 2 "$W/err")"
  fi
}
refused "--ranks-per-host 3 at 4 ranks" "ranks-per-host: pseudo-hosts of 3 ranks do not divide 4" \
  --a2a hier --ranks-per-host 3
NP_LINK_US=abc refused "NP_LINK_US=abc" "NP_LINK_US: 'abc' is not a message latency"
if "$NP" train --a2a ring --steps 1 >/dev/null 2>"$W/err"; then
  bad "--a2a ring: accepted"
else
  grep -q "a2a" "$W/err" && ok "--a2a ring: refused ($(head -c 100 "$W/err"))" ||
    bad "--a2a ring: $(cat "$W/err")"
fi

echo "$pass passed, $failed failed"
((failed == 0))
