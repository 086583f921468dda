#!/usr/bin/env bash
# The last ways a single process could be made to crash, hang, fill a disk or train the
# wrong model from its inputs and outputs (issue 26); each case failed before (the comment
# says how) and must now be one line naming what and where, exit 2.
# usage: test_inputs.sh PATH/TO/nestpipe
set -u
NP=$(realpath "$1")
W=$(mktemp -d /tmp/np_inputs_XXXXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
export STARPU_SILENT=1
SMALL=(--tables 4 --rows 1000 --dim 8 --bottom 13-16-8 --top 16-1 --batch 64 --quiet)

# ---- inputs without end: a bounded line, refused at once (they read without bound:
# criteo:/dev/zero reached 22.9 GB in 108 s, --config /dev/zero 3.3 GB in 8 s)
expect_fail "E2: --config /dev/zero" 2 "/dev/zero:1: line of more than 1048576 bytes" \
  -- timeout 20 "$NP" train --config /dev/zero
expect_fail "E2: --data criteo:/dev/zero" 2 "/dev/zero:1: a line of more than 65536 bytes" \
  -- timeout 20 "$NP" train --data criteo:/dev/zero "${SMALL[@]}" --tables 26 --steps 2
expect_fail "E2: convert /dev/zero" 2 "/dev/zero:1: a line of more than 65536 bytes" \
  -- timeout 20 "$NP" convert /dev/zero "$W/z.bin"
expect_fail "E2: --model-file /dev/zero" 2 "/dev/zero:1: a line of more than 4096 bytes" \
  -- timeout 20 "$NP" train --model-file /dev/zero --steps 2
# generate checks the room first (it started writing about 10 TB)
expect_fail "E2: generate past the free space" 2 "records of at least 368 bytes need" \
  -- timeout 20 "$NP" generate "$W/huge.bin" --samples 99999999999
[[ ! -e $W/huge.bin ]] && ok "E2: and writes nothing" || bad "E2: generate left $W/huge.bin"

# ---- quiet surprises
# a key twice in a config file (the last one silently won)
printf 'lr = 0.1\nsteps = 3\nlr = 0.2\n' >"$W/twice.ini"
expect_fail "E7: a key twice in a config file" 2 "$W/twice.ini:3: lr given again (first at line 1)" \
  -- "$NP" train --config "$W/twice.ini"
# --resume of a step-8 checkpoint with --steps 4 (it printed "step 8/4" and dumped step 8)
"$NP" train "${SMALL[@]}" --steps 8 --checkpoint-dir "$W/ck" --checkpoint-every 4 >/dev/null 2>&1 ||
  bad "E7: the checkpointed run failed"
expect_fail "E7: --resume past --steps" 2 "resume $W/ck: the newest checkpoint is at step 8, past --steps 4" \
  -- "$NP" train "${SMALL[@]}" --steps 4 --resume "$W/ck"
# a newer checkpoint that is not whole is passed over, and said (it fell back silently)
for how in "no manifest" "manifest a folder" "a file"; do
  rm -rf "$W/ck2" && cp -r "$W/ck" "$W/ck2"
  case $how in
  "no manifest") rm "$W/ck2/ckpt-000000008/manifest" ;;
  "manifest a folder") rm "$W/ck2/ckpt-000000008/manifest" && mkdir "$W/ck2/ckpt-000000008/manifest" ;;
  "a file") rm -r "$W/ck2/ckpt-000000008" && echo x >"$W/ck2/ckpt-000000008" ;;
  esac
  "$NP" train "${SMALL[@]}" --steps 10 --resume "$W/ck2" >"$W/out" 2>"$W/err"
  rc=$?
  if [[ $rc == 0 ]] && grep -q "^nestpipe: warning: resume $W/ck2: passed over ckpt-000000008 (" "$W/err" &&
    grep -q "newer than $W/ck2/ckpt-000000004" "$W/err"; then
    ok "E7: a newer checkpoint with $how: resumed from the older one, with a warning"
  else
    bad "E7: a newer checkpoint with $how: exit $rc: $(cat "$W/err")"
  fi
done

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
