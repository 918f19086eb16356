#!/usr/bin/env bash
# calibration-transfer: does a Kascade schedule calibrated on one text serve another? stories260K's DP schedules
# (K = 2, 3; top-k 4, 8, 12 tiles of 16) calibrated on TinyStories are evaluated on WikiText-2 and the reverse,
# each beside the schedule calibrated in-domain on the same test tokens [8687, 16879).
#
# A sweep file has one [text] for calibration and test, so the transfer runs are made stage by stage: the two
# sweeps (stories260k-quick.toml, calibration-wikitext.toml) make the schedules and the in-domain runs, then
# `kascade eval --schedule ID --text OTHER` scores each DP schedule on the other text. About 8 minutes on 2 cores:
#
#   KASCADE_ASSETS=../shared experiments/calibration-transfer.sh [results folder, default results/studies]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KASCADE_ASSETS:?export KASCADE_ASSETS (the folder with models/ and data/)}"
results="${1:-results/studies}"
kascade="${KASCADE:-build/pipeline/kascade}"
model="$KASCADE_ASSETS/models/stories260K/stories260K.bin"
stories="$KASCADE_ASSETS/data/tinystories/TinyStories-valid.head.txt"
wiki="$KASCADE_ASSETS/data/wikitext-2/wiki.test.raw"

"$kascade" sweep experiments/stories260k-quick.toml --results "$results" --no-report
"$kascade" sweep experiments/calibration-wikitext.toml --results "$results" --no-report

# Every DP schedule of the default similarity settings at ctx 512 / tile 16, with the text it was calibrated on.
"$kascade" query sql --results "$results" --format csv \
  "SELECT s.id, t.path FROM schedules s JOIN similarities m ON m.artifact_key = s.similarity_key
     JOIN captures c ON c.artifact_key = m.capture_key JOIN texts t ON t.id = c.text_id
    WHERE s.policy = 'dp' AND s.n_anchors IN (2, 3) AND s.metric = 'recall' AND s.aggregation = 'mean'
      AND s.head_map = 'argmax' AND c.ctx = 512 AND c.tile = 16 AND c.token_offset = 0 AND c.n_tokens = 8687
      AND m.topk_tiles IN (4, 8, 12)" |
  tail -n +2 | tr -d '\r' | while IFS=, read -r id calibration_text; do
    case "$calibration_text" in
      *TinyStories*) other="$wiki" ;;
      *) other="$stories" ;;
    esac
    "$kascade" eval --results "$results" --model "$model" --text "$other" --schedule "$id" \
      --offset 8687 --eval-tokens 8192
  done

"$kascade" report --results "$results" --out "$results/reports/calibration-transfer" --where \
  "ctx = 512 AND token_offset = 8687 AND n_tokens = 8192 AND (method = 'dense' OR (method = 'kascade' AND
   policy = 'dp' AND n_anchors IN (2, 3) AND metric = 'recall' AND aggregation = 'mean' AND head_map = 'argmax'
   AND topk_tiles IN (4, 8, 12) AND tile = 16))"
