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

# ---- non-finite models refused on load, naming the tensor and the element (E3: a NaN in a
# table trained on and stayed; one in a dense tensor was blamed on the learning rate
# ("training diverged"); predict printed finite scores from NaN or Inf parameters)
"$NP" train "${SMALL[@]}" --steps 2 --dump-params "$W/m.params" >/dev/null 2>&1 ||
  bad "E3: the dumping run failed"
"$NP" generate "$W/d.bin" --samples 300 "${SMALL[@]}" >/dev/null 2>&1 || bad "E3: generate failed"
# put the 4 bytes $2 (as printf escapes) at byte $3 of a copy of m.params named $1
patch_params() { cp "$W/m.params" "$1" && printf "$2" | dd of="$1" bs=1 seek="$3" conv=notrunc status=none; }
size=$(stat -c %s "$W/m.params")
patch_params "$W/nan_emb.params" '\x00\x00\xc0\x7f' $((size - 4)) # the last table's last value
patch_params "$W/inf_dense.params" '\x00\x00\x80\x7f' 55 # bottom.0.weight's first value
expect_fail "E3: --init-params with a NaN in a table" 2 \
  "init-params $W/nan_emb.params: tensor 11 (emb.3): element 7999 (row 999, column 7) is nan; a model with a non-finite parameter is refused" \
  -- "$NP" train "${SMALL[@]}" --steps 2 --init-params "$W/nan_emb.params"
expect_fail "E3: --init-params with an Inf in a dense tensor" 2 \
  "init-params $W/inf_dense.params: tensor 0 (bottom.0.weight): element 0 (row 0, column 0) is inf" \
  -- "$NP" train "${SMALL[@]}" --steps 2 --init-params "$W/inf_dense.params"
for f in nan_emb inf_dense; do
  expect_fail "E3: predict with $f" 2 "predict --params $W/$f.params: tensor " \
    -- "$NP" predict --params "$W/$f.params" --data "bin:$W/d.bin" --out "$W/s.txt" "${SMALL[@]}"
done
[[ ! -e $W/s.txt ]] && ok "E3: and predict wrote no scores" || bad "E3: predict wrote $W/s.txt"

# ---- one reader for every command (E4: compare and export accepted files --init-params and
# predict refuse; compare called a lying count "DIFFER", exit 1, and printed "DIFFER: 0
# elements" after an error; export gave exit 1 for duplicate or control-byte names)
patch_params "$W/v2.params" '\x02\x00\x00\x00' 8
cp "$W/m.params" "$W/trail.params" && printf 'x' >>"$W/trail.params"
patch_params "$W/more.params" '\x0d\x00\x00\x00' 12 # the header says 13 tensors, 12 follow
patch_params "$W/less.params" '\x0b\x00\x00\x00' 12 # 11
# two tensors both named "a", and one named ESC
t1='\x01\x00\x00\x00a\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f'
printf 'NPPARAMS\x01\x00\x00\x00\x02\x00\x00\x00'"$t1$t1" >"$W/dup.params"
printf 'NPPARAMS\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x1b\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f' >"$W/ctl.params"
check_reader() { # NAME FILE FRAGMENT: every reader refuses FILE alike, exit 2, one line
  expect_fail "E4: compare, $1" 2 "compare $2: $3" -- "$NP" compare "$2" "$W/m.params"
  ! grep -q "DIFFER\|MATCH" "$W/out" && ok "E4: compare, $1: no verdict" ||
    bad "E4: compare, $1: printed $(cat "$W/out")"
  expect_fail "E4: compare B, $1" 2 "compare $2: $3" -- "$NP" compare "$W/m.params" "$2"
  expect_fail "E4: export, $1" 2 "export $2: $3" -- "$NP" export "$2" "$W/x.npz"
  # (a file whose first name is not the model's is refused for that first)
  [[ $1 == "a name given twice" ]] && return
  expect_fail "E4: init-params, $1" 2 "init-params $2: $3" \
    -- "$NP" train "${SMALL[@]}" --steps 1 --init-params "$2"
}
check_reader "version 2" "$W/v2.params" "version 2, this build reads 1"
check_reader "a byte after the last tensor" "$W/trail.params" "1 bytes after the last of the header's 12 tensors"
check_reader "a count above the tensors" "$W/more.params" "the file ends in tensor 12 of the header's 13"
check_reader "a count below the tensors" "$W/less.params" "32029 bytes after the last of the header's 11 tensors"
check_reader "a name given twice" "$W/dup.params" "tensor 1: the name 'a' is given twice"
check_reader "a control byte in a name" "$W/ctl.params" "tensor 0: a name with a control byte: '\x1b'"
check_reader "a NaN" "$W/nan_emb.params" "tensor 11 (emb.3): element 7999 (row 999, column 7) is nan"
[[ ! -e $W/x.npz ]] && ok "E4: and export wrote nothing" || bad "E4: export wrote $W/x.npz"
expect_ok "E4: compare still compares" "$NP" compare "$W/m.params" "$W/m.params"
grep -q "^MATCH: 0 elements" "$W/out" && ok "E4: a file against itself matches" ||
  bad "E4: compare: $(cat "$W/out")"

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
