#!/usr/bin/env bash
# The importer under the sanitizers, kept cheap for a 2-core CI:
#  1. ASan+UBSan build (own build dir, -DAUTODDL_SANITIZE=ON) of the op-semantics
#     and importer unit tests, which run every front end and the malformed-input
#     suite in process; then runs them.
#  2. A clang/libFuzzer build (-DAUTODDL_FUZZ=ON, ASan+UBSan) of the JSON importer's
#     fuzz target, run for AUTODDL_FUZZ_SECONDS (default 45) over a corpus seeded
#     from examples/models/. A crash, leak, sanitizer report, hang or OOM fails.
# Set AUTODDL_FUZZ_SECONDS=0 to skip the fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${AUTODDL_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
# Paths relative to the checkout: build dirs side by side (build-<name>) share cache hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

asan_dir=${AUTODDL_SANITIZE_BUILD_DIR:-build-sanitize}
echo "sanitize: ASan/UBSan build of the importer tests in $asan_dir"
if [ ! -f "$asan_dir/build.ninja" ]; then
  cmake -S . -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAUTODDL_SANITIZE=ON >/dev/null
fi
cmake --build "$asan_dir" -j "$jobs" --target ops_semantics_test import_test
"$asan_dir/tests/unit/import/ops_semantics_test" --gtest_brief=1
"$asan_dir/tests/unit/import/import_test" --gtest_brief=1

seconds=${AUTODDL_FUZZ_SECONDS:-45}
if [ "$seconds" -eq 0 ]; then
  echo "sanitize: fuzz run skipped (AUTODDL_FUZZ_SECONDS=0)"
  exit 0
fi
fuzz_dir=${AUTODDL_FUZZ_BUILD_DIR:-build-fuzz}
echo "sanitize: libFuzzer build of import_fuzzer in $fuzz_dir"
if [ ! -f "$fuzz_dir/build.ninja" ]; then
  cmake -S . -B "$fuzz_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DAUTODDL_FUZZ=ON -DAUTODDL_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
fi
cmake --build "$fuzz_dir" -j "$jobs" --target import_fuzzer

# A scratch corpus: the fuzzer adds inputs to it, never to examples/models.
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp examples/models/*.json "$corpus/"
echo "sanitize: fuzzing the JSON importer for ${seconds}s"
"$fuzz_dir/tests/fuzz/import_fuzzer" "$corpus" -dict=tests/fuzz/json.dict \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
  -print_final_stats=1 -artifact_prefix="$fuzz_dir/" 2>&1 | tail -n 15
# The ONNX reader, over the test models of tests/onnx encoded by protoc.
cmake --build "$fuzz_dir" -j "$jobs" --target onnx_fuzzer
mkdir "$corpus/onnx"
for t in tests/onnx/models/*.txtpb; do
  protoc --encode=onnx.ModelProto -I/usr/include onnx/onnx.proto <"$t" >"$corpus/onnx/$(basename "$t" .txtpb).onnx"
done
echo "sanitize: fuzzing the ONNX reader for ${seconds}s"
"$fuzz_dir/tests/fuzz/onnx_fuzzer" "$corpus/onnx" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix="$fuzz_dir/" 2>&1 | tail -n 15
echo "sanitize: ok"
