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
expect_fail "E2: --config /dev/zero" 2 "/dev/zero:1: a NUL byte: not a text file" \
  -- timeout 20 "$NP" train --config /dev/zero
expect_fail "E2: --config, a line without end" 2 ":1: line of more than 1048576 bytes" \
  -- timeout 20 "$NP" train --config <(yes | tr -d '\n')
expect_fail "E2: --config, indentation without end" 2 ":1: line of more than 1048576 bytes" \
  -- timeout 20 "$NP" train --config <(yes ' ' | tr -d '\n')
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

# config files: a CR before the newline is not part of the line's length, an indented line is
# a key of its own (libinih would read it as more of the key above: "lr given again"), a
# NUL byte is not text (it was cut at the NUL: "line of 2 bytes")
printf '# %0196d\r\nlr = 0.05\r\n  steps = 3\r\n' 0 >"$W/crlf.ini"
"$NP" train --config "$W/crlf.ini" --print-config >"$W/out" 2>"$W/err" &&
  grep -qx "lr = 0.05" "$W/out" && grep -qx "steps = 3" "$W/out" &&
  ok "E2: CRLF lines of 198 bytes and indented keys" || bad "E2: crlf.ini: $(cat "$W/err")"
printf 'lr = 0.1\nst\0eps = 2\n' >"$W/nul.ini"
expect_fail "E2: a NUL byte in a config file" 2 "$W/nul.ini:2: a NUL byte: not a text file" \
  -- "$NP" train --config "$W/nul.ini"

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
printf 'NPPARAMS\x01\x00\x00\x00\x00\x00\x00\x00' >"$W/none.params"
check_reader "no tensors" "$W/none.params" "the header says 0 tensors; a model has 1 to 100000"
[[ ! -e $W/x.npz ]] && ok "E4: and export wrote nothing" || bad "E4: export wrote $W/x.npz"
# a pipe is a file too (the reader streams)
expect_ok "E4: --init-params from a pipe" "$NP" train "${SMALL[@]}" --steps 1 --init-params <(cat "$W/m.params")
expect_fail "E4: a pipe with a byte more" 2 "compare /dev/stdin: bytes after the last of the header's 12 tensors" \
  -- "$NP" compare /dev/stdin "$W/m.params" < <(cat "$W/m.params" "$W/trail.params")
expect_ok "E4: compare still compares" "$NP" compare "$W/m.params" "$W/m.params"
grep -q "^MATCH: 0 elements" "$W/out" && ok "E4: a file against itself matches" ||
  bad "E4: compare: $(cat "$W/out")"

# ---- an output that is an input is refused before anything is read or written (E5: predict
# --out = --data, convert IN IN, export M M, trace svg T T exited 0 with the input gone)
cp "$W/d.bin" "$W/d_copy.bin"
ln -s "$W/m.params" "$W/m_link.params"
"$NP" train "${SMALL[@]}" --steps 2 --trace "$W/t.json" >/dev/null 2>&1 || bad "E5: the traced run failed"
same_file_case() { # NAME INPUT FRAGMENT -- CMD...: exit 2, and INPUT unchanged
  local name=$1 input=$2 frag=$3 sum
  sum=$(md5sum <"$input")
  shift 3
  expect_fail "$name" 2 "$frag" "$@"
  [[ $(md5sum <"$input") == "$sum" ]] && ok "$name: the input is whole" || bad "$name: the input changed"
}
same_file_case "E5: predict --out = --data" "$W/d.bin" \
  "predict --out $W/d.bin is the same file as --data $W/d.bin, which it would replace" \
  -- "$NP" predict --params "$W/m.params" --data "bin:$W/d.bin" --out "$W/d.bin" "${SMALL[@]}"
same_file_case "E5: predict --out = --params, by a link" "$W/m.params" \
  "predict --out $W/m_link.params is the same file as --params $W/m.params" \
  -- "$NP" predict --params "$W/m.params" --data "bin:$W/d.bin" --out "$W/m_link.params" "${SMALL[@]}"
cp "$(dirname "$0")/data/good.tsv" "$W/in.tsv"
same_file_case "E5: convert IN IN" "$W/in.tsv" \
  "convert: the output $W/../${W##*/}/in.tsv is the same file as the input $W/in.tsv" \
  -- "$NP" convert "$W/in.tsv" "$W/../${W##*/}/in.tsv"
same_file_case "E5: export M M" "$W/m.params" "export: the output $W/m.params is the same file as the dump" \
  -- "$NP" export "$W/m.params" "$W/m.params"
same_file_case "E5: trace svg T T" "$W/t.json" "trace svg: the output $W/t.json is the same file as the trace" \
  -- "$NP" trace svg "$W/t.json" "$W/t.json"
