// io/tokenizer/tokenizer_loader.cpp: choosing the tokenizer implementation for a file, and finding a model's file.
#include <algorithm>
#include <system_error>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/hf_tokenizer.h"
#include "io/tokenizer/llama2c_tokenizer.h"
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

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path) {
    const std::string bytes = read_file(path);
    KASCADE_CHECK(!bytes.empty(), "{}: empty tokenizer file", path.string());
    if (looks_like_json(bytes)) return std::make_unique<HfTokenizer>(path, bytes);
    return std::make_unique<Llama2cTokenizer>(path, bytes);
}

std::filesystem::path find_tokenizer_for_model(const std::filesystem::path& model_path) {
    std::error_code ec;
    const bool is_dir = std::filesystem::is_directory(model_path, ec);
    const std::filesystem::path dir = is_dir ? model_path : model_path.parent_path();
    const std::filesystem::path dir_or_cwd = dir.empty() ? std::filesystem::path(".") : dir;
    if (std::filesystem::is_regular_file(dir_or_cwd / "tokenizer.json", ec)) return dir / "tokenizer.json";

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
