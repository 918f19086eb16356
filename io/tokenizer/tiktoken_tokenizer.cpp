// io/tokenizer/tiktoken_tokenizer.cpp: reading a tiktoken rank file, Llama 3's special tokens, tiktoken's encode.
#include "io/tokenizer/tiktoken_tokenizer.h"

#include <algorithm>

#include "base/error.h"
#include "io/tokenizer/tokenizer_config.h"

namespace kascade {

namespace {

// Ranks index the id -> bytes table, so a malformed file must not size it: 2^22 (as for tokenizer.json ids) is far
// above the largest tiktoken vocabularies in use (o200k: 200K).
constexpr int64_t kRankLimit = int64_t{1} << 22;

/// `bytes` for an error message: printable ASCII as is, other bytes as \xNN, cut after `limit` bytes.
std::string printable(std::string_view bytes, std::size_t limit = 48) {
    std::string out;
    for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        out += c >= 0x20 && c < 0x7F && c != '\\' ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02X}", c);
    }
    if (bytes.size() > limit) out += "...";
    return out;
}

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/// Standard padded base64 (RFC 4648 §4), strictly: what tiktoken's Rust reader accepts. Returns the bytes, or
/// sets `error` to why `text` is not base64.
std::string base64_decode(std::string_view text, std::string& error) {
    if (text.size() % 4 != 0) {
        error = fmt::format("its length {} is not a multiple of 4", text.size());
        return {};
    }
    std::size_t padding = 0;
    while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    uint32_t bits = 0;
    int n_bits = 0;
    for (std::size_t i = 0; i + padding < text.size(); ++i) {
        const int value = base64_value(text[i]);
        if (value < 0) {
            error = fmt::format("character '{}' at position {} is not in the base64 alphabet",
                                printable(text.substr(i, 1)), i + 1);
            return {};
        }
        bits = (bits << 6) | static_cast<uint32_t>(value);
        n_bits += 6;
        if (n_bits >= 8) {
            n_bits -= 8;
            out.push_back(static_cast<char>((bits >> n_bits) & 0xFF));
        }
    }
    // Left-over bits must be zero, or two different texts would give the same bytes.
    if ((bits & ((1u << n_bits) - 1)) != 0) {
        error = "its last character has bits that no byte uses (not canonical base64)";
        return {};
    }
    return out;
}

/// A rank: decimal digits only (no sign, no spaces), below kRankLimit; -1 if not.
int64_t parse_rank(std::string_view text) {
    if (text.empty() || text.size() > 9) return -1;
    int64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return -1;
        value = value * 10 + (c - '0');
    }
    return value < kRankLimit ? value : -1;
}

}  // namespace

std::vector<std::string> TiktokenTokenizer::llama3_special_tokens() {
    std::vector<std::string> tokens = {
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|reserved_special_token_2|>",
        "<|reserved_special_token_3|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|reserved_special_token_4|>",
        "<|eot_id|>",
    };
    // tokenizer.py: range(5, num_reserved_special_tokens - 5), with 256 reserved.
    for (int i = 5; i < kLlama3SpecialTokens - 5; ++i)
        tokens.push_back(fmt::format("<|reserved_special_token_{}|>", i));
    return tokens;
}

TiktokenTokenizer::TiktokenTokenizer(const std::filesystem::path& path, std::string_view text) : name_(path.string()) {
    parse_ranks(text);
    add_special_tokens(path);
    split_ = std::make_unique<Pcre2Regex>(kLlama3SplitPattern, false, "the Llama 3 split pattern");
}

TiktokenTokenizer::~TiktokenTokenizer() = default;

