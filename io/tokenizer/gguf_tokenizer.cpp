// io/tokenizer/gguf_tokenizer.cpp: reading tokenizer.ggml.* and encoding as llama.cpp's llama-vocab.cpp does.
#include "io/tokenizer/gguf_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/tokenizer/sentencepiece_pieces.h"
#include "io/weights/gguf_file.h"

namespace kascade {
namespace {

using nlohmann::json;

// The pre-tokenizer regular expressions of llama.cpp (llm_tokenizer_bpe in llama-vocab.cpp) for the
// tokenizer.ggml.pre names of Llama-family models, applied one after the other, matches and the text between them
// kept as pieces.
constexpr const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct PreTokenizer {
    std::vector<std::string_view> names;
    std::vector<const char*> regexes;
    bool ignore_merges = false;  ///< a word that is a token as a whole is that token (Llama 3)
    bool add_bos = false;        ///< llama.cpp's default for add_bos_token
};

const std::vector<PreTokenizer>& pre_tokenizers() {
    static const std::vector<PreTokenizer> table = {
        {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3Regex}, true, true},
        {{"dbrx", "smaug-bpe"}, {kLlama3Regex}, false, false},
        {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {kQwen2Regex}, false, false},
        {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
         {"\\p{N}", kGpt2Regex},
         false,
         false},
        {{"gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"}, {kGpt2Regex}, false, false},
    };
    return table;
}

std::string pre_tokenizer_names() {
    std::string names;
    for (const PreTokenizer& p : pre_tokenizers()) {
        for (const std::string_view n : p.names) names += (names.empty() ? "" : ", ") + std::string(n);
    }
    return names;
}

}  // namespace

GgufTokenizer::GgufTokenizer(const std::filesystem::path& path) : name_(path.string()) {
    const GgufFile file(path);
    KASCADE_CHECK(file.find("tokenizer.ggml.model") != nullptr,
                  "{}: metadata key \"tokenizer.ggml.model\" is missing: the file embeds no tokenizer (give one with "
                  "--tokenizer)",
                  name_);
    const std::string model = file.string("tokenizer.ggml.model", "");
    const GgufValue* tokens = file.array("tokenizer.ggml.tokens", {GgufValueType::String});
    KASCADE_CHECK(tokens != nullptr && !tokens->elements.empty(),
                  "{}: metadata key \"tokenizer.ggml.tokens\" is missing or empty", name_);
    for (const GgufValue& t : tokens->elements) tokens_.push_back(t.text);
    const auto n = static_cast<std::int64_t>(tokens_.size());

    types_.assign(tokens_.size(), TokenType::Normal);
    if (const GgufValue* types =
            file.array("tokenizer.ggml.token_type", {GgufValueType::Int32, GgufValueType::UInt32})) {
        KASCADE_CHECK(static_cast<std::int64_t>(types->elements.size()) == n,
                      "{}: metadata key \"tokenizer.ggml.token_type\" has {} entries for {} tokens", name_,
                      types->elements.size(), n);
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t type = types->elements[i].integer;
            KASCADE_CHECK(type >= 0 && type <= static_cast<int>(TokenType::Byte),
                          "{}: metadata key \"tokenizer.ggml.token_type\" gives token {} the unknown type {} at byte "
                          "{} (expected 0 to 6)",
                          name_, i, type, types->elements[i].offset);
            types_[i] = static_cast<TokenType>(type);
        }
    }
    const bool sentencepiece = model == "llama";
    KASCADE_CHECK(sentencepiece || model == "gpt2",
                  "{}: metadata key \"tokenizer.ggml.model\" = \"{}\" is not supported (supported: llama, gpt2)", name_,
                  model);
    // Absent ids take llama.cpp's defaults for SentencePiece vocabularies (<unk> 0, <s> 1, </s> 2); a byte-level
    // vocabulary has none.
    auto token_id = [&](const char* key, std::int64_t default_id) {
        const std::int64_t id = file.integer(key, default_id);
        KASCADE_CHECK(id >= -1 && id < n, "{}: metadata key \"{}\" = {} is not a token id (the vocabulary has {})",
                      name_, key, id, n);
        return static_cast<int32_t>(id);
    };
    bos_id_ = token_id("tokenizer.ggml.bos_token_id", sentencepiece ? 1 : -1);
    eos_id_ = token_id("tokenizer.ggml.eos_token_id", sentencepiece ? 2 : -1);
    unk_id_ = token_id("tokenizer.ggml.unknown_token_id", sentencepiece ? 0 : -1);
    add_eos_ = file.boolean("tokenizer.ggml.add_eos_token", false);
    if (sentencepiece) {
        load_sentencepiece(file);
        add_bos_ = file.boolean("tokenizer.ggml.add_bos_token", true);
    } else {
        load_byte_level_bpe(file);
    }
}

