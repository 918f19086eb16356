// io/tokenizer/tokenizer_loader.cpp: choosing the tokenizer implementation for a file, and finding a model's file.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <system_error>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/gguf_tokenizer.h"
#include "io/tokenizer/hf_tokenizer.h"
#include "io/tokenizer/llama2c_tokenizer.h"
#include "io/tokenizer/sentencepiece_proto.h"
#include "io/tokenizer/sentencepiece_tokenizer.h"
#include "io/tokenizer/tiktoken_tokenizer.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {

namespace {

/// JSON starts with '{' after optional whitespace. A tokenizer.bin starts with its int32 max_token_length, whose
/// first byte could be '{' only if that length were 123 + 256k, so '{' followed by three zero bytes is binary.
bool looks_like_json(std::string_view bytes) {
    const std::size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || bytes[first] != '{') return false;
    return !(first == 0 && bytes.size() >= 4 && bytes.substr(1, 3) == std::string_view("\0\0\0", 3));
}

/// A tiktoken rank file: its first non-blank line is "<base64> <digits>". Asked before the SentencePiece test, since a
/// rank file that starts with a blank line would otherwise look like a protobuf's first tag (0x0A).
bool starts_like_tiktoken(std::string_view bytes) {
    const std::size_t begin = bytes.find_first_not_of("\r\n");
    if (begin == std::string_view::npos) return false;
    std::string_view line = bytes.substr(begin, bytes.find('\n', begin) - begin);
    if (line.ends_with('\r')) line.remove_suffix(1);
    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size()) return false;
    auto is_base64 = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
    };
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    const std::string_view token = line.substr(0, space);
    const std::string_view rank = line.substr(space + 1);
    return std::all_of(token.begin(), token.end(), is_base64) && std::all_of(rank.begin(), rank.end(), is_digit);
}

/// Text without a NUL in its first bytes. Asked after the JSON and SentencePiece tests: a llama2.c tokenizer.bin
/// always has zero bytes 2 and 3 (its max_token_length is below 65536), so such text is a rank file, however broken
/// (its reader then names the bad line).
bool looks_like_text(std::string_view bytes) {
    return bytes.substr(0, 64).find('\0') == std::string_view::npos;
}

/// A GGUF file (magic "GGUF"): asked before the whole file is read, since it may hold gigabytes of weights.
bool is_gguf_file(const std::filesystem::path& path) {
    check_regular_file(path);
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    in.read(magic, sizeof(magic));
    return in.gcount() == sizeof(magic) && std::string_view(magic, sizeof(magic)) == "GGUF";
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path) {
    if (is_gguf_file(path)) return std::make_unique<GgufTokenizer>(path);
    const std::string bytes = read_file(path);
    KASCADE_CHECK(!bytes.empty(), "{}: empty tokenizer file", path.string());
    if (looks_like_json(bytes)) return std::make_unique<HfTokenizer>(path, bytes);
    if (starts_like_tiktoken(bytes)) return std::make_unique<TiktokenTokenizer>(path, bytes);
    if (looks_like_sentencepiece_model(bytes)) return std::make_unique<SentencePieceTokenizer>(path, bytes);
    if (looks_like_text(bytes)) return std::make_unique<TiktokenTokenizer>(path, bytes);
    return std::make_unique<Llama2cTokenizer>(path, bytes);
}

std::filesystem::path find_tokenizer_for_model(const std::filesystem::path& model_path) {
    std::error_code ec;
    // A GGUF model embeds its tokenizer.
    if (model_path.extension() == ".gguf" && std::filesystem::is_regular_file(model_path, ec)) return model_path;
    const bool is_dir = std::filesystem::is_directory(model_path, ec);
    const std::filesystem::path dir = is_dir ? model_path : model_path.parent_path();
    const std::filesystem::path dir_or_cwd = dir.empty() ? std::filesystem::path(".") : dir;
    // tokenizer.json first: a Hugging Face folder may hold both, and its tokenizer.json is what transformers reads.
    for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
        if (std::filesystem::is_regular_file(dir_or_cwd / name, ec)) return dir / name;
    }

    std::vector<std::filesystem::path> candidates;
    for (const auto& entry : std::filesystem::directory_iterator(dir_or_cwd, ec)) {
        const std::string name = entry.path().filename().string();
        const bool tokenizer_name = name.starts_with("tokenizer") || name.starts_with("tok");
        if (tokenizer_name && name.ends_with(".bin") && entry.is_regular_file(ec) &&
            entry.path().filename() != model_path.filename()) {
            candidates.push_back(dir / name);
        }
    }
    if (candidates.empty()) return {};
    // Directory order is arbitrary; prefer tokenizer*.bin, then the first name, so the choice is reproducible.
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
        const bool a_full = a.filename().string().starts_with("tokenizer");
        const bool b_full = b.filename().string().starts_with("tokenizer");
        return a_full != b_full ? a_full : a.filename() < b.filename();
    });
    return candidates.front();
}

}  // namespace kascade
