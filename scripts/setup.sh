#!/usr/bin/env bash
# Installs kascade's build and test dependencies from Debian 12 packages (and, for the tokenizer and chat template
# cross-check tests, the npm packages @huggingface/tokenizers, tiktoken and @huggingface/jinja into tests/node and
# Debian's python3-sentencepiece and python3-torch; for the report test, a headless Chromium). Safe to run
# repeatedly: it skips what is there. --with-training instead adds Debian's python3-torch and python3-numpy for
# scripts/train_retrieval_model.py (the long-context test model; not needed to use or test kascade).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config git
          libhdf5-dev hdf5-tools libsqlite3-dev sqlite3 libsqlitecpp-dev libeigen3-dev libcli11-dev
          nlohmann-json3-dev libtomlplusplus-dev libfmt-dev libxxhash-dev libpcre2-dev libutf8proc-dev
          libsentencepiece-dev   # SentencePiece tokenizer.model files (Llama 2, Mistral)
          libzip-dev   # PyTorch checkpoints (Meta's consolidated.NN.pth) are zip archives
          libgtest-dev libbenchmark-dev curl unzip ca-certificates
          clang libclang-rt-14-dev libomp-dev   # the sanitizer and fuzz builds: clang, libFuzzer, clang's OpenMP
          clang-format   # scripts/test.sh checks the sources' layout against .clang-format
          gnuplot-nox libpng-dev)   # kascade report draws with gnuplot; its tests decode the PNGs with libpng
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--with-test-tools" ]; then
  if ! command -v node >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
  fi
  if ! command -v chromium >/dev/null 2>&1; then
    # The report test renders the HTML report in headless Chromium and checks the screenshot.
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing chromium (report screenshot test)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  fi
  if [ ! -d tests/node/node_modules/@huggingface/tokenizers ] || [ ! -d tests/node/node_modules/tiktoken ] ||
    [ ! -d tests/node/node_modules/@huggingface/jinja ]; then
    echo "setup: installing the tokenizer and chat template cross-checks (npm ci in tests/node)"
    (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
  fi
  if ! dpkg-query -W -f='${Status}' python3-sentencepiece 2>/dev/null | grep -q "install ok installed"; then
    # The SentencePiece cross-check trains a small model and encodes with Google's Python binding, run by
    # Debian's /usr/bin/python3 (tests/tokenizer/sentencepiece_reference.py).
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing python3-sentencepiece (SentencePiece cross-check)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-sentencepiece >/dev/null
  fi
  if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
    # The Meta checkpoint test writes its consolidated.NN.pth fixtures with Debian's torch.save
    # (tests/weights/make_meta_checkpoint.py, run by /usr/bin/python3).
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing python3-torch (Meta checkpoint fixtures)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-torch >/dev/null
  fi
fi

if [ "${1:-}" = "--with-training" ]; then
  # Only scripts/train_retrieval_model.py needs these (it trains the test fixture tests/fixtures/retrieval-model);
  # kascade itself never does. Debian's torch, run by Debian's python (/usr/bin/python3).
  for p in python3-torch python3-numpy; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      sudo=""
      [ "$(id -u)" -ne 0 ] && sudo="sudo"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-torch python3-numpy >/dev/null
      break
    fi
  done
fi
