# Sourced by the bench scripts that plan and generate projects (bench/cuda/make_projects.sh,
# bench/memory/make_matrix.sh), from the repository root: autoddl_bin SCRIPT sets $autoddl, where
# --autoddl left it empty, to the first built binary (build/, then build-*/), and exits 2 naming
# SCRIPT where there is none.
autoddl_bin() {
  if [ -z "$autoddl" ]; then
    for b in build/tools/autoddl/autoddl build-*/tools/autoddl/autoddl; do
      [ -x "$b" ] && autoddl=$b && break
    done
  fi
  [ -x "$autoddl" ] || { echo "$1: no autoddl binary (--autoddl BIN)" >&2; exit 2; }
}
