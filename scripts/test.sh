#!/usr/bin/env bash
# The test command: installs dependencies, builds Release (host-optimised) and runs every test with CTest, then
# builds the tests again with AddressSanitizer + UndefinedBehaviorSanitizer and runs them there too, then fuzzes
# every file parser for 40 s (scripts/fuzz.sh).
#   scripts/test.sh            all three
#   scripts/test.sh --quick    Release build only (for a fast local loop)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-test-tools

jobs=$(nproc)
# The models and texts the tests read: ../shared beside the checkout, else the fetched copy (scripts/fetch_assets.sh).
assets="$(scripts/fetch_assets.sh | tail -n 1)"
export KASCADE_REQUIRE_NODE_REFERENCE=1   # the tokenizer cross-check must run, not skip

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKASCADE_SHARED_DIR="$assets" >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${1:-}" != "--quick" ]; then
  # Sanitizers: -O1 keeps them fast enough; benchmarks are not built here.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKASCADE_SANITIZE=ON -DKASCADE_SHARED_DIR="$assets" \
        -DKASCADE_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"

  # Fuzzing: each libFuzzer target of tests/fuzz for 40 s under ASan + UBSan (clang, its own build-fuzz/ folder;
  # 14 targets, about 5 minutes on 2 cores). Its HDF5 seeds come from the Release kascade built above.
  scripts/fuzz.sh 40
fi
