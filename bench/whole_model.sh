#!/usr/bin/env bash
# bench/whole_model.sh: whole-model speed and peak memory of `kascade perplexity` / `kascade generate` on random BF16
# checkpoints of SmolLM2-135M and Llama-3.2-1B, optionally side by side with llama.cpp on the same weights.
#
#   bench/whole_model.sh                                  kascade only
#   LLAMA_CPP_DIR=/tmp/peer/llama.cpp bench/whole_model.sh   also llama.cpp (built per ../shared/tools/llama-cpp-peer)
#
# What it does:
#  1. writes the checkpoints with `kascade random-model` (SmolLM2's tokenizer.json beside both: Llama-3.2-1B's own
#     tokenizer is not in ../shared, and the ids only need to be valid) into $MODELS (kept and reused);
#  2. per configuration, runs `kascade perplexity` under /usr/bin/time -f %M for tokens/s and peak RSS:
#     kascade with --weights-dtype f32, and on the BF16 file with --matmul exact and --matmul bf16; decode tokens/s
#     from `kascade generate -n 64 --greedy` (SmolLM2 only: generate prints the tokens, and Llama's ids beyond the
#     borrowed tokenizer cannot be printed; bench_forward has the Llama decode rows);
#  3. with LLAMA_CPP_DIR: converts each checkpoint to GGUF f32 and bf16 (convert_wrap.py of llama-cpp-peer) and runs
#     llama-perplexity (same text, ctx, threads; its prompt-eval tokens/s) and llama-bench -p 0 -n 64 (decode);
#  4. at long context (LONG_CTX, default 8192; the Llama-3.2-1B shape only, with Meta's Llama 3 tokenizer, whose
#     128256 ids are the shape's vocabulary): kascade generate of a LONG_CTX-token prompt (BOS + WikiText-2) and
#     LONG_DECODE (32) tokens with a BF16 KV cache, --matmul exact and bf16, against llama.cpp's llama-batched-bench
#     -npp LONG_CTX -ntg LONG_DECODE -npl 1 (its default f16 KV cache): prefill tokens/s, and decode tokens/s with
#     LONG_CTX tokens cached;
#  5. repeats everything $REPS times, the programs alternating within each repetition, and prints one markdown table
#     of medians per model, after the CPU's name and the machine's limits measured at the start and at the end of the
#     run (bench_matmul's limits rows: Eigen's fp32 GEMM, the FMA register ceiling, the memory's read bandwidth).
# The numbers: kascade's tokens/s counts every position of every window over the wall time of the forward passes,
# LM head and scoring; llama-perplexity's prompt-eval tokens/s counts the same positions (it scores the second half
# of each window and keeps an f16 KV cache). Peak RSS is the whole process (memory-mapped weights count once
# touched). Memory target of the model-families issue: RSS <= 1.15 x safetensors size + KV cache + activations.
#
# Settings (environment): KASCADE (the kascade binary, default build/pipeline/kascade), MODELS (default
# /tmp/kascade-whole-model), TEXT (default ../shared/data/wikitext-2/wiki.test.raw), THREADS (2), REPS (3),
# SMOLLM2_CTX ("512 2048"), LLAMA_CTX ("512 4096"; empty: none), SMOLLM2_TOKENS / LLAMA_TOKENS (about this many positions per run,
# in whole windows, at least one), LONG_CTX ("8192"; empty: no long-context rows), LONG_DECODE (32), MODELS_TO_RUN
# ("smollm2 llama32_1b"), PEER (convert_wrap.py), BENCH_MATMUL (default build/bench/bench_matmul).
set -Eeuo pipefail
# A program that fails (a model it cannot load, say) stops the run: name the command, not just a status.
trap 'echo "whole_model.sh: stopped: \"$BASH_COMMAND\" exited with status $?" >&2' ERR

