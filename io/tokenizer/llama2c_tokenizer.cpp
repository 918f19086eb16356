// io/tokenizer/llama2c_tokenizer.cpp: reading llama2.c tokenizer.bin and run.c's encode()/decode().
#include "io/tokenizer/llama2c_tokenizer.h"

#include <cstring>

#include "base/error.h"

namespace kascade {

namespace {

constexpr int kByteTokens = 256;

/// run.c only merges pairs whose score beats its initial best_score of -1e10.
constexpr float kRunCMinScore = -1e10f;

template <typename T>
T read_le(std::string_view bytes, std::size_t offset) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    return value;
}

bool is_utf8_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

}  // namespace

Llama2cTokenizer::Llama2cTokenizer(const std::filesystem::path& path, std::string_view bytes) {
    const std::string name = path.string();
    KASCADE_CHECK(bytes.size() >= 4,
                  "{}: truncated llama2.c tokenizer: {} bytes, expected at least the 4-byte "
                  "max_token_length",
                  name, bytes.size());
    max_token_length_ = read_le<int32_t>(bytes, 0);
    KASCADE_CHECK(max_token_length_ > 0 && max_token_length_ < (1 << 16),
                  "{}: invalid llama2.c tokenizer: max_token_length = {} (expected 1..65535)", name, max_token_length_);
    std::size_t offset = 4;
    while (offset < bytes.size()) {
        const std::size_t id = pieces_.size();
        KASCADE_CHECK(bytes.size() - offset >= 8,
                      "{}: llama2.c tokenizer ends inside token {}: at byte {} it needs 8 bytes of score and length, "
                      "the file has {} left (truncated, or bytes appended after the last token)",
                      name, id, offset, bytes.size() - offset);
        const float token_score = read_le<float>(bytes, offset);
        const int32_t length = read_le<int32_t>(bytes, offset + 4);
        offset += 8;
        KASCADE_CHECK(length >= 0 && length <= max_token_length_,
                      "{}: invalid llama2.c tokenizer: token {} has length {} (expected 0..max_token_length = {})",
                      name, id, length, max_token_length_);
        KASCADE_CHECK(bytes.size() - offset >= static_cast<std::size_t>(length),
                      "{}: llama2.c tokenizer ends inside token {}: at byte {} it needs {} bytes, the file has {} left "
                      "(truncated, or bytes appended after the last token)",
                      name, id, offset, length, bytes.size() - offset);
        pieces_.emplace_back(bytes.substr(offset, length));
        scores_.push_back(token_score);
        offset += length;
    }
    KASCADE_CHECK(pieces_.size() >= kByteOffset + kByteTokens,
                  "{}: invalid llama2.c tokenizer: {} tokens, expected at least {} (<unk>, BOS, EOS, 256 byte tokens)",
                  name, pieces_.size(), kByteOffset + kByteTokens);
    for (int b = 0; b < kByteTokens; ++b) {
        const std::string expected = fmt::format("<0x{:02X}>", b);
        KASCADE_CHECK(pieces_[kByteOffset + b] == expected,
                      "{}: invalid llama2.c tokenizer: token {} is '{}', expected the byte-fallback piece '{}'", name,
                      kByteOffset + b, pieces_[kByteOffset + b], expected);
    }

    decoded_.resize(pieces_.size());
    first_byte_.resize(pieces_.size());
    last_byte_.resize(pieces_.size());
    for (std::size_t id = 0; id < pieces_.size(); ++id) {
        ids_.try_emplace(pieces_[id], static_cast<int32_t>(id));
        const std::string& p = pieces_[id];
        for (std::size_t i = 0; i + 1 < p.size(); ++i) {
            can_join_[static_cast<unsigned char>(p[i])].set(static_cast<unsigned char>(p[i + 1]));
        }
        if (!p.empty()) {
            first_byte_[id] = static_cast<unsigned char>(p.front());
            last_byte_[id] = static_cast<unsigned char>(p.back());
        }
        const bool is_byte = id >= kByteOffset && id < kByteOffset + kByteTokens;
        decoded_[id] = is_byte ? std::string(1, static_cast<char>(id - kByteOffset)) : pieces_[id];
    }
    // run.c merges a pair when the concatenation of the two pieces is a token: register every split of every
    // token into two tokens, so that merging is a table lookup instead of a concatenation and a search.
    for (std::size_t id = 0; id < pieces_.size(); ++id) {
        const std::string_view whole = pieces_[id];
        if (scores_[id] <= kRunCMinScore || lookup(whole) != static_cast<int32_t>(id)) continue;
        for (std::size_t cut = 1; cut < whole.size(); ++cut) {
            const int32_t left = lookup(whole.substr(0, cut));
            const int32_t right = lookup(whole.substr(cut));
            if (left >= 0 && right >= 0) {
                merges_.add(left, right, {static_cast<int32_t>(id), -static_cast<double>(scores_[id])});
            }
        }
    }
}

int32_t Llama2cTokenizer::lookup(std::string_view piece) const {
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    if (text.empty()) return ids;
    ids.reserve(text.size() + 1);
    const int32_t space = lookup(" ");
    ids.push_back(space >= 0 ? space : kByteOffset + ' ');
    // run.c's grouping: a codepoint is a lead byte plus the continuation bytes after it, at most 4 bytes.
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = start + 1;
        while (end < text.size() && end - start < 4 && is_utf8_continuation(static_cast<unsigned char>(text[end]))) {
            ++end;
        }
        const std::string_view codepoint = text.substr(start, end - start);
        const int32_t id = lookup(codepoint);
        if (id >= 0) {
            ids.push_back(id);
        } else {
            for (const char c : codepoint) ids.push_back(kByteOffset + static_cast<unsigned char>(c));
        }
        start = end;
    }
    return merge_runs(ids);
}

std::vector<int32_t> Llama2cTokenizer::merge_runs(const std::vector<int32_t>& symbols) const {
    std::vector<int32_t> out;
    out.reserve(symbols.size());
    // A run's merge result depends only on its symbol ids, so they (viewed as bytes) are the cache key.
    std::unordered_map<std::string_view, std::vector<int32_t>> cache;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= symbols.size(); ++i) {
        if (i < symbols.size() && can_join_[last_byte_[symbols[i - 1]]][first_byte_[symbols[i]]]) continue;
        if (i - begin == 1) {
            out.push_back(symbols[begin]);
        } else {
            const std::string_view key(reinterpret_cast<const char*>(symbols.data() + begin),
                                       (i - begin) * sizeof(int32_t));
            auto [it, inserted] = cache.try_emplace(key);
            if (inserted) {
                it->second.assign(symbols.begin() + begin, symbols.begin() + i);
                bpe_merge(it->second, merges_);
            }
            out.insert(out.end(), it->second.begin(), it->second.end());
        }
        begin = i;
    }
    return out;
}

std::string Llama2cTokenizer::decode_piece(int32_t prev, int32_t id) const {
    KASCADE_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range for a llama2.c vocabulary of {} tokens", id,
                  vocab_size());
    if (id == kBos || id == kEos) return {};
    const std::string& text = decoded_[id];
    // The dummy prefix: encode() put a space before the text, and run.c drops it after BOS.
    if ((prev < 0 || prev == kBos) && !text.empty() && text[0] == ' ') return text.substr(1);
    return text;
}

}  // namespace kascade