same_file_case "E5: trace paje T T" "$W/t.json" "trace paje: the output $W/t.json is the same file as the trace" \
  -- "$NP" trace paje "$W/t.json" "$W/t.json"
same_file_case "E5: train --dump-params = --init-params" "$W/m.params" \
  "--dump-params $W/m_link.params is the same file as --init-params $W/m.params" \
  -- "$NP" train "${SMALL[@]}" --steps 2 --init-params "$W/m.params" --dump-params "$W/m_link.params"
same_file_case "E5: train --metrics-json = --data" "$W/d_copy.bin" \
  "--metrics-json $W/d_copy.bin is the same file as --data $W/d_copy.bin" \
  -- "$NP" train "${SMALL[@]}" --steps 2 --data "bin:$W/d_copy.bin" --metrics-json "$W/d_copy.bin"
expect_fail "E5: two outputs, one file" 2 "--trace $W/o.json is the same file as --metrics-json $W/./o.json" \
  -- "$NP" train "${SMALL[@]}" --steps 2 --metrics-json "$W/./o.json" --trace "$W/o.json"
# the --config files and predict's --model-file are inputs too
printf 'steps = 2\n' >"$W/t.ini"
cp "$W/t.ini" "$W/t_copy.ini"
same_file_case "E5: train --metrics-json = --config" "$W/t.ini" \
  "--metrics-json $W/t.ini is the same file as --config $W/t.ini" \
  -- "$NP" train "${SMALL[@]}" --config "$W/t.ini" --metrics-json "$W/t.ini"
same_file_case "E5: generate OUT = --config" "$W/t.ini" \
  "generate: the output $W/t.ini is the same file as --config $W/t.ini" \
  -- "$NP" generate "$W/t.ini" --samples 10 --config "$W/t.ini"
same_file_case "E5: predict --out = --config" "$W/t.ini" \
  "predict --out $W/t.ini is the same file as --config $W/t.ini" \
  -- "$NP" predict --params "$W/m.params" --data "bin:$W/d.bin" --out "$W/t.ini" "${SMALL[@]}" --config "$W/t.ini"
printf '[bottom]\nkind = mlp\nin = dense\nsizes = 16-8\nrelu-last = 1\n[interaction]\nkind = dot\nin = bottom, pooled\n[top]\nkind = mlp\nin = interaction\nsizes = 16-1\n' >"$W/mf.ini"
same_file_case "E5: predict --out = --model-file" "$W/mf.ini" \
  "predict --out $W/mf.ini is the same file as --model-file $W/mf.ini" \
  -- "$NP" predict --params "$W/m.params" --data "bin:$W/d.bin" --out "$W/mf.ini" --tables 4 --rows 1000 \
  --dim 8 --model-file "$W/mf.ini"
expect_ok "E5: two outputs to /dev/null are fine" \
  "$NP" train "${SMALL[@]}" --steps 2 --metrics-json /dev/null --dump-params /dev/null

# ---- outputs probed at start (E8: only the folder's writability was checked, so these
# failed after the whole run, the checkpoint folder at the first checkpoint)
for o in "--dump-params /proc/x.params" "--metrics-json /sys/m.json" "--trace /proc/nope.json" \
  "--log-json /proc/l.jsonl" "--checkpoint-dir /proc/ck"; do
  # ("cannot create" as root; "the folder ... is not writable" for other users)
  expect_fail "E8: $o fails at start" 2 "${o% *} ${o#* }: " \
    -- timeout 60 "$NP" train "${SMALL[@]}" --steps 100000 $o
done
[[ ! -e $W/ck_probe ]] && expect_ok "E8: a checkpoint folder to be made" \
  "$NP" train "${SMALL[@]}" --steps 2 --checkpoint-dir "$W/ck_probe" --checkpoint-every 2
[[ -d $W/ck_probe/ckpt-000000002 && $(ls -A "$W/ck_probe") == ckpt-000000002 ]] &&
  ok "E8: the probe left nothing in it" || bad "E8: $(ls -A "$W/ck_probe")"

