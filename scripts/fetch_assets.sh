#!/usr/bin/env bash
# Puts the models and texts kascade's main job and tests use into one folder, with the layout of the project's
# shared/ folder:
#   models/stories260K/{stories260K.bin,tok512.bin}      Hugging Face karpathy/tinyllamas (MIT)
#   models/smollm2-135m-tokenizer/{config.json,tokenizer.json}  HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0)
#   data/tinystories/TinyStories-valid.head.txt         roneneldan/TinyStories, first 232 validation stories
#   data/wikitext-2/wiki.test.raw                       WikiText-2 raw test split, non-empty rows, CRLF
#   data/moby-dick/pg2701.txt                           Project Gutenberg #2701, header and footer removed, CRLF
# Prints the folder on the last line. If ../shared exists beside the checkout it is used as it is.
#   scripts/fetch_assets.sh [DIR]     (default: $KASCADE_ASSETS, else ~/.cache/kascade/assets)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${1:-}" ] && [ -z "${KASCADE_ASSETS:-}" ] && [ -d ../shared/models/stories260K ]; then
  (cd ../shared && pwd)
  exit 0
fi
dir="${1:-${KASCADE_ASSETS:-$HOME/.cache/kascade/assets}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
hf="https://huggingface.co"

# fetch URL DEST [SHA256]: downloads to DEST.part, checks the checksum if given, renames into place.
fetch() {
  local url="$1" dest="$2" sum="${3:-}"
  if [ -f "$dest" ]; then return 0; fi
  mkdir -p "$(dirname "$dest")"
  echo "fetch_assets: $url" >&2
  curl -fL --retry 3 -o "$dest.part" "$url"
  if [ -n "$sum" ]; then check "$dest.part" "$sum"; fi
  mv "$dest.part" "$dest"
}

check() {
  local file="$1" sum="$2"
  if ! echo "$sum  $file" | sha256sum -c --status; then
    echo "fetch_assets: $file: sha256 $(sha256sum "$file" | cut -d' ' -f1), expected $sum" >&2
    rm -f "$file"
    exit 1
  fi
}

# The long texts are re-derived from their upstream files; a different cut of the same text still serves the
# tokenizer round-trip tests, so a checksum difference there is reported, not fatal.
check_or_warn() {
  local file="$1" sum="$2"
  if ! echo "$sum  $file" | sha256sum -c --status; then
    echo "fetch_assets: note: $file differs from the project's copy (sha256 $sum); perplexity figures on it may" \
         "differ slightly from the README's" >&2
  fi
}

command -v curl >/dev/null || { echo "fetch_assets: needs curl (apt-get install curl)" >&2; exit 1; }

fetch "$hf/karpathy/tinyllamas/resolve/main/stories260K/stories260K.bin" "$dir/models/stories260K/stories260K.bin" \
  b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696
fetch "$hf/karpathy/tinyllamas/resolve/main/stories260K/tok512.bin" "$dir/models/stories260K/tok512.bin" \
  037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312
fetch "$hf/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/config.json" "$dir/models/smollm2-135m-tokenizer/config.json"
fetch "$hf/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/tokenizer.json" \
  "$dir/models/smollm2-135m-tokenizer/tokenizer.json"

stories="$dir/data/tinystories/TinyStories-valid.head.txt"
if [ ! -f "$stories" ]; then
  fetch "$hf/datasets/roneneldan/TinyStories/resolve/main/TinyStories-valid.txt" "$dir/data/tinystories/valid.txt"
  mkdir -p "$(dirname "$stories")"
  # The first 232 stories, each ended by its <|endoftext|> line.
  awk '{ print } /^<\|endoftext\|>/ { if (++n == 232) exit }' "$dir/data/tinystories/valid.txt" > "$stories.part"
  check "$stories.part" 94606cb84a35fcf84cf2652f801d97a838a09dd771726f7cc5a6666417419ad6
  mv "$stories.part" "$stories"
  rm -f "$dir/data/tinystories/valid.txt"
fi

wiki="$dir/data/wikitext-2/wiki.test.raw"
if [ ! -f "$wiki" ]; then
  fetch "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-raw-v1.zip" "$dir/data/wikitext-2/raw.zip"
  (cd "$dir/data/wikitext-2" && unzip -o -q raw.zip wikitext-2-raw/wiki.test.raw)
  # The non-empty rows, CRLF line endings.
  awk 'NF { sub(/\r$/, ""); printf "%s\r\n", $0 }' "$dir/data/wikitext-2/wikitext-2-raw/wiki.test.raw" > "$wiki.part"
  check_or_warn "$wiki.part" 4f3e427e4aff23acff917a8a51aeae21bf12832256e26914c8fc250dcef4103c
  mv "$wiki.part" "$wiki"
  rm -rf "$dir/data/wikitext-2/raw.zip" "$dir/data/wikitext-2/wikitext-2-raw"
fi

moby="$dir/data/moby-dick/pg2701.txt"
if [ ! -f "$moby" ]; then
  fetch "https://www.gutenberg.org/cache/epub/2701/pg2701.txt" "$dir/data/moby-dick/gutenberg.txt"
  # Between the "*** START OF" and "*** END OF" lines of Project Gutenberg's wrapper.
  awk '/^\*\*\* END OF/ { exit } started { print } /^\*\*\* START OF/ { started = 1 }' \
    "$dir/data/moby-dick/gutenberg.txt" > "$moby.part"
  check_or_warn "$moby.part" 2975c3faf22ded4b19716486bdee4e24999f6ee9dc36c227ab624faaf154af14
  mv "$moby.part" "$moby"
  rm -f "$dir/data/moby-dick/gutenberg.txt"
fi
echo "$dir"
