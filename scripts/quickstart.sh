#!/usr/bin/env bash
# The main job: installs dependencies, builds kascade (Release, host-optimised), finds or fetches the models and
# texts, runs the quick sweep on stories260K (experiments/stories260k-quick.toml) and prints the results table.
# Results go to results/ (kascade.db + artifacts/); running it again reuses everything already computed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target kascade
export KASCADE_ASSETS="$(scripts/fetch_assets.sh | tail -n 1)"
build/pipeline/kascade sweep experiments/stories260k-quick.toml --results results
echo
echo "All runs in results/kascade.db (kascade query runs --results results):"
build/pipeline/kascade query runs --results results
