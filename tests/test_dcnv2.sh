#!/usr/bin/env bash
# DCN-v2 is checked like DLRM: the StarPU engine on 1, 2 and 4 ranks matches the reference
# trainer (rel 1e-4, abs 1e-5) for full- and low-rank cross layers and both sparse
# optimizers; dbp, fwp and nestpipe give the bytes of sequential with the same windows
# (1 and 2 ranks); the bytes are the same under every scheduler and worker count.
# usage: test_dcnv2.sh PATH/TO/nestpipe
set -u
NP=$1
W=$(mktemp -d /tmp/np_dcn_XXXXXX)
trap 'rm -rf "$W"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND -x STARPU_HOME -x STARPU_SCHED)
SM=(--model dcnv2 --tables 4 --rows 500,300,700,200 --dim 4 --bottom 13-8-4 --deep 8
  --top 8-1 --cross-layers 2 --hot 2 --zipf 1.2 --batch 48 --steps 12 --chunks 2 --quiet
  --eval-samples 64)

run() { # R OUT [flags...]
  local R=$1 out=$2
  shift 2
  timeout 120 "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" --dump-params "$out" "$@" \
    >"$W/log" 2>&1 || { bad "R=$R $*: exit $?: $(tail -n 2 "$W/log")"; return 1; }
}
same() { # NAME A B
  if cmp -s "$2" "$3"; then ok "$1"; else bad "$1: the bytes differ"; fi
}

for rank in 0 3; do
  for optim in sgd rowwise-adagrad; do
    tag="rank $rank $optim"
    "$NP" train --engine reference "${SM[@]}" --cross-rank "$rank" --sparse-optim "$optim" \
      --dump-params "$W/ref" >"$W/log" 2>&1 || { bad "$tag reference: $(cat "$W/log")"; continue; }
    for R in 1 2 4; do
      run "$R" "$W/p$R" --cross-rank "$rank" --sparse-optim "$optim" || continue
      if "$NP" compare "$W/p$R" "$W/ref" >"$W/cmp"; then
        ok "$tag R=$R matches the reference (rel 1e-4, abs 1e-5)"
      else
        bad "$tag R=$R differs from the reference: $(grep -m2 -i 'out\|differ' "$W/cmp")"
      fi
    done
    # modes that reorder work in time: the bytes of sequential with the same windows
    for R in 1 2; do
      run "$R" "$W/seq" --cross-rank "$rank" --sparse-optim "$optim" --windows 2 \
        --pipeline sequential || continue
      for pipe in dbp fwp nestpipe; do
        run "$R" "$W/$pipe" --cross-rank "$rank" --sparse-optim "$optim" --windows 2 \
          --pipeline "$pipe" && same "$tag R=$R $pipe = sequential (bytes)" "$W/seq" "$W/$pipe"
      done
    done
  done
done

# schedulers and worker counts: one model
run 1 "$W/base" --sched lws
for sched in eager prio dmda dmdas ws; do
  for n in 1 2; do
    STARPU_NCPU=$n run 1 "$W/s" --sched "$sched" && same "$sched with $n workers = lws (bytes)" \
      "$W/base" "$W/s"
  done
done
# the pipelined modes on 2 ranks under another scheduler, still the same bytes
run 2 "$W/a" --windows 2 --sched prio --pipeline sequential && run 2 "$W/b" --windows 2 --sched prio \
  --pipeline nestpipe && same "R=2 prio: nestpipe = sequential (bytes)" "$W/a" "$W/b"

# a bad cross rank is one line, exit 2
"$NP" train "${SM[@]}" --cross-rank 20 >"$W/log" 2>&1
rc=$?
if [[ $rc == 2 && $(wc -l <"$W/log") == 1 ]] && grep -q "cross-rank" "$W/log"; then
  ok "cross-rank 20 >= width 20 is refused: $(cat "$W/log")"
else
  bad "cross-rank 20: exit $rc: $(cat "$W/log")"
fi
echo "$pass passed, $failed failed"
((failed == 0))
