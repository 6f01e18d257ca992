#!/usr/bin/env bash
# The readers of user files under the sanitizers, kept cheap for a 2-core CI: one clang build
# (-DAUTODDL_FUZZ=ON -DAUTODDL_SANITIZE=ON: ASan+UBSan, and libFuzzer's coverage
# instrumentation, which the unit tests run under unharmed) compiles the importer once for
#  1. the op-semantics and importer unit tests, which run every front end and the
#     malformed-input suite in process; then runs them;
#  2. the JSON importer's fuzz target, run for AUTODDL_FUZZ_SECONDS (default 20) over a
#     corpus seeded from examples/models/, then the cluster-file, plan and ONNX readers'
#     targets for AUTODDL_DOC_FUZZ_SECONDS each (default 5), and the generated programs' flag
#     parser (argv as NUL-separated bytes) for as long. A crash, leak, sanitizer report, hang or OOM
#     fails.
# Set AUTODDL_FUZZ_SECONDS=0 to skip the fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${AUTODDL_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
# Paths relative to the checkout: build dirs side by side (build-<name>) share cache hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

dir=${AUTODDL_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${AUTODDL_FUZZ_SECONDS:-20}
fuzzers=(import_fuzzer cluster_fuzzer plan_fuzzer onnx_fuzzer flags_fuzzer)
[ "$seconds" -eq 0 ] && fuzzers=()
echo "sanitize: clang ASan/UBSan/libFuzzer build of the importer tests and fuzzers in $dir"
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DAUTODDL_FUZZ=ON -DAUTODDL_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
fi
cmake --build "$dir" -j "$jobs" --target ops_semantics_test import_test "${fuzzers[@]}"
"$dir/tests/unit/import/ops_semantics_test" --gtest_brief=1
"$dir/tests/unit/import/import_test" --gtest_brief=1

if [ "$seconds" -eq 0 ]; then
  echo "sanitize: fuzz runs skipped (AUTODDL_FUZZ_SECONDS=0)"
  exit 0
fi

# A scratch corpus: the fuzzer adds inputs to it, never to examples/models.
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp examples/models/*.json "$corpus/"
echo "sanitize: fuzzing the JSON importer for ${seconds}s"
"$dir/tests/fuzz/import_fuzzer" "$corpus" -dict=tests/fuzz/json.dict \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
  -print_final_stats=1 -artifact_prefix="$dir/" 2>&1 | tail -n 15
# Cluster files, plans and ONNX models: a few seconds each (AUTODDL_DOC_FUZZ_SECONDS), seeded
# from the presets, the committed plans and the test models of tests/onnx (encoded by protoc).
doc_seconds=${AUTODDL_DOC_FUZZ_SECONDS:-5}
for doc in cluster plan onnx; do
  doc_corpus="$corpus/$doc"
  mkdir -p "$doc_corpus"
  if [ $doc = cluster ]; then
    cp examples/clusters/*.json "$doc_corpus/"
  elif [ $doc = onnx ]; then
    for t in tests/onnx/models/*.txtpb; do
      protoc --encode=onnx.ModelProto -I/usr/include onnx/onnx.proto <"$t" \
        >"$doc_corpus/$(basename "$t" .txtpb).onnx"
    done
  else
    find bench/results -name '*.json' -path '*plans*' -exec cp {} "$doc_corpus/" \;
  fi
  echo "sanitize: fuzzing the $doc reader for ${doc_seconds}s"
  dict=(-dict=tests/fuzz/json.dict)
  [ $doc = onnx ] && dict=()
  "$dir/tests/fuzz/${doc}_fuzzer" "$doc_corpus" "${dict[@]}" \
    -max_total_time="$doc_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 -artifact_prefix="$dir/$doc-" 2>&1 | tail -n 5
done
# The generated programs' flags: argv as NUL-separated arguments, seeded with valid lines.
flags_corpus="$corpus/flags"
mkdir -p "$flags_corpus"
seed() { # seed NAME ZERO ARGS...: the zero byte, then the arguments NUL-separated
  local name=$1 zero=$2
  shift 2
  { printf "\\$zero"; printf '%s\0' "$@" | head -c -1; } >"$flags_corpus/$name"
}
seed save 0 --steps 20 --lr 3e-4 --save ck --save-every 5
seed resume 1 --resume ck/step-5 --steps 8 --lr 0 --optimizer sgd
seed out 0 --seed 99 --weight-decay 0.1 --data d.bin --out o --trace --quiet
echo "sanitize: fuzzing the generated programs' flag parser for ${doc_seconds}s"
"$dir/tests/fuzz/flags_fuzzer" "$flags_corpus" -max_total_time="$doc_seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 -artifact_prefix="$dir/flags-" 2>&1 |
  tail -n 5
echo "sanitize: ok"
