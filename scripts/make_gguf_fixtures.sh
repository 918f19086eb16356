#!/usr/bin/env bash
# scripts/make_gguf_fixtures.sh: rebuilds tests/fixtures/gguf, the GGUF files the tests read, with writers other than
# kascade: llama.cpp's own converter (convert_hf_to_gguf.py), its llama-quantize and llama-tokenize, and gguf-py.
#
# Needs: an extracted llama.cpp source tree at commit c392e5094deaf2d1a7c18683214f007fad3fe42b (the snapshot the
# fixtures were made from: `git -C <snapshot> archive HEAD -- . ':(exclude)models/*.gguf' | tar -x -C DIR`), given
# as LLAMA_CPP (default /tmp/peer/llama.cpp); Debian's python3-torch and python3-numpy; the shared assets folder
# (KASCADE_SHARED_DIR, default ../shared) for stories260K-hf, SmolLM2's tokenizer.json and the texts. llama-quantize
# and llama-tokenize are built in $LLAMA_CPP/build if missing (5-10 minutes on 2 cores).
#
#   scripts/make_gguf_fixtures.sh
#
# What it writes (tests/fixtures/gguf/README.md says which test compares what):
#   stories260K-{f32,bf16,q8_0}.gguf     convert_hf_to_gguf.py --outtype f32|bf16|q8_0 of models/stories260K-hf, the
#                                        vocabulary taken from its llama2.c tok512.bin (SentencePiece pieces)
#   random-bpe-tokenizer.json            SmolLM2's tokenizer.json cut to its first 512 ids
#   random-bpe-q4_k_m.gguf               a random 2-layer model (dim 256, GQA 4/2) with that tokenizer, converted to
#                                        F32 and quantized by llama-quantize to Q4_K_M (Q4_K and Q6_K tensors)
#   *-reference/                         each quantized file's tensors dequantized by gguf-py, q/k order undone,
#                                        as a Hugging Face folder (BF16 as kascade keeps them; F32/F16 as stored)
#   dequant-types.gguf, dequant-types-reference.safetensors
#                                        random blocks of F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and gguf-py's
#                                        fp32 dequantization of each
#   llama31-rope-bf16.gguf, llama31-rope-config.json
#                                        a small random model with Llama 3.1's rope_scaling, converted (its RoPE
#                                        factors become the rope_freqs tensor), and the config.json it came from
#   tokenizer-text.txt, *.llama-tokenize.txt
#                                        TinyStories, WikiText-2, Moby Dick and a Unicode line; the ids
#                                        llama-tokenize --no-bos gives for it with each model's embedded tokenizer
# and the fuzz seeds tests/fuzz/corpus/gguf/tiny-{llama,gpt2}.gguf.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP=${LLAMA_CPP:-/tmp/peer/llama.cpp}
SHARED=${KASCADE_SHARED_DIR:-../shared}
PY=/usr/bin/python3
OUT=tests/fixtures/gguf
TOOLS="$PY scripts/gguf_fixtures.py --llama-cpp $LLAMA_CPP --shim $SHARED/tools/llama-cpp-peer/shim"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [ ! -x "$LLAMA_CPP/build/bin/llama-quantize" ] || [ ! -x "$LLAMA_CPP/build/bin/llama-tokenize" ]; then
  cmake -S "$LLAMA_CPP" -B "$LLAMA_CPP/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$LLAMA_CPP/build" -j2 --target llama-quantize llama-tokenize >/dev/null
fi

mkdir -p "$OUT" tests/fuzz/corpus/gguf
find "$OUT" -mindepth 1 ! -name README.md -delete  # README.md is written by hand

# (a) stories260K: real weights, SentencePiece-style vocabulary.
for type in f32 bf16 q8_0; do
  $TOOLS convert "$SHARED/models/stories260K-hf" --llama2c-tokenizer "$SHARED/models/stories260K-hf/tok512.bin" \
         --outtype $type --outfile "$OUT/stories260K-$type.gguf"
