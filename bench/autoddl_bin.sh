# Sourced by the bench scripts that plan and generate projects (bench/cuda/make_projects.sh,
# bench/memory/make_matrix.sh), from the repository root.
#
# shellcheck shell=bash

# bench_arg SCRIPT "$@": the arguments both take, in their loop over "$@" (then `shift $used`):
# --autoddl BIN, --models a,b, and OUT (the one positional); any other option exits 2 naming SCRIPT.
# shellcheck disable=SC2034 # it sets the caller's $autoddl, $models, $out and $used
bench_arg() {
  case "$2" in
  --autoddl) autoddl=$3; used=2 ;;
  --models) models=$3; used=2 ;;
  -*) echo "$1: unknown option $2" >&2; exit 2 ;;
  *) out=$2; used=1 ;;
  esac
}

# autoddl_bin SCRIPT sets $autoddl, where --autoddl left it empty, to the first built binary
# (build/, then build-*/), and exits 2 naming SCRIPT where there is none.
autoddl_bin() {
  if [ -z "$autoddl" ]; then
    for b in build/tools/autoddl/autoddl build-*/tools/autoddl/autoddl; do
      [ -x "$b" ] && autoddl=$b && break
    done
  fi
  [ -x "$autoddl" ] || { echo "$1: no autoddl binary (--autoddl BIN)" >&2; exit 2; }
}
