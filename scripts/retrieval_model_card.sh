#!/usr/bin/env bash
# Measures the accuracy table of the retrieval test model's card (tests/fixtures/retrieval-model/MODEL_CARD.md) with
# kascade itself: passkey retrieval, greedy, dense / StreamingLLM (needle outside and inside its window) / oracle
# top-k at 10 %, per prompt length and needle-depth bucket. Every sample is stored in RESULTS (resumable: run it
# again after an interruption); the tables come from `kascade query`.
#   scripts/retrieval_model_card.sh [RESULTS] [LENGTHS] [SAMPLES] [DENSE_ONLY_LENGTHS] [DENSE_ONLY_SAMPLES]
#   scripts/retrieval_model_card.sh /tmp/card "1024 2048 4096" 10 "8192 16384" 3
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-/tmp/retrieval-model-card}"
lengths="${2:-1024 2048 4096}"
samples="${3:-10}"   # per length and depth: 11 depths x 10 = 110 prompts per length
dense_lengths="${4:-8192 16384}"   # lengths measured with dense attention only (the model's reach)
dense_samples="${5:-3}"
kascade="${KASCADE:-build/pipeline/kascade}"
model="${MODEL:-tests/fixtures/retrieval-model}"   # MODEL=folder measures another checkpoint

run() { "$kascade" task --results "$results" --model "$model" --task passkey --seed 1 "$@" --json; }
for length in $lengths; do
  run --lengths "$length" --depths 11 --samples "$samples" --method dense
  run --lengths "$length" --depths 11 --samples "$samples" --method oracle --topk-pct 10 --k-min 64
  # StreamingLLM with a sink tile and 256 recent keys: the needle 0-50 % deep is outside its window at these
  # lengths, 100 % deep (just before the question) inside.
  run --lengths "$length" --depth-pcts 0,10,20,30,40,50 --samples "$((samples * 11 / 6 + 1))" \
      --method streaming --topk-tiles 17 --tile 16
  run --lengths "$length" --depth-pcts 100 --samples "$((samples * 11))" --method streaming --topk-tiles 17 --tile 16
done
for length in $dense_lengths; do
  run --lengths "$length" --depths 11 --samples "$dense_samples" --method dense
done

echo
echo "## Accuracy by prompt length"
"$kascade" query sql --results "$results" --format markdown "
  SELECT method || CASE WHEN method = 'streaming' THEN
           CASE WHEN depth_pct = 100 THEN ' (needle inside window)' ELSE ' (needle outside window)' END
         WHEN method = 'oracle' THEN ' top-k 10 %' ELSE '' END AS method,
         length, count(*) AS prompts, round(avg(score), 3) AS accuracy, round(avg(density), 3) AS density
  FROM task_samples_flat WHERE task = 'passkey' AND seed = 1
  GROUP BY 1, length ORDER BY 1, length"
echo
echo "## Dense and oracle accuracy by needle depth (0-30 %, 40-60 %, 70-100 %)"
"$kascade" query sql --results "$results" --format markdown "
  SELECT method, length,
         round(avg(CASE WHEN depth_pct <= 30 THEN score END), 3) AS 'depth 0-30 %',
         round(avg(CASE WHEN depth_pct > 30 AND depth_pct < 70 THEN score END), 3) AS 'depth 40-60 %',
         round(avg(CASE WHEN depth_pct >= 70 THEN score END), 3) AS 'depth 70-100 %'
  FROM task_samples_flat WHERE task = 'passkey' AND seed = 1 AND method IN ('dense', 'oracle')
  GROUP BY method, length ORDER BY method, length"
