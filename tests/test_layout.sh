#!/usr/bin/env bash
# The house's floors (docs/architecture.md "Folders and floors"): a library file includes
# only headers of its own floor or a lower one, so data and control flow one way and no
# import runs back up. apps/ and examples/ see the public headers only. Fails naming every
# include that breaks the rule; with the build's objects, every call too.
# usage: test_layout.sh SOURCE_DIR [OBJECTS_DIR]
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
# floor of each folder, lowest first; include/nestpipe (the public API) is below them all
declare -A FLOOR=(
  [nestpipe]=0
  [runtime/core]=1
  [codelets/kernels]=2 [codelets/cuda]=2
  [codelets/layers]=3
  [runtime/model]=4 [runtime/data]=4 [runtime/comm]=4 [runtime/trace]=4
  [codelets]=5 [runtime/scale]=5 [graph]=5
  [tasks]=6
  [runtime/engine]=7
  [runtime/state]=8
  [runtime/train]=9
)
# the library's folders, lowest floor first (a folder's floor is that of the file's own
# folder: codelets/kernels/ is floor 2 while codelets/ itself is floor 5)
mapfile -t DIRS < <(for d in "${!FLOOR[@]}"; do [[ $d == nestpipe ]] || echo "${FLOOR[$d]} $d"; done | sort -n | cut -d' ' -f2)
bad=0 checked=0
# the table above is docs/architecture.md's: the two must agree
while IFS='|' read -r _ floor dir _; do
  floor=${floor// /} dir=${dir//[ \`]/}
  dir=${dir%/}
  [[ $floor =~ ^[0-9]+$ && -n $dir ]] || continue
  [[ $dir == include/nestpipe ]] && dir=nestpipe
  if [[ ${FLOOR[$dir]-x} != "$floor" ]]; then
    echo "FAIL docs/architecture.md puts $dir/ on floor $floor, this test on ${FLOOR[$dir]-none}"
    bad=$((bad + 1))
  fi
done < <(grep -E '^\| [0-9]+ \| `' docs/architecture.md)
# the top level (docs/architecture.md "The top level"): the tracked entries are the table's,
# at most 13 of them; checked in a git checkout only (a tarball has no list of what is tracked)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [[ $(git rev-parse --show-toplevel) == "$PWD" ]]; then
  documented=$(sed -n '/^### The top level/,/^### /p' docs/architecture.md | grep '^| `' |
    cut -d'|' -f2 | grep -o '`[^`]*`' | tr -d '`' | sed 's|/$||' | sort -u)
  tracked=$(git ls-files | cut -d/ -f1 | grep -v '^\.' | sort -u)
  if [[ $documented != "$tracked" ]]; then
    echo "FAIL the top level and docs/architecture.md's table differ:" \
      "$(diff <(echo "$documented") <(echo "$tracked") | grep '^[<>]' | tr '\n' ' ')"
    bad=$((bad + 1))
  fi
  n=$(echo "$tracked" | wc -l)
  ((n <= 13)) || { echo "FAIL the top level holds $n entries, more than 13"; bad=$((bad + 1)); }
  ((n <= 13)) && echo "ok   the top level holds $n entries, those docs/architecture.md lists"
fi
for dir in "${DIRS[@]}"; do
  mine=${FLOOR[$dir]}
  for f in "$dir"/*.[ch] "$dir"/*.cu "$dir"/*.cuh; do
    [[ -e $f ]] || continue
    while IFS= read -r inc; do
      target=${inc%/*}
      checked=$((checked + 1))
      if [[ $inc == *..* || $inc == /* ]]; then
        echo "FAIL $f includes \"$inc\": a library include names a floor's folder, not a relative path"
        bad=$((bad + 1))
      elif [[ -z ${FLOOR[$target]+x} ]]; then
        echo "FAIL $f includes \"$inc\": $target/ is not a floor of the library"
        bad=$((bad + 1))
      elif ((FLOOR[$target] > mine)); then
        echo "FAIL $f includes \"$inc\": $target/ (floor ${FLOOR[$target]}) is above $dir/ (floor $mine)"
        bad=$((bad + 1))
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\/[^"]*\)".*/\1/p' "$f")
  done
done
# the command and the examples are users of the library like any other: public headers only
for f in apps/*.[ch] examples/*/*.[ch]; do
  [[ -e $f ]] || continue
  while IFS= read -r inc; do
    checked=$((checked + 1))
    case $inc in
    nestpipe/* | sys/*) ;; # the library's public headers, the system's
    */*) echo "FAIL $f includes \"$inc\": a program sees the public headers only"; bad=$((bad + 1)) ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p' "$f")
done
echo "$checked includes checked, $bad against the floors"

