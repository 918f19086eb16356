#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, -O1, in build-fuzz/) and runs each for SECONDS
# (default 60), NPROC of them at a time. CI (scripts/test.sh) runs 10 s each; run it longer by hand:
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 3600 tokenizer_json sweep_toml
# Targets: safetensors hf_config tokenizer_json tokenizer_bin tokenizer_tiktoken gguf llama2c_checkpoint torch_pickle
# zip_archive sweep_toml h5_artifact merge_shard chat_messages chat_template.
# Seeds: tests/fuzz/corpus/<target>/ (committed), tests/fuzz/regressions/<target>/ (past crashes), and files of the
# assets folder and experiments/; with a Release build in build/ (KASCADE_BIN to use another kascade), also the
# artifacts of a small capture -> similarity -> schedule on stories260K. What a run learns is kept in
# build-fuzz/fuzz-corpus/<target>/, so the next run starts from there. A crash, sanitizer report, leak, timeout or
# out-of-memory leaves its input in build-fuzz/fuzz-findings/<target>/ and fails the script; replay one with
#   build-fuzz/tests/fuzz/fuzz_<target> <file>
# and, once fixed, copy it to tests/fuzz/regressions/<target>/ so that test_fuzz replays it in every build.
# h5_artifact only: faults inside libhdf5 itself are counted and kept, not failed (see run_target).
# Every fuzzer process runs under a wall-clock bound (coreutils timeout, whole process group): libFuzzer's own
# -timeout is a signal handler inside the process, which a process stuck in a lock never runs, and a fork-mode parent
# waits on such a child for ever (a CI run sat in h5_artifact until the 90-minute limit).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
all_targets=(safetensors hf_config tokenizer_json tokenizer_bin tokenizer_tiktoken gguf llama2c_checkpoint torch_pickle
             zip_archive sweep_toml h5_artifact merge_shard chat_messages chat_template)
