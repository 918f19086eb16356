#!/usr/bin/env bash
# bench/thread_scaling.sh: whole-model prefill and decode speed of the Llama-3.2-1B shape (random BF16 weights) at
# several thread counts, with the machine's limits measured at each count, as one markdown table.
#
#   bench/thread_scaling.sh                       1 2 4 8 16 threads (or up to the cores there are)
#   THREADS_LIST="1 2" bench/thread_scaling.sh
#
# Each thread count is one bench_forward run (bench/README.md, section bench_forward) of these rows, so every figure
# is the code path `kascade perplexity` / `generate` runs:
#   prefill/llama32_1b/ctx:512/dense/bf16     one 512-token perplexity window, BF16 matrix products
#   decode/llama32_1b/T:<n>/B:1/dense/bf16/kv:<kv>     one new token after n cached positions, KV cache in f32 and in bf16
#   decode/llama32_1b/T:<n>/B:1/kascade/bf16/kv:<kv>   the same with Kascade (anchors every 4th layer, 10 % of the keys)
# and the limits bench_forward measures at its start on the same threads: BF16 GEMM peak and memory bandwidth.
# The table gives tokens/s, the scaling against the first thread count (ideal: the ratio of thread counts), the
# prefill's share of the BF16 GEMM peak and the decode's share of the bandwidth; the JSON of every run is kept.
#
# Settings (environment): BENCH (bench_forward binary, default build/bench/bench_forward), THREADS_LIST,
# DECODE_T ("8K 32K"), OUT (folder for the JSON files, default /tmp/kascade-thread-scaling), KASCADE_BENCH_MODELS
# (where the random checkpoint is written and reused, default $OUT/models), KASCADE_ASSETS (the folder holding
# models/configs/llama-3.2-1b/config.json, default ../shared).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$here/build/bench/bench_forward}
cores=$(nproc)
default_threads=""
for t in 1 2 4 8 16; do ((t <= cores)) && default_threads+="$t "; done
THREADS_LIST=${THREADS_LIST:-$default_threads}
DECODE_T=${DECODE_T:-"8K 32K"}
OUT=${OUT:-/tmp/kascade-thread-scaling}
export KASCADE_BENCH_MODELS=${KASCADE_BENCH_MODELS:-$OUT/models}
export KASCADE_ASSETS=${KASCADE_ASSETS:-$here/../shared}

[[ -x $BENCH ]] || { echo "thread_scaling.sh: no bench_forward binary at $BENCH (build the bench_forward target)" >&2; exit 1; }
config=$KASCADE_ASSETS/models/configs/llama-3.2-1b/config.json
[[ -f $config ]] || { echo "thread_scaling.sh: no $config (set KASCADE_ASSETS)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "thread_scaling.sh: python3 is needed to read the JSON results" >&2; exit 1; }
mkdir -p "$OUT" "$KASCADE_BENCH_MODELS"

decode_alternatives=$(echo "$DECODE_T" | tr ' ' '|')
filter="prefill/llama32_1b/ctx:512/dense/bf16|decode/llama32_1b/T:($decode_alternatives)/B:1/(dense|kascade)/bf16/kv:"
for threads in $THREADS_LIST; do
    echo "thread_scaling.sh: $threads thread(s)" >&2
    OMP_NUM_THREADS=$threads OMP_PROC_BIND=close OMP_PLACES=cores "$BENCH" --benchmark_filter="$filter" \
        --benchmark_out="$OUT/threads-$threads.json" --benchmark_out_format=json >&2
done

python3 - "$OUT" $THREADS_LIST <<'EOF'
import json, re, sys
out, threads = sys.argv[1], sys.argv[2:]
runs = {t: json.load(open(f"{out}/threads-{t}.json")) for t in threads}
first = runs[threads[0]]
ctx = first["context"]
print(f"CPU: {ctx.get('mhz_per_cpu', '?')} MHz x {ctx.get('num_cpus', '?')} logical CPUs, "
      f"matmul path {ctx.get('matmul_path', '?')}")
names = [b["name"] for b in first["benchmarks"]]
def row(run, name):
    return next(b for b in run["benchmarks"] if b["name"] == name)
header = ["threads", "BF16 GEMM GFLOP/s", "bandwidth GB/s"]
for name in names:
    short = re.sub(r"/(min_time:[^/]*|real_time|manual_time)", "", name).replace("/llama32_1b", "").replace("/B:1", "")
    short = re.sub(r"/bf16(?=/|$)", "", short)  # the products' numerics, the same in every row
    header += [f"{short} tok/s", "scaling", "% GEMM" if name.startswith("prefill") else "% bw"]
print("| " + " | ".join(header) + " |")
print("|" + "---|" * len(header))
for t in threads:
    run = runs[t]
    cells = [t, f"{float(run['context']['bf16_gemm_gflops']):.0f}", f"{float(run['context']['memory_gbps']):.1f}"]
    for name in names:
        b = row(run, name)
        base = row(first, name)["tokens_per_s"]
        cells += [f"{b['tokens_per_s']:.1f}", f"{b['tokens_per_s'] / base:.2f}x", f"{b['pct_limit']:.0f}"]
    print("| " + " | ".join(str(c) for c in cells) + " |")
EOF