here=$(cd "$(dirname "$0")/.." && pwd)
shared=${KASCADE_SHARED:-$here/../shared}
KASCADE=${KASCADE:-$here/build/pipeline/kascade}
MODELS=${MODELS:-/tmp/kascade-whole-model}
TEXT=${TEXT:-$shared/data/wikitext-2/wiki.test.raw}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
SMOLLM2_CTX=${SMOLLM2_CTX-"512 2048"}
LLAMA_CTX=${LLAMA_CTX-"512 4096"}
SMOLLM2_TOKENS=${SMOLLM2_TOKENS:-8192}
LLAMA_TOKENS=${LLAMA_TOKENS:-4095}
LONG_CTX=${LONG_CTX-8192}
LONG_DECODE=${LONG_DECODE:-32}
LLAMA3_TOKENIZER=$shared/models/tokenizers/llama-3/tokenizer.model
MODELS_TO_RUN=${MODELS_TO_RUN:-"smollm2 llama32_1b"}
PEER=${PEER:-$shared/tools/llama-cpp-peer/convert_wrap.py}
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-}
BENCH_MATMUL=${BENCH_MATMUL:-$here/build/bench/bench_matmul}
export OMP_NUM_THREADS=$THREADS

[[ -x $KASCADE ]] || { echo "whole_model.sh: no kascade binary at $KASCADE (build the kascade target)" >&2; exit 1; }
[[ -x $BENCH_MATMUL ]] || {
    echo "whole_model.sh: no bench_matmul at $BENCH_MATMUL (build the bench_matmul target: it measures the machine's limits printed beside the tables)" >&2
    exit 1
}
[[ -f $TEXT ]] || { echo "whole_model.sh: no text file at $TEXT" >&2; exit 1; }
if [[ -n $LLAMA_CPP_DIR ]]; then
    for tool in llama-perplexity llama-bench llama-batched-bench; do
        [[ -x $LLAMA_CPP_DIR/build/bin/$tool ]] || {
            echo "whole_model.sh: $LLAMA_CPP_DIR/build/bin/$tool missing (see $shared/tools/llama-cpp-peer/README.md)" >&2
            exit 1
        }
    done
fi
mkdir -p "$MODELS"
results=$MODELS/results.tsv  # one line per measurement: model, row, column, value
: >"$results"

# One line of the machine's limits, measured now with all $THREADS threads.
machine_limits() {
    "$BENCH_MATMUL" --benchmark_filter='limits/(fp32_gemm/eigen|fp32_arith|memory_read)' --benchmark_format=json \
        >"$MODELS/limits.json" 2>/dev/null
    python3 - "$MODELS/limits.json" <<'EOF'
import json, sys
rows = {b["name"].split("/iterations")[0]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
print(f"Eigen fp32 GEMM {rows['limits/fp32_gemm/eigen']['GFLOP/s']:.1f} GFLOP/s, "
      f"FMA register ceiling {rows['limits/fp32_arith']['GFLOP/s']:.1f} GFLOP/s, "
      f"memory read {rows['limits/memory_read']['GB/s']:.1f} GB/s")
EOF
}
limits_at_start=$(machine_limits)

config_of() {
    case $1 in
        smollm2) echo "$shared/models/smollm2-135m-tokenizer/config.json" ;;
        llama32_1b) echo "$shared/models/configs/llama-3.2-1b/config.json" ;;
    esac
}

prepare_model() {
    local model=$1 dir=$MODELS/$1
    if [[ ! -f $dir/model.safetensors ]]; then
        "$KASCADE" random-model --config "$(config_of "$model")" --out "$dir" >/dev/null
    fi
    cp -f "$shared/models/smollm2-135m-tokenizer/tokenizer.json" "$dir/tokenizer.json"
    if [[ -n $LLAMA_CPP_DIR ]]; then
        for dtype in f32 bf16; do
            local gguf=$MODELS/$model-$dtype.gguf
            if [[ ! -f $gguf ]]; then
                # Debian's python3 (the torch, numpy, sentencepiece and tqdm packages the converter needs). Written
                # under a partial name and renamed when whole: a failed conversion leaves no file a later run would
                # take for a model (the converter writes the header first and the tensors after).
                LLAMA_CPP=$LLAMA_CPP_DIR /usr/bin/python3 "$PEER" "$dir" --outtype "$dtype" --no-lazy \
                    --outfile "$gguf.partial" >"$MODELS/convert-$model-$dtype.log" 2>&1 || {
                    rm -f "$gguf.partial"
                    echo "whole_model.sh: GGUF conversion failed, see $MODELS/convert-$model-$dtype.log" >&2
                    exit 1
                }
                mv "$gguf.partial" "$gguf"
            fi
        done
    fi
}