targets=("${all_targets[@]}")
if [ $# -gt 0 ]; then targets=("$@"); fi
jobs=$(nproc)
build=build-fuzz

cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKASCADE_FUZZ=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DKASCADE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz

# Seeds made at run time, from the assets (small files only: a megabyte seed makes every run slow) and the
# experiments, and artifacts written by the real stages.
assets="$(scripts/fetch_assets.sh | tail -n 1)"
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
for t in "${all_targets[@]}"; do mkdir -p "$seeds/$t"; done
for config in "$assets"/models/*/config.json "$assets"/models/configs/*/config.json; do
  [ -f "$config" ] && cp "$config" "$seeds/hf_config/$(basename "$(dirname "$config")").json"
done
cp "$assets/models/stories260K/tok512.bin" "$seeds/tokenizer_bin/"
cp experiments/*.toml "$seeds/sweep_toml/"
kascade="${KASCADE_BIN:-build/pipeline/kascade}"
if [ -x "$kascade" ]; then
  results="$(mktemp -d)"
  trap 'rm -rf "$results"' EXIT
  # One window of 31 tokens at ctx 32, similarity of whole key tiles (token keys would need a capture with the
  # queries and keys, 130 KB): every dataset of each stage, in files of 8 to 35 KB.
  capture=$("$kascade" --results "$results" capture --model "$assets/models/stories260K/stories260K.bin" \
            --text "$assets/data/tinystories/TinyStories-valid.head.txt" --calib-tokens 31 --ctx 32 --tile 8 |
            awk '{print $2}')
  similarity=$("$kascade" --results "$results" similarity --capture "$capture" --topk-tiles 1 --key-granularity tile | awk '{print $2}')
  "$kascade" --results "$results" schedule --similarity "$similarity" --policy threshold --threshold 0.5 >/dev/null
  find "$results/artifacts" -name '*.h5' -exec cp {} "$seeds/h5_artifact/" \;
else
  echo "fuzz: no $kascade (build it, or set KASCADE_BIN): HDF5 seeds are only the committed ones"
fi

# Where the fault that `input` causes in `binary` lies: prints "libhdf5" when the first frame of the report's stack
# that is either in libhdf5 or in a source file of this checkout is in libhdf5, else "kascade" (also for UBSan reports,
# which come from instrumented code, so never from libhdf5, and for a stack with neither, to fail safe). Frames of the
# sanitizers' interceptors (memcpy, strdup, malloc, ...), libFuzzer and libc match neither and are passed over,
# however they are symbolised. Prints "not reproduced" when a run on `input` alone reports nothing (a leak or hang
# that needed the inputs before it).
fault_place() {
  local binary="$1" input="$2"
  # The physical path, as the compiler recorded the sources (cmake resolves symbolic links; $PWD may not).
  timeout -k 5 60 "$binary" -timeout=5 -runs=1 "$input" 2>&1 | awk -v checkout="$(pwd -P)/" '
    /^==[0-9]+== ?ERROR: |runtime error:/ { reported = 1 }
    /runtime error:/ && !place { place = "kascade" }
    /^ *#[0-9]+ / && !place {
      if (/libhdf5/) { place = "libhdf5"; next }
      frame = $0
      gsub(/\([^()]*\)/, "", frame)  # drop "(module+offset)" and "(BuildId: ...)": the fuzz binary is in the checkout too
      if (index(frame, checkout)) place = "kascade"  # a source location, "/checkout/io/store/h5_file.cpp:266:27"
    }
    END { print place ? place : (reported ? "kascade" : "not reproduced") }'
}

run_target() {
  local target="$1" seconds="$2" build="$3" seeds="$4"
  local binary="$build/tests/fuzz/fuzz_$target" findings="$build/fuzz-findings/$target"
  local log="$build/fuzz-findings/$target.log"
  rm -rf "$findings"
  mkdir -p "$build/fuzz-corpus/$target" "$findings"
  # The first folder receives what the run learns; the others are only read.
  local corpora=("$build/fuzz-corpus/$target") dir
  for dir in "tests/fuzz/corpus/$target" "tests/fuzz/regressions/$target" "$seeds/$target"; do
    if [ -d "$dir" ]; then corpora+=("$dir"); fi
  done
  local options=(-max_total_time="$seconds" -timeout=25 -artifact_prefix="$findings/")
  if [ "$target" = h5_artifact ]; then
    # Debian 12's libhdf5 (1.10.8) itself crashes or hangs on some corrupt files (a variable-length string whose
    # global heap entry is damaged), within seconds of fuzzing. Such faults cannot be fixed here, so this target
    # runs in fork mode, which keeps going after a fault, and only faults outside libhdf5 fail the run.
    options+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=5)
  fi
  local status=0 limit=$((seconds * 2 + 60))
  timeout -k 10 "$limit" "$binary" "${options[@]}" "${corpora[@]}" >"$log" 2>&1 || status=$?
  local stopped=0  # timeout's status when it had to stop the run: 124 (TERM), 137 (KILL after -k)
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then stopped=1; fi
  local executed  # libFuzzer's last status line starts with the number of inputs run, "#1234"
  executed=$(grep -o '^#[0-9][0-9]*' "$log" | tail -n 1 | tr -d '#')
  local input place ours=() in_hdf5=0 not_reproduced=0
  for input in "$findings"/*; do
    [ -f "$input" ] || continue
    place=kascade
    if [ "$target" = h5_artifact ]; then place=$(fault_place "$binary" "$input"); fi
    case "$place" in
      libhdf5) in_hdf5=$((in_hdf5 + 1)) ;;
      "not reproduced") not_reproduced=$((not_reproduced + 1)) ;;
      *) ours+=("$input") ;;
    esac
  done
  local notes=""
  if [ "$in_hdf5" -gt 0 ]; then notes+="; $in_hdf5 faults inside libhdf5"; fi
  if [ "$not_reproduced" -gt 0 ]; then notes+="; $not_reproduced faults not reproducible alone"; fi
  # A stopped run saved no input for the process that hung, so there is nothing to triage: in h5_artifact, where
  # libhdf5 is known to hang on corrupt files, it is noted; anywhere else it fails the run (status 124 or 137).
  if [ "$stopped" -eq 1 ]; then notes+="; stopped by the ${limit}s wall-clock limit, a process hung"; fi
  if [ -n "$notes" ]; then notes+=" (inputs in $findings)"; fi
  # Fork mode exits non-zero after any fault, even an ignored one: there the triage above decides.
  if { [ "$status" -eq 0 ] || [ "$target" = h5_artifact ]; } && [ ${#ours[@]} -eq 0 ]; then
    echo "fuzz: $target: ok ($executed inputs in ${seconds}s$notes)"
  else
    echo "fuzz: $target: FAILED; inputs: ${ours[*]:-none saved}; log $log:"
    grep -v '^#[0-9]\|^INFO\|^\s*$' "$log" | tail -n 40
    return 1
  fi
}
export -f fault_place run_target
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_target "$@"' _ {} "$seconds" "$build" "$seeds"