GgufTokenizer::~GgufTokenizer() = default;

std::string_view GgufTokenizer::kind() const {
    return byte_level_ ? "gguf-gpt2" : "gguf-llama";
}

void GgufTokenizer::load_sentencepiece(const GgufFile& file) {
    std::vector<float> scores(tokens_.size(), 0.0f);
    if (const GgufValue* s = file.array("tokenizer.ggml.scores", {GgufValueType::Float32})) {
        KASCADE_CHECK(s->elements.size() == tokens_.size(),
                      "{}: metadata key \"tokenizer.ggml.scores\" has {} entries for {} tokens", name_,
                      s->elements.size(), tokens_.size());
        for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(s->elements[i].real);
    }
    add_space_prefix_ = file.boolean("tokenizer.ggml.add_space_prefix", true);
    byte_ids_.fill(-1);
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const auto id = static_cast<int32_t>(i);
        const std::string& text = tokens_[i];
        ids_.try_emplace(text, id);
        const TokenType type = types_[i];
        if ((type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown) &&
            !text.empty()) {
            special_.add(text, id, false, false);
        }
        if (type == TokenType::Byte) {
            const int byte = byte_fallback_value(text);
            KASCADE_CHECK(byte >= 0, "{}: token {} \"{}\" has type byte but is not written <0xXX>", name_, i, text);
            if (byte_ids_[byte] < 0) byte_ids_[byte] = id;
        }
    }
    // Two adjacent pieces merge when their concatenation is a token, so every split of a token's text into two
    // tokens is a rule; the merged token's score orders them (highest first).
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const std::string& text = tokens_[i];
        for (std::size_t k = 1; k < text.size(); ++k) {
            const auto left = ids_.find(text.substr(0, k));
            if (left == ids_.end()) continue;
            const auto right = ids_.find(text.substr(k));
            if (right == ids_.end()) continue;
            merges_.add(left->second, right->second, {static_cast<int32_t>(i), -static_cast<double>(scores[i])});
        }
    }
}