done
$TOOLS reference "$OUT/stories260K-q8_0.gguf" "$SHARED/models/stories260K-hf/config.json" \
       "$OUT/stories260K-q8_0-reference"

# (b) a random model with a byte-level BPE vocabulary, rows of 256 so that the K-quants apply.
cat > "$WORK/config.json" <<'EOF'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 256,
  "intermediate_size": 256,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "vocab_size": 512,
  "max_position_embeddings": 512,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "tie_word_embeddings": true,
  "bos_token_id": 0,
  "eos_token_id": 0,
  "hidden_act": "silu",
  "initializer_range": 0.1,
  "torch_dtype": "float32"
}
EOF
$TOOLS random-model "$WORK/config.json" "$WORK/random-bpe" --seed 24
$TOOLS bpe-tokenizer "$SHARED/models/smollm2-135m-tokenizer/tokenizer.json" 512 "$OUT/random-bpe-tokenizer.json"
cp "$OUT/random-bpe-tokenizer.json" "$WORK/random-bpe/tokenizer.json"
$TOOLS convert "$WORK/random-bpe" --outtype f32 --outfile "$WORK/random-bpe-f32.gguf"
"$LLAMA_CPP/build/bin/llama-quantize" "$WORK/random-bpe-f32.gguf" "$OUT/random-bpe-q4_k_m.gguf" Q4_K_M >/dev/null 2>&1
$TOOLS reference "$OUT/random-bpe-q4_k_m.gguf" "$WORK/config.json" "$OUT/random-bpe-q4_k_m-reference"

# (c) every dequantized type on its own.
$TOOLS dequant-types "$OUT/dequant-types.gguf" "$OUT/dequant-types-reference.safetensors"

# (d) llama.cpp's ids for a text of every kind (ASCII stories, WikiText's markup and digits, Unicode).
$PY - "$SHARED" "$OUT/tokenizer-text.txt" <<'EOF'
import sys
shared, out = sys.argv[1], sys.argv[2]
def head(path, n, start=""):
    text = open(f"{shared}/data/{path}", encoding="utf-8").read()
    text = text[text.find(start):] if start else text
    return text[:text.rfind("\n", 0, n) + 1]
text = (head("tinystories/TinyStories-valid.head.txt", 3000) + head("wikitext-2/wiki.test.raw", 2500)
        + head("moby-dick/pg2701.txt", 1500, "CHAPTER 1. Loomings."))
text += "Unicode: naïve café — “quoted” Straße, 日本語, emoji 😀 and tabs\tand  double  spaces.\n"
open(out, "w", encoding="utf-8").write(text)
EOF
for model in stories260K-f32 random-bpe-q4_k_m; do
  "$LLAMA_CPP/build/bin/llama-tokenize" -m "$OUT/$model.gguf" -f "$OUT/tokenizer-text.txt" --ids --no-bos \
      --log-disable 2>/dev/null | tr -d '[] ' | tr ',' '\n' > "$OUT/$model.llama-tokenize.txt"
done

# (e) Llama 3.1's RoPE scaling, which the converter turns into a rope_freqs tensor: a small random model.
$PY - "$WORK/config.json" "$WORK/llama31-rope-config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
         max_position_embeddings=131072, rope_theta=500000.0,
         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192})
json.dump(c, open(sys.argv[2], "w"), indent=2)
EOF
$TOOLS random-model "$WORK/llama31-rope-config.json" "$WORK/llama31-rope" --seed 31
cp "$OUT/random-bpe-tokenizer.json" "$WORK/llama31-rope/tokenizer.json"
$TOOLS convert "$WORK/llama31-rope" --outtype bf16 --outfile "$OUT/llama31-rope-bf16.gguf"
cp "$WORK/llama31-rope-config.json" "$OUT/llama31-rope-config.json"

# (f) the fuzz seeds.
$TOOLS tiny llama tests/fuzz/corpus/gguf/tiny-llama.gguf
$TOOLS tiny gpt2 tests/fuzz/corpus/gguf/tiny-gpt2.gguf
du -ch "$OUT" tests/fuzz/corpus/gguf | tail -1
