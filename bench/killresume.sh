#!/usr/bin/env bash
# Kill -9 at random moments, then --resume (issue 14's done-when): for R = 1 and 2,
# sequential and nestpipe, SGD and row-wise Adagrad, one training run is killed (SIGKILL,
# to the process or to one MPI rank) KILLS times at random moments, resumed after each,
# then resumed to the end; its --dump-params must be the bytes of an uninterrupted run.
# A checkpoint after every step makes many kills land inside a checkpoint write; the
# report counts those (a folder without a manifest, or temporary files, right after the
# kill). tests/test_ckpt.sh is the short, deterministic version in the suite.
# usage: bench/killresume.sh [build/nestpipe] [OUT.md]   (env KILLS=20, SEED=1)
set -u
NP=${1:-build/nestpipe}
OUT=${2:-}
KILLS=${KILLS:-20}
RANDOM=${SEED:-1}
W=$(mktemp -d /tmp/np_killresume_XXXXXX)
trap 'rm -rf "$W"' EXIT
export STARPU_NCPU=${STARPU_NCPU:-1} STARPU_SILENT=1 STARPU_WORKERS_NOBIND=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
  -x STARPU_NCPU -x STARPU_SILENT -x STARPU_WORKERS_NOBIND)
SM=(--rows 20000 --tables 4 --hot 2 --dim 16 --bottom 13-16-16 --top 16-1 --batch 64
  --eval-samples 256 --chunks 2 --windows 2 --steps 2000 --quiet)
lines=()
all_ok=1

torn_list() { # step folders without a manifest and writers' temporary files, one a line
  local d
  for d in "$D"/ckpt-*; do
    [[ -d $d ]] || continue
    [[ -f $d/manifest ]] || echo "$d"
    compgen -G "$d/.*.tmp-*" || true
  done | sort
}

start() { # R flags...: starts a run in the background; sets JOB
  local R=$1
  shift
  if [[ $R == 1 ]]; then
    "$NP" train "${SM[@]}" "$@" >"$W/out" 2>"$W/err" &
  else
    "${MPIRUN[@]}" -np "$R" "$NP" train "${SM[@]}" "$@" >"$W/out" 2>"$W/err" &
  fi
  JOB=$!
}

for R in 1 2; do
  for pipe in sequential nestpipe; do
    for optim in sgd rowwise-adagrad; do
      F=(--pipeline "$pipe" --sparse-optim "$optim")
      D="$W/ck"
      rm -rf "$D"
      t0=$(date +%s.%N)
      start "$R" "${F[@]}" --dump-params "$W/ref.params"
      wait "$JOB" || { lines+=("| $R | $pipe | $optim | uninterrupted run failed | | | |"); all_ok=0; continue; }
      t_ref=$(echo "$(date +%s.%N) - $t0" | bc)
      kills=0 in_write=0 finished_early=0
      CK=(--checkpoint-dir "$D" --checkpoint-every 1 --keep-checkpoints 2)
      while ((kills < KILLS)); do
        resume=()
        ls "$D"/ckpt-*/manifest >/dev/null 2>&1 && resume=(--resume "$D")
        torn_before=$(torn_list)
        start "$R" "${F[@]}" "${CK[@]}" "${resume[@]}"
        # a random moment within the first ~1.5 s (set-up included)
        sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
        sleep "$(printf '0.%03d' $((RANDOM % 500)))"
        if [[ $R == 1 ]]; then target=$JOB; else target=$(pgrep -P "$JOB" -f "nestpipe train" | tail -n 1); fi
        [[ -n $target ]] && kill -9 "$target" 2>/dev/null
        wait "$JOB" 2>/dev/null
        st=$?
        if [[ $st -eq 0 ]]; then finished_early=1; break; fi
        kills=$((kills + 1))
        # inside a write: this kill left a torn folder or a temporary file not there before
        [[ $(torn_list) != "$torn_before" && -n $(comm -13 <(echo "$torn_before") <(torn_list)) ]] &&
          in_write=$((in_write + 1))
      done
      resume=()
      ls "$D"/ckpt-*/manifest >/dev/null 2>&1 && resume=(--resume "$D")
      start "$R" "${F[@]}" "${CK[@]}" "${resume[@]}" --dump-params "$W/res.params"
      if ! wait "$JOB"; then
        lines+=("| $R | $pipe | $optim | $kills | $in_write | final resume failed: $(tail -n 1 "$W/err") | |")
        all_ok=0
        continue
      fi
      if cmp -s "$W/ref.params" "$W/res.params"; then res="same bytes"; else res="DIFFERS"; all_ok=0; fi
      ((finished_early)) && res="$res (finished before $KILLS kills)"
      lines+=("| $R | $pipe | $optim | $kills | $in_write | $res | $(printf %.1f "$t_ref") |")
      echo "${lines[-1]}"
    done
  done
done

report() {
  echo "# Kill -9 and resume: $(date -u +%Y-%m-%d)"
  echo
  echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(uname -sr)."
  echo "Shape: ${SM[*]}; a checkpoint after every step (--keep-checkpoints 2); kill -9 at"
  echo "a random moment 0-1.5 s after each start (set-up included), $KILLS times, then resumed to"
  echo "the end. R = 2: the SIGKILL goes to one rank; mpirun ends the other. Seed ${SEED:-1}."
  echo
  echo "| R | pipeline | sparse optim | kills | kills inside a write (left a torn folder or temp file) | final dump vs uninterrupted | uninterrupted run s |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${lines[@]}"
  echo
  ((all_ok)) && echo "All configurations: the resumed dump is the uninterrupted run's bytes." ||
    echo "FAILED: at least one configuration differs or failed."
}
if [[ -n $OUT ]]; then report >"$OUT"; cat "$OUT"; else report; fi
((all_ok))
