#!/usr/bin/env bash
# The house's floors (docs/architecture.md "Folders and floors"): a library file includes
# only headers of its own floor or a lower one, so data and control flow one way and no
# import runs back up. apps/ and examples/ see the public headers only. Fails naming every
# include that breaks the rule.   usage: test_layout.sh SOURCE_DIR
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
# floor of each folder, lowest first; include/nestpipe (the public API) is below them all
declare -A FLOOR=(
  [nestpipe]=0
  [core]=1
  [kernels]=2 [cuda]=2
  [layers]=3
  [model]=4 [data]=4 [comm]=4 [trace]=4
  [codelets]=5 [scale]=5 [graph]=5
  [tasks]=6
  [engine]=7
  [state]=8
  [train]=9
)
bad=0 checked=0
# the table above is docs/architecture.md's: the two must agree
while IFS='|' read -r _ floor dir _; do
  floor=${floor// /} dir=${dir//[ \`\/]/}
  [[ $floor =~ ^[0-9]+$ && -n $dir ]] || continue
  [[ $dir == includenestpipe ]] && dir=nestpipe
  if [[ ${FLOOR[$dir]-x} != "$floor" ]]; then
    echo "FAIL docs/architecture.md puts $dir/ on floor $floor, this test on ${FLOOR[$dir]-none}"
    bad=$((bad + 1))
  fi
done < <(grep -E '^\| [0-9]+ \| `' docs/architecture.md)
for dir in core kernels cuda layers model data comm trace codelets scale graph tasks engine state train; do
  mine=${FLOOR[$dir]}
  for f in "$dir"/*.[ch] "$dir"/*.cu "$dir"/*.cuh; do
    [[ -e $f ]] || continue
    while IFS= read -r inc; do
      target=${inc%%/*}
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
((bad == 0))