# ---- temporaries cleaned on signals (E6: SIGTERM/SIGINT during generate, predict or convert
# left OUT.XXXXXX, 8.6 GB and 52 GB seen); a FIFO holds the readers mid-file
temps() { compgen -G "$1.*" >/dev/null; }
# env --default-signal needs coreutils 8.31 (Debian 11); without it SIGTERM stands in
DEFAULT_INT=(env --default-signal=INT) INT=INT
env --default-signal=INT true 2>/dev/null || DEFAULT_INT=() INT=TERM
signal_case() { # NAME SIGNAL OUT -- CMD...: started, signalled once its temporary exists
  local name=$1 sig=$2 out=$3 pid rc i
  shift 4
  # (a background job starts with SIGINT ignored, which nestpipe respects: reset it)
  ${DEFAULT_INT[@]+"${DEFAULT_INT[@]}"} "$@" >/dev/null 2>"$W/err" &
  pid=$!
  for ((i = 0; i < 200; i++)); do temps "$out" && break; sleep 0.05; done
  temps "$out" || bad "$name: no temporary appeared"
  kill -"$sig" $pid
  wait $pid
  rc=$?
  if [[ $rc -eq $((128 + $(kill -l "$sig"))) ]] && ! temps "$out" && [[ ! -e $out ]]; then
    ok "$name: exit $rc, nothing left"
  else
    bad "$name: exit $rc, left: $(ls "$out"* 2>&1)"
  fi
}
cp "$(dirname "$0")/data/good.tsv" "$W/part.tsv"
mkfifo "$W/fifo.tsv"
# the feeder writes a few lines, then holds the FIFO open as `sleep` (exec: its pid is $!)
feed() { exec 2>/dev/null >"$W/fifo.tsv"; cat "$W/part.tsv"; exec sleep 30; }
if [[ -s $W/part.tsv ]]; then
  feed &
  feeder=$!
  signal_case "E6: SIGTERM during convert" TERM "$W/c.bin" -- "$NP" convert "$W/fifo.tsv" "$W/c.bin"
  kill $feeder 2>/dev/null
  feed &
  feeder=$!
  "$NP" train "${SMALL[@]}" --tables 26 --steps 1 --dump-params "$W/m26.params" >/dev/null 2>&1
  signal_case "E6: SIG$INT during predict" $INT "$W/s.txt" -- "$NP" predict --params "$W/m26.params" \
    --data "criteo:$W/fifo.tsv" --out "$W/s.txt" "${SMALL[@]}" --tables 26
  kill $feeder 2>/dev/null
else
  bad "E6: no TSV sample at tests/data/good.tsv"
fi
signal_case "E6: SIGTERM during generate" TERM "$W/g.bin" -- "$NP" generate "$W/g.bin" --samples 50000000 "${SMALL[@]}"
# killed outright, a temporary stays; the next run writing that file removes it, saying so,
# but not a live process's, nor another host's
"$NP" generate "$W/g.bin" --samples 50000000 "${SMALL[@]}" >/dev/null 2>&1 &
pid=$!
for ((i = 0; i < 200; i++)); do temps "$W/g.bin" && break; sleep 0.05; done
kill -KILL $pid
wait $pid 2>/dev/null
stale=$(compgen -G "$W/g.bin.*")
host=$(uname -n | cut -c1-32 | tr -c 'A-Za-z0-9._\n-' '_')
# kept: a live process's, another host's, and one whose writer holds its lock though its PID
# is not seen here (another PID namespace: 99999999 is past any pid_max)
touch "$W/g.bin.np-$host-$$.abcdef" "$W/g.bin.np-otherhost-99999999.abcdef" \
  "$W/g.bin.np-$host-99999999.locked"
flock -o "$W/g.bin.np-$host-99999999.locked" sleep 300 >/dev/null 2>&1 & # (-o: flock holds it)
locker=$!
for ((i = 0; i < 100; i++)); do
  flock -n "$W/g.bin.np-$host-99999999.locked" true || break
  sleep 0.05
done
"$NP" generate "$W/g.bin" --samples 100 "${SMALL[@]}" >/dev/null 2>"$W/err"
if [[ -n $stale && ! -e $stale ]] && grep -q "removed $stale, a temporary of process $pid of this host" "$W/err" &&
  [[ -e "$W/g.bin.np-$host-$$.abcdef" && -e "$W/g.bin.np-otherhost-99999999.abcdef" &&
  -e "$W/g.bin.np-$host-99999999.locked" ]]; then
  ok "E6: a later run removed the stale temporary of a killed one, and only that"
else
  bad "E6: stale '$stale' $(ls "$W"/g.bin* | tr '\n' ' '); $(cat "$W/err")"
fi
pkill -P $locker sleep 2>/dev/null
kill $locker 2>/dev/null
wait $locker 2>/dev/null
"$NP" generate "$W/g.bin" --samples 100 "${SMALL[@]}" >/dev/null 2>"$W/err"
[[ ! -e "$W/g.bin.np-$host-99999999.locked" ]] && ok "E6: unlocked, it goes on the next run" ||
  bad "E6: the unlocked one stayed: $(cat "$W/err")"

echo "$pass passed, $failed failed"
[[ $failed -eq 0 ]]
