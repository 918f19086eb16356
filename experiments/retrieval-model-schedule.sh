#!/usr/bin/env bash
# Capture -> similarity -> schedule on the retrieval test model at 4K tokens: how its layers' top-k keys relate, and
# the schedules Kascade picks for it (experiments/README.md, "retrieval-model"). The calibration text is four
# passkey prompts of 4095 tokens made by `kascade task --show-prompt`, each followed by its answer, so that every
# capture window is one prompt.
#   experiments/retrieval-model-schedule.sh [RESULTS]
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-/tmp/retrieval-model-schedule}"
kascade="${KASCADE:-build/pipeline/kascade}"
model=tests/fixtures/retrieval-model
mkdir -p "$results"
text="$results/passkey-4k.txt"
rm -f "$text.partial"
for i in 0 1 2 3; do
  "$kascade" task --model "$model" --task passkey --lengths 4095 --depth-pcts $((10 + 27 * i)) --seed $((11 + i)) \
      --method dense --show-prompt >"$results/prompt.txt" 2>"$results/prompt.err"
  answer=$(sed 's/.*\["\([0-9]*\)"\].*/\1/' "$results/prompt.err")
  { head -c -1 "$results/prompt.txt"; printf ' %s.\n' "$answer"; } >>"$text.partial"
done
mv "$text.partial" "$text"
rm -f "$results/prompt.txt" "$results/prompt.err"

"$kascade" capture --results "$results" --model "$model" --text "$text" --calib-tokens 16380 --ctx 4096 --tile 32 \
    --save-qk
capture=$("$kascade" query sql --results "$results" --format csv "SELECT artifact_key FROM captures" | tail -n 1 | tr -d '\r')
"$kascade" similarity --results "$results" --capture "$capture" --topk-pct 10 --k-min 64
similarity=$("$kascade" query sql --results "$results" --format csv "SELECT artifact_key FROM similarities" | tail -n 1 | tr -d '\r')
"$kascade" schedule --results "$results" --similarity "$similarity" --policy dp --anchors 2
"$kascade" schedule --results "$results" --similarity "$similarity" --policy threshold --threshold 0.8
"$kascade" query sql --results "$results" --format markdown \
    "SELECT schedule_id, layer, role, anchor_layer, round(similarity, 3) AS similarity FROM schedule_layers
     ORDER BY schedule_id, layer"
# Mean mass recall of layer j's top-k keys by layer i's (the similarity the schedules are chosen from), KV head 0.
h5dump -d recall_mean "$results/artifacts/similarity/$similarity.h5" | sed -n '/DATA/,/}/p'