void TiktokenTokenizer::parse_ranks(std::string_view text) {
    std::vector<std::size_t> line_of_rank;  // for "already on line N" messages
    const auto n_lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    ids_.reserve(n_lines + kLlama3SpecialTokens);
    token_bytes_.reserve(n_lines + kLlama3SpecialTokens);
    line_of_rank.reserve(n_lines);
    std::size_t line_number = 0;
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t eol = text.find('\n', pos);
        std::string_view line = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        pos = eol == std::string_view::npos ? text.size() : eol + 1;
        ++line_number;
        if (line.ends_with('\r')) line.remove_suffix(1);
        if (line.empty()) continue;  // tiktoken's load_tiktoken_bpe, which Meta's tokenizer.py calls, skips them
        const std::size_t space = line.find(' ');
        KASCADE_CHECK(
            space != std::string_view::npos && space > 0 && line.find(' ', space + 1) == std::string_view::npos,
            "{}:{}: expected '<base64 token> <rank>' (one space between), found '{}'", name_, line_number,
            printable(line));
        const std::string_view encoded = line.substr(0, space);
        std::string error;
        std::string bytes = base64_decode(encoded, error);
        KASCADE_CHECK(error.empty(), "{}:{}: the token '{}' is not base64: {}", name_, line_number, printable(encoded),
                      error);
        KASCADE_CHECK(!bytes.empty(), "{}:{}: the token '{}' is empty", name_, line_number, printable(encoded));
        const std::string_view rank_text = line.substr(space + 1);
        const int64_t rank = parse_rank(rank_text);
        KASCADE_CHECK(rank >= 0, "{}:{}: rank '{}' is not an integer in [0, {})", name_, line_number,
                      printable(rank_text), kRankLimit);
        // Ids are ranks, and Meta puts the special tokens right after the last rank (num_base_tokens + i), so the
        // ranks must be exactly 0, 1, 2, ...: a gap would leave an id without bytes or collide with a special.
        const auto expected = static_cast<int64_t>(token_bytes_.size());
        KASCADE_CHECK(
            rank >= expected,
            "{}:{}: rank {} repeats or goes back (line {} has rank {}; ranks must be 0, 1, 2, ... in line order)",
            name_, line_number, rank, expected > 0 ? line_of_rank.back() : 0, expected - 1);
        KASCADE_CHECK(rank == expected, "{}:{}: rank {} skips rank {} (ranks must be 0, 1, 2, ... in line order)",
                      name_, line_number, rank, expected);
        const auto [it, inserted] = ids_.try_emplace(bytes, static_cast<int32_t>(rank));
        KASCADE_CHECK(inserted, "{}:{}: the token '{}' has rank {} already (line {})", name_, line_number,
                      printable(encoded), it->second, line_of_rank[it->second]);
        token_bytes_.push_back(std::move(bytes));
        line_of_rank.push_back(line_number);
    }
    n_ranks_ = static_cast<int>(token_bytes_.size());
    for (int b = 0; b < 256; ++b) {
        byte_ids_[b] = token_id(std::string(1, static_cast<char>(b)));
        KASCADE_CHECK(byte_ids_[b] >= 0,
                      "{}: no rank for the single byte 0x{:02X} (byte-level BPE starts from single bytes, so all 256 "
                      "must be tokens)",
                      name_, b);
    }
    // tiktoken merges two adjacent parts when their concatenated bytes are a token, at that token's rank: register
    // every split of every token into two tokens, so that merging is a table lookup.
    for (int32_t id = 0; id < n_ranks_; ++id) {
        const std::string_view whole = token_bytes_[id];
        for (std::size_t cut = 1; cut < whole.size(); ++cut) {
            const int32_t left = token_id(whole.substr(0, cut));
            if (left < 0) continue;
            const int32_t right = token_id(whole.substr(cut));
            if (right >= 0) merges_.add(left, right, {id, static_cast<double>(id)});
        }
    }
}