# Runs its arguments only when llama.cpp is given.
peer() { if [[ -n $LLAMA_CPP_DIR ]]; then "$@"; fi; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; }

# Runs a command under /usr/bin/time; prints its output, then "RSS_KIB <n>".
timed() { /usr/bin/time -f 'RSS_KIB %M' "$@" 2>&1; }

# kascade_perplexity MODEL CTX COLUMN WINDOWS [kascade options]: windows of BOS + ctx-1 text tokens.
kascade_perplexity() {
    local model=$1 ctx=$2 column=$3 windows=$4
    shift 4
    local out
    out=$(timed "$KASCADE" perplexity --model "$MODELS/$model" --text "$TEXT" --ctx "$ctx" \
        --max-tokens $((windows * (ctx - 1))) "$@")
    record "$model" "prefill ctx $ctx (tokens/s)" "$column" "$(awk '/ tokens\/s /{print $1}' <<<"$out")"
    record "$model" "peak RSS ctx $ctx (MiB)" "$column" "$(awk '/^RSS_KIB/{printf "%.0f", $2/1024}' <<<"$out")"
}

# llama_perplexity MODEL CTX DTYPE WINDOWS
llama_perplexity() {
    local model=$1 ctx=$2 dtype=$3 windows=$4 out
    out=$(timed "$LLAMA_CPP_DIR/build/bin/llama-perplexity" -m "$MODELS/$model-$dtype.gguf" -f "$TEXT" -c "$ctx" \
        -t "$THREADS" --chunks "$windows")
    record "$model" "prefill ctx $ctx (tokens/s)" "llama.cpp $dtype" \
        "$(awk '/prompt eval time/{for (i = 1; i <= NF; ++i) if ($i == "tokens" && $(i + 1) == "per") print $(i - 1)}' <<<"$out")"
    record "$model" "peak RSS ctx $ctx (MiB)" "llama.cpp $dtype" "$(awk '/^RSS_KIB/{printf "%.0f", $2/1024}' <<<"$out")"
}

kascade_decode() {
    local model=$1 column=$2
    shift 2
    local out
    out=$("$KASCADE" generate --model "$MODELS/$model" -n 64 --greedy "$@" 2>&1 >/dev/null)
    record "$model" "decode, 64 tokens (tokens/s)" "$column" "$(sed -n 's/.*(\([0-9.]*\) decode tokens\/s.*/\1/p' <<<"$out")"
}

llama_decode() {
    local model=$1 dtype=$2
    local ts
    ts=$("$LLAMA_CPP_DIR/build/bin/llama-bench" -m "$MODELS/$model-$dtype.gguf" -p 0 -n 64 -t "$THREADS" -r 1 -o csv \
        2>/dev/null | tail -1 | awk -F'","' '{print $(NF-1)}')
    record "$model" "decode, 64 tokens (tokens/s)" "llama.cpp $dtype" "$ts"
}

