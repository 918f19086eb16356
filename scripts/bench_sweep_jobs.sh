#!/usr/bin/env bash
# Wall time of a sweep (default: the quick sweep) from an empty results folder with --jobs 1 and --jobs 2 (and, for reference,
# --jobs 1 on one thread), interleaved, each repeated; prints every run with the load average before it. The report
# is skipped (--no-report): it is drawn once, after the jobs, the same way for every setting.
#   scripts/bench_sweep_jobs.sh [REPEATS] [SWEEP_FILE]
#       REPEATS default 3; SWEEP_FILE default experiments/stories260k-quick.toml (bench/sweep-evals.toml: one
#       dominated by evals). Needs build/pipeline/kascade and KASCADE_ASSETS.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
sweep=${2:-experiments/stories260k-quick.toml}
: "${KASCADE_ASSETS:?set KASCADE_ASSETS to the folder with models/ and data/ (scripts/fetch_assets.sh prints it)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
for _ in $(seq "$repeats"); do
  for config in "1 $threads" "2 $threads" "1 1"; do
    set -- $config
    rm -rf "$work/results"
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$(date +%s.%N)
    OMP_NUM_THREADS=$2 build/pipeline/kascade sweep "$sweep" --results "$work/results" \
      --jobs "$1" --no-report >/dev/null
    end=$(date +%s.%N)
    printf 'jobs=%s threads=%s wall=%.2f s (load average before: %s)\n' "$1" "$2" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$load"
  done
done