void TiktokenTokenizer::add_special_tokens(const std::filesystem::path& path) {
    const std::vector<std::string> meta = llama3_special_tokens();
    std::vector<std::string> specials = meta;
    const std::optional<TokenizerConfig> config = read_tokenizer_config(path, /*with_added_tokens=*/true);
    std::string bos = "<|begin_of_text|>";
    std::string eos = "<|end_of_text|>";
    if (config) {
        const std::string config_name = config->path.string();
        if (!config->added_tokens.empty()) {
            KASCADE_CHECK(config->added_tokens.size() == meta.size() &&
                              config->added_tokens.front().first == n_ranks_ &&
                              config->added_tokens.back().first == n_ranks_ + kLlama3SpecialTokens - 1,
                          "{}: added_tokens_decoder has {} tokens with ids {}..{}, expected the {} special tokens of "
                          "the Llama 3 family at ids {}..{} (after the {} ranks of {})",
                          config_name, config->added_tokens.size(), config->added_tokens.front().first,
                          config->added_tokens.back().first, kLlama3SpecialTokens, n_ranks_,
                          n_ranks_ + kLlama3SpecialTokens - 1, n_ranks_, name_);
            // Sorted, distinct ids (JSON keys are unique) from n_ranks_ to n_ranks_ + 255, 256 of them: exactly those.
            for (std::size_t i = 0; i < specials.size(); ++i) specials[i] = config->added_tokens[i].second;
            // The tokens whose ids code and chat templates rely on are at the same id in every Llama 3.x release.
            for (const std::size_t i : {0, 1, 6, 7, 9}) {
                KASCADE_CHECK(specials[i] == meta[i],
                              "{}: added_tokens_decoder['{}'] is '{}', but Meta's Llama 3 tokenizer has '{}' there",
                              config_name, n_ranks_ + i, printable(specials[i]), meta[i]);
            }
        }
        if (!config->bos_token.empty()) bos = config->bos_token;
        if (!config->eos_token.empty()) eos = config->eos_token;
        adds_bos_token_ = config->add_bos_token;
        adds_eos_token_ = config->add_eos_token;
        config_file_ = config->path;
    }
    for (std::size_t i = 0; i < specials.size(); ++i) {
        const auto id = static_cast<int32_t>(n_ranks_ + i);
        const auto [it, inserted] = ids_.try_emplace(specials[i], id);
        // A special token with the bytes of a rank would make that id unreachable by encode (the special wins).
        KASCADE_CHECK(inserted, "{}: special token {} '{}' is also token {}", config ? config->path.string() : name_,
                      id, printable(specials[i]), it->second);
        token_bytes_.push_back(specials[i]);
        specials_.add(specials[i], id, /*lstrip=*/false, /*rstrip=*/false);
    }
    const std::string where = config ? config->path.string() : name_;
    bos_id_ = token_id(bos);
    eos_id_ = token_id(eos);
    KASCADE_CHECK(bos_id_ >= n_ranks_, "{}: bos_token '{}' is not one of the special tokens", where, printable(bos));
    KASCADE_CHECK(eos_id_ >= n_ranks_, "{}: eos_token '{}' is not one of the special tokens", where, printable(eos));
}

int32_t TiktokenTokenizer::token_id(std::string_view bytes) const {
    const auto it = ids_.find(bytes);
    return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> TiktokenTokenizer::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    // Pieces repeat a lot in text; their BPE result is reused within one call (no shared state across threads).
    std::unordered_map<std::string_view, std::vector<int32_t>> cache;
    for (const AddedVocabulary::Segment& segment : specials_.split(text)) {
        if (segment.id >= 0) {
            ids.push_back(segment.id);
            continue;
        }
        for (const Pcre2Regex::Match& match : split_->find_all(segment.text)) {
            const std::string_view piece = segment.text.substr(match.begin, match.end - match.begin);
            auto [it, inserted] = cache.try_emplace(piece);
            if (inserted) encode_piece(piece, it->second);
            ids.insert(ids.end(), it->second.begin(), it->second.end());
        }
    }
    return ids;
}

void TiktokenTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    // tiktoken takes a piece that is a token as a whole without merging (BPE could reach other tokens).
    if (const auto it = ids_.find(piece); it != ids_.end() && it->second < n_ranks_) {
        out.push_back(it->second);
        return;
    }
    out.reserve(piece.size());
    for (const char c : piece) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    bpe_merge(out, merges_);
}

std::string TiktokenTokenizer::decode_piece(int32_t /*prev*/, int32_t id) const {
    KASCADE_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range for {} ({} tokens)", id, name_, vocab_size());
    return token_bytes_[id];
}

}  // namespace kascade