void GgufTokenizer::load_byte_level_bpe(const GgufFile& file) {
    byte_level_ = true;
    const std::string pre = file.string("tokenizer.ggml.pre", "default");  // llama.cpp's choice when absent
    const PreTokenizer* found = nullptr;
    for (const PreTokenizer& p : pre_tokenizers()) {
        for (const std::string_view n : p.names) {
            if (n == pre) found = &p;
        }
    }
    KASCADE_CHECK(found != nullptr, "{}: metadata key \"tokenizer.ggml.pre\" = \"{}\" is not supported (supported: {})",
                  name_, pre, pre_tokenizer_names());
    add_bos_ = file.boolean("tokenizer.ggml.add_bos_token", found->add_bos);
    const GgufValue* merges = file.array("tokenizer.ggml.merges", {GgufValueType::String});
    KASCADE_CHECK(merges != nullptr,
                  "{}: metadata key \"tokenizer.ggml.merges\" is missing (tokenizer.ggml.model is "
                  "gpt2)",
                  name_);

    // The vocabulary as the tokenizer.json it was converted from: control, user-defined and unknown tokens are added
    // tokens, found in the raw text; the pre-tokenizer is llama.cpp's list of expressions, then GPT-2's byte mapping.
    json root;
    json vocab = json::object();
    json added = json::array();
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const TokenType type = types_[i];
        if (type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown) {
            added.push_back({{"id", i},
                             {"content", tokens_[i]},
                             {"special", type != TokenType::UserDefined},
                             {"normalized", false},
                             {"lstrip", false},
                             {"rstrip", false}});
        } else if (!vocab.contains(tokens_[i])) {
            vocab[tokens_[i]] = i;
        }
    }
    json merge_list = json::array();
    for (const GgufValue& m : merges->elements) merge_list.push_back(m.text);
    root["model"] = {{"type", "BPE"},
                     {"vocab", std::move(vocab)},
                     {"merges", std::move(merge_list)},
                     {"ignore_merges", found->ignore_merges},
                     {"byte_fallback", false}};
    root["added_tokens"] = std::move(added);
    json steps = json::array();
    for (const char* regex : found->regexes) {
        steps.push_back(
            {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    }
    steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
    root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
    root["decoder"] = {{"type", "ByteLevel"}};
    byte_level_bpe_ = std::make_unique<HfTokenizer>(name_, root, bos_id_, eos_id_);
}

std::vector<int32_t> GgufTokenizer::encode(std::string_view text) const {
    if (byte_level_) return byte_level_bpe_->encode(text);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    bool after_special = true;  // the start of the text counts as after a special token
    for (const AddedVocabulary::Segment& segment : special_.split(text)) {
        if (segment.id >= 0) {
            ids.push_back(segment.id);
            after_special = true;
            continue;
        }
        std::string piece = add_space_prefix_ && after_special ? " " : "";
        piece += segment.text;
        encode_sentencepiece(spaces_to_metaspace(piece), ids);
        after_special = false;
    }
    return ids;
}

void GgufTokenizer::encode_sentencepiece(std::string_view text, std::vector<int32_t>& out) const {
    std::vector<int32_t> symbols;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = std::min(utf8_sequence_length(static_cast<unsigned char>(text[i])), text.size() - i);
        const std::string character(text.substr(i, length));
        i += length;
        if (const auto it = ids_.find(character); it != ids_.end()) {
            symbols.push_back(it->second);
            continue;
        }
        // A character with no token: its bytes, as llama.cpp's resegment() writes it (byte tokens never merge).
        for (const char c : character) {
            const int32_t byte = byte_ids_[static_cast<unsigned char>(c)];
            KASCADE_CHECK(byte >= 0 || unk_id_ >= 0, "{}: no token for the byte 0x{:02X} and no unknown token", name_,
                          static_cast<unsigned char>(c));
            symbols.push_back(byte >= 0 ? byte : unk_id_);
        }
    }
    bpe_merge(symbols, merges_);
    out.insert(out.end(), symbols.begin(), symbols.end());
}

std::string GgufTokenizer::decode_piece(int32_t prev, int32_t id) const {
    KASCADE_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range for {} ({} tokens)", id, name_, vocab_size());
    if (byte_level_) return byte_level_bpe_->decode_piece(prev, id);
    const std::string& text = tokens_[id];
    switch (types_[id]) {
        case TokenType::Byte:
            return std::string(1, static_cast<char>(byte_fallback_value(text)));
        case TokenType::UserDefined:
            return text;
        case TokenType::Unknown:
            return "\xe2\x96\x85";  // llama.cpp's token_to_piece writes "▅" for it
        case TokenType::Control:
        case TokenType::Unused:
            return "";
        case TokenType::Normal:
        case TokenType::Undefined:
            break;
    }
    std::string piece = metaspace_to_spaces(text);
    const bool at_start = prev < 0 || (prev == bos_id_ && bos_id_ >= 0);
    if (add_space_prefix_ && at_start && piece.starts_with(' ')) piece.erase(0, 1);
    return piece;
}

}  // namespace kascade