# Calls between floors, with the build's library objects (second argument: the folder of
# CMake's nestpipe_objects): an object's undefined symbol that another library object
# defines must be defined on its floor or below. Includes cannot see a call through a
# declaration written by hand, or one through the public headers.
# The one upward call left, with its reason (docs/architecture.md "Folders and floors"):
# a checkpoint holds the trainer between steps while it reads the model.
ALLOWED=" runtime/state/ckpt_save.c:np_trainer_hold runtime/state/ckpt_save.c:np_trainer_release "
calls_checked=0
check_calls() { # OBJECT... (paths under $1's root, named FLOOR_DIR/FILE.o): prints the breaches
  local root=$1 obj rel dir sym f n=0
  shift
  declare -A def=()
  for obj in "$@"; do
    rel=${obj#"$root"/} dir=${rel%/*}
    [[ -n ${FLOOR[$dir]+x} ]] || continue
    while read -r sym; do def[$sym]=$rel; done < <(nm -g --defined-only "$obj" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRCGSVWiu]$/ {print $3}')
  done
  for obj in "$@"; do
    rel=${obj#"$root"/} dir=${rel%/*}
    [[ -n ${FLOOR[$dir]+x} ]] || continue
    while read -r sym; do
      [[ -n ${def[$sym]+x} ]] || continue
      calls_checked=$((calls_checked + 1))
      f=${def[$sym]%/*} src=${rel%.o}
      if ((FLOOR[$f] > FLOOR[$dir])) && [[ $ALLOWED != *" $src:$sym "* ]]; then
        echo "FAIL $src calls $sym of ${def[$sym]%.o}: $f/ (floor ${FLOOR[$f]}) is above $dir/ (floor ${FLOOR[$dir]})"
        n=$((n + 1))
      fi
    done < <(nm -u "$obj" 2>/dev/null | awk '{print $NF}')
  done
  return $((n > 0)) # a count would wrap at 256
}
OBJ=${2:-}
if [[ -n $OBJ ]]; then
  objs=() # those of today's sources (a build folder keeps the objects of moved files)
  while read -r o; do
    r=${o#"$OBJ"/}
    [[ -e ${r%.o} ]] && objs+=("$o")
  done < <(find "$OBJ" -name '*.o' | sort)
  if ((${#objs[@]} == 0)); then
    echo "FAIL no library objects under $OBJ"
    bad=$((bad + 1))
  else
    check_calls "$OBJ" "${objs[@]}" || bad=$((bad + 1))
    if ((calls_checked == 0)); then
      echo "FAIL no call between the objects under $OBJ was seen (nm missing?)"
      bad=$((bad + 1))
    fi
    # every library source of this build has its object (the CUDA-only ones where built)
    for dir in "${DIRS[@]}"; do
      for f in "$dir"/*.c; do
        [[ -e $f && ! -e $OBJ/$f.o ]] || continue
        # NCCL's backend is the CUDA flavour's only (built with its .cu objects)
        [[ $f == runtime/comm/nccl.c && ! -e $OBJ/codelets/ops.cu.o ]] && continue
        echo "FAIL $f has no object under $OBJ: its calls went unchecked"
        bad=$((bad + 1))
      done
    done
    # the check can fail: a planted runtime/core/ object calling the engine's submit must be caught
    P=$(mktemp -d /tmp/np_layout_XXXXXX)
    mkdir -p "$P/runtime/core" "$P/runtime/engine"
    echo 'int np_planted_up(void); int np_planted_low(void) { return np_planted_up(); }' >"$P/runtime/core/low.c"
    echo 'int np_planted_up(void) { return 1; }' >"$P/runtime/engine/up.c"
    if cc -c "$P/runtime/core/low.c" -o "$P/runtime/core/low.c.o" && cc -c "$P/runtime/engine/up.c" -o "$P/runtime/engine/up.c.o"; then
      if out=$(check_calls "$P" "$P/runtime/core/low.c.o" "$P/runtime/engine/up.c.o"); then
        echo "FAIL a planted upward call (runtime/core/ calling runtime/engine/) went unseen"
        bad=$((bad + 1))
      else
        echo "ok   a planted upward call is caught: ${out#FAIL }"
      fi
    else
      echo "FAIL cc could not build the planted objects: the call check is unproven"
      bad=$((bad + 1))
    fi
    rm -rf "$P"
    echo "${#objs[@]} objects, $calls_checked calls between them checked against the floors"
  fi
fi
# no function of the library or the command longer than 150 lines (a definition opens at
# column 0, its signature's last line ends with ") {", and it closes with "}" at column 0;
# tables end with "};" and are not counted)
long_fns() { # FILES...: FILE:LINE: N lines NAME for each function over 150 lines
  awk 'FNR == 1 { s = cand = 0 }
       !s && /^[a-zA-Z_]/ && !/;$/ { cand = FNR; name = $0 }
       !s && cand && /[)] *[{]$/ { s = cand }
       s && /^}$/ { if (FNR - s + 1 > 150) printf "%s:%d: %d lines %s\n", FILENAME, s, FNR - s + 1, substr(name, 1, 60); s = cand = 0 }' "$@"
}
srcs=()
for dir in "${DIRS[@]}" apps; do
  for f in "$dir"/*.c "$dir"/*.cu; do [[ -e $f ]] && srcs+=("$f"); done
done
while IFS= read -r l; do
  echo "FAIL a function over 150 lines: $l"
  bad=$((bad + 1))
done < <(long_fns "${srcs[@]}")
P=$(mktemp -d)
{ echo 'int planted(void) {'; for i in $(seq 150); do echo '    (void)0;'; done; echo '}'; } >"$P/long.c"
if [[ -n $(long_fns "$P/long.c") ]]; then
  echo "ok   a planted 152-line function is caught (${#srcs[@]} sources checked)"
else
  echo "FAIL a planted 152-line function went unseen"
  bad=$((bad + 1))
fi
rm -rf "$P"
((bad == 0))