# kascade_long MODEL COLUMN [kascade options]: prefill of the LONG_CTX-token prompt, then LONG_DECODE tokens.
kascade_long() {
    local model=$1 column=$2
    shift 2
    local out
    out=$("$KASCADE" generate --model "$MODELS/$model" --tokenizer "$LLAMA3_TOKENIZER" --prompt-file "$long_prompt" \
        -n "$LONG_DECODE" --greedy --kv-dtype bf16 "$@" 2>&1 >/dev/null)
    record "$model" "prefill $LONG_CTX tokens (tokens/s)" "$column" "$(sed -n 's/.*(\([0-9.]*\) prefill tokens\/s.*/\1/p' <<<"$out")"
    record "$model" "decode at $LONG_CTX cached (tokens/s)" "$column" "$(sed -n 's/.*(\([0-9.]*\) decode tokens\/s.*/\1/p' <<<"$out")"
    grep -q "prefilled $LONG_CTX prompt tokens" <<<"$out" || echo "whole_model.sh: kascade: $out" >&2
}

# llama_long MODEL: llama-batched-bench's S_PP and S_TG columns (one sequence).
llama_long() {
    local model=$1 out
    out=$("$LLAMA_CPP_DIR/build/bin/llama-batched-bench" -m "$MODELS/$model-bf16.gguf" -c $((LONG_CTX + LONG_DECODE)) \
        -b 2048 -ub 512 -npp "$LONG_CTX" -ntg "$LONG_DECODE" -npl 1 -t "$THREADS" 2>/dev/null)
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    record "$model" "prefill $LONG_CTX tokens (tokens/s)" "llama.cpp bf16" "$(awk -F'|' '$2 + 0 > 0 {print $7 + 0}' <<<"$out")"
    record "$model" "decode at $LONG_CTX cached (tokens/s)" "llama.cpp bf16" "$(awk -F'|' '$2 + 0 > 0 {print $9 + 0}' <<<"$out")"
}

# The long prompt: the longest start of the text that is LONG_CTX - 1 tokens or fewer under the Llama 3 tokenizer (BOS
# makes LONG_CTX), found by bisection over its length in characters with `kascade tokenize`.
make_long_prompt() {
    python3 - "$KASCADE" "$LLAMA3_TOKENIZER" "$TEXT" "$((LONG_CTX - 1))" "$long_prompt" <<'EOF'
import json, subprocess, sys
kascade, tokenizer, text_file, want, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
text = open(text_file, encoding="utf-8").read()
def count(n):
    open(out, "w", encoding="utf-8").write(text[:n])
    r = subprocess.run([kascade, "tokenize", "--tokenizer", tokenizer, "--text", out, "--json"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["count"]
lo, hi = 0, min(len(text), want * 16)
assert count(hi) > want, "the text is too short for LONG_CTX"
while hi - lo > 1:
    mid = (lo + hi) // 2
    if count(mid) <= want: lo = mid
    else: hi = mid
open(out, "w", encoding="utf-8").write(text[:lo])
print(f"whole_model.sh: long prompt of {count(lo)} tokens + BOS in {out}", file=sys.stderr)
EOF
}

for model in $MODELS_TO_RUN; do prepare_model "$model"; done
long_prompt=$MODELS/long-prompt-$LONG_CTX.txt
if [[ -n $LONG_CTX && " $MODELS_TO_RUN " == *" llama32_1b "* && ! -f $long_prompt ]]; then make_long_prompt; fi

for rep in $(seq "$REPS"); do
    echo "whole_model.sh: repetition $rep of $REPS (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for model in $MODELS_TO_RUN; do
        if [[ $model == smollm2 ]]; then ctxs=$SMOLLM2_CTX tokens=$SMOLLM2_TOKENS; else ctxs=$LLAMA_CTX tokens=$LLAMA_TOKENS; fi
        for ctx in $ctxs; do
            # Whole windows only: at least one, about `tokens` positions.
            windows=$((tokens / ctx > 1 ? tokens / ctx : 1))
            peer llama_perplexity "$model" "$ctx" f32 "$windows"
            kascade_perplexity "$model" "$ctx" "kascade f32" "$windows" --weights-dtype f32
            peer llama_perplexity "$model" "$ctx" bf16 "$windows"
            kascade_perplexity "$model" "$ctx" "kascade bf16 exact" "$windows" --matmul exact
            kascade_perplexity "$model" "$ctx" "kascade bf16 bf16" "$windows" --matmul bf16
        done
        if [[ $model == llama32_1b && -n $LONG_CTX ]]; then
            peer llama_long "$model"
            kascade_long "$model" "kascade bf16 exact" --matmul exact
            kascade_long "$model" "kascade bf16 bf16" --matmul bf16
        fi
        if [[ $model == smollm2 ]]; then
            peer llama_decode "$model" f32
            kascade_decode "$model" "kascade f32" --weights-dtype f32
            peer llama_decode "$model" bf16
            kascade_decode "$model" "kascade bf16 exact" --matmul exact
            kascade_decode "$model" "kascade bf16 bf16" --matmul bf16
        fi
    done
done

# The memory target per model and ctx: 1.15 x safetensors + fp32 KV cache + the activations of one window.
memory_targets() {
    local model=$1
    shift
    python3 - "$(config_of "$model")" "$MODELS/$model/model.safetensors" "$@" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[2])
dim, hidden, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
head_dim = c.get("head_dim", dim // heads)
for ctx in map(int, sys.argv[3:]):
    kv_cache = 2 * layers * kv * head_dim * ctx * 4
    # transformer activations (x, h, block_out, q, att, k, v, gate, up), hidden states, one chunk of logits
    # (pipeline/runtime/perplexity.cpp: 32 MiB worth of rows, 16 to 128)
    logit_rows = max(16, min(128, (32 << 20) // (4 * c["vocab_size"])))
    act = 4 * ctx * (4 * dim + 2 * heads * head_dim + 2 * kv * head_dim + 2 * hidden) + 4 * logit_rows * c["vocab_size"]
    print(f"target: peak RSS ctx {ctx} <= {(1.15 * size + kv_cache + act) / 2**20:.0f} MiB "
          f"(1.15 x {size / 2**20:.0f} MiB safetensors + {kv_cache / 2**20:.0f} MiB KV cache + {act / 2**20:.0f} MiB activations)")
EOF
}

limits_at_end=$(machine_limits)
echo
cpu_field() { lscpu | sed -n "s/^$1: *//p" | head -n 1; }
echo "CPU: $(cpu_field 'Model name') (family $(cpu_field 'CPU family'), model $(cpu_field Model)), $(nproc) CPUs online"
echo "limits at the start: $limits_at_start"
echo "limits at the end:   $limits_at_end"
echo "threads $THREADS, medians of $REPS, load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $MODELS_TO_RUN; do
    if [[ $model == smollm2 ]]; then ctxs=$SMOLLM2_CTX; else ctxs=$LLAMA_CTX; fi
    echo
    echo "### $model (random BF16 weights, $(du -m "$MODELS/$model/model.safetensors" | cut -f1) MiB safetensors)"
    echo
    python3 - "$results" "$model" <<'EOF'
import statistics, sys
rows, columns, values = [], [], {}
for line in open(sys.argv[1]):
    model, row, column, value = line.rstrip("\n").split("\t")
    if model != sys.argv[2]:
        continue
    if row not in rows: rows.append(row)
    if column not in columns: columns.append(column)
    try: values.setdefault((row, column), []).append(float(value))
    except ValueError: pass
order = ["llama.cpp f32", "llama.cpp bf16", "kascade f32", "kascade bf16 exact", "kascade bf16 bf16"]
columns.sort(key=lambda c: order.index(c) if c in order else len(order))
print("| | " + " | ".join(columns) + " |")
print("|---" * (len(columns) + 1) + "|")
for row in rows:
    cells = []
    for column in columns:
        v = values.get((row, column))
        cells.append("n/a" if not v else f"{statistics.median(v):.1f}" if statistics.median(v) < 100 else
                     f"{statistics.median(v):.0f}")
    print(f"| {row} | " + " | ".join(cells) + " |")
EOF
    echo
    # shellcheck disable=SC2086 # one argument per ctx
    memory_targets "$model" $ctxs
done
