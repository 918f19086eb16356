// io/tokenizer/hf_tokenizer.cpp: loading tokenizer.json (BPE model), encoding words with BPE, decoding.
#include "io/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/json_fields.h"
#include "io/tokenizer/sentencepiece_pieces.h"
#include "io/tokenizer/tokenizer_config.h"

namespace kascade {

namespace {

using nlohmann::json;

// Token ids index a table of token texts, so one huge id in a malformed file would allocate gigabytes. The largest
// vocabularies in use have about 262K tokens (Gemma 3); 2^22 leaves room for them and caps the table at 128 MiB.
constexpr int64_t kTokenIdLimit = int64_t{1} << 22;

/// True if `node` or anything nested in it is an object with "type": `type`.
bool has_type(const json& node, std::string_view type) {
    if (node.is_object()) {
        if (node.contains("type") && node["type"].is_string() && node["type"].get<std::string>() == type) return true;
        for (const auto& [key, value] : node.items()) {
            if (has_type(value, type)) return true;
        }
    } else if (node.is_array()) {
        for (const auto& value : node) {
            if (has_type(value, type)) return true;
        }
    }
    return false;
}

}  // namespace

HfTokenizer::HfTokenizer(const std::filesystem::path& path, std::string_view json_text) : name_(path.string()) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large for a double
        KASCADE_FAIL("{}: not valid JSON: {}", name_, e.what());
    }
    try {
        load(root);
    } catch (const json::exception& e) {
        // A field of the wrong JSON type that load() reads without its own check (e.g. a number for a string).
        KASCADE_FAIL("{}: unexpected tokenizer.json structure: {}", name_, e.what());
    }
    read_tokenizer_config(path);
}

HfTokenizer::HfTokenizer(std::string name, const nlohmann::json& root, int32_t bos_id, int32_t eos_id)
    : name_(std::move(name)), bos_id_(bos_id), eos_id_(eos_id) {
    try {
        load(root);
    } catch (const json::exception& e) {
        KASCADE_FAIL("{}: unexpected tokenizer structure: {}", name_, e.what());
    }
}

void HfTokenizer::load(const json& root) {
    KASCADE_CHECK(root.is_object(), "{}: expected a JSON object at the top level of a tokenizer.json", name_);
    KASCADE_CHECK(root.contains("model") && root["model"].is_object(), "{}: missing field 'model' (an object)", name_);
    const json& model = root["model"];
    const std::string type = model.value("type", std::string(model.contains("merges") ? "BPE" : ""));
    KASCADE_CHECK(type == "BPE",
                  "{}: model.type is '{}'; only BPE tokenizers are supported (not WordPiece, Unigram "
                  "or WordLevel)",
                  name_, type);
    KASCADE_CHECK(model.contains("vocab") && model["vocab"].is_object(),
                  "{}: missing field 'model.vocab' (an object mapping token strings to ids)", name_);
    for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const json& value = field_or_null(model, unsupported);
        KASCADE_CHECK(value.is_null() || (value.is_string() && value.get<std::string>().empty()),
                      "{}: model.{} = {} is not supported (expected null)", name_, unsupported, value.dump());
    }
    const json& dropout = field_or_null(model, "dropout");
    KASCADE_CHECK(dropout.is_null() || (dropout.is_number() && dropout.get<double>() == 0.0),
                  "{}: model.dropout = {} is not supported (expected null: encoding must be deterministic)", name_,
                  dropout.dump());
    byte_fallback_ = model.value("byte_fallback", false);
    fuse_unk_ = model.value("fuse_unk", false);
    ignore_merges_ = model.value("ignore_merges", false);

    int32_t max_id = -1;
    for (const auto& [token, id] : model["vocab"].items()) {
        KASCADE_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kTokenIdLimit,
                      "{}: model.vocab['{}'] = {} is not a token id (expected an integer in [0, {}))", name_, token,
                      id.dump(), kTokenIdLimit);
        vocab_.try_emplace(token, id.get<int32_t>());
        max_id = std::max(max_id, id.get<int32_t>());
    }
    normalizer_ = std::make_unique<HfNormalizer>(field_or_null(root, "normalizer"), name_);
    std::vector<std::pair<std::string, int32_t>> added;
    const json& added_tokens = field_or_null(root, "added_tokens");
    KASCADE_CHECK(added_tokens.is_null() || added_tokens.is_array(), "{}: added_tokens must be an array", name_);
    for (std::size_t i = 0; i < added_tokens.size(); ++i) {
        const json& t = added_tokens[i];
        KASCADE_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t["id"].get<int64_t>() >= 0 &&
                          t["id"].get<int64_t>() < kTokenIdLimit && t.contains("content") && t["content"].is_string(),
                      "{}: added_tokens[{}] must have an integer 'id' in [0, {}) and a string 'content', found {}",
                      name_, i, kTokenIdLimit, t.dump());
        const auto id = t["id"].get<int32_t>();
        std::string content = t["content"].get<std::string>();
        const bool lstrip = t.value("lstrip", false);
        const bool rstrip = t.value("rstrip", false);
        // A "normalized" token is looked for in the normalized text, as the normalizer makes it: with Llama 2's
        // normalizer "<s>" is found only as "▁<s>", after a space or at the start. Hugging Face's default is
        // normalized unless special.
        if (t.value("normalized", !t.value("special", false)) && !normalizer_->is_identity()) {
            normalized_added_.add(normalizer_->apply(content), id, lstrip, rstrip);
        } else {
            raw_added_.add(content, id, lstrip, rstrip);
        }
        vocab_.try_emplace(content, id);
        max_id = std::max(max_id, id);
        added.emplace_back(std::move(content), id);
    }
    KASCADE_CHECK(max_id >= 0, "{}: model.vocab is empty", name_);

    pre_tokenizer_ = std::make_unique<HfPreTokenizer>(field_or_null(root, "pre_tokenizer"), name_);
    const json& decoder = field_or_null(root, "decoder");
    if (pre_tokenizer_->has_byte_level() || has_type(decoder, "ByteLevel")) {
        family_ = Family::kByteLevel;
    } else if (pre_tokenizer_->has_metaspace() || normalizer_->produces(kMetaspace) || has_type(decoder, "Metaspace") ||
               has_type(decoder, "ByteFallback")) {
        family_ = Family::kSentencePiece;
    } else {
        KASCADE_FAIL(
            "{}: cannot tell which BPE family this is: expected a ByteLevel pre_tokenizer or decoder (GPT-2 "
            "style) or a Metaspace pre_tokenizer / a '▁' normalizer / a ByteFallback decoder (SentencePiece "
            "style)",
            name_);
    }

    token_text_.assign(static_cast<std::size_t>(max_id) + 1, std::string());
    byte_ids_.fill(-1);
    for (const auto& [token, id] : model["vocab"].items()) {
        std::string& text = token_text_[id.get<int32_t>()];
        if (family_ == Family::kByteLevel) {
            if (!byte_level_decode(token, text)) text = token;
        } else if (const int byte = byte_fallback_value(token); byte >= 0 && byte_fallback_) {
            text = std::string(1, static_cast<char>(byte));
            byte_ids_[byte] = id.get<int32_t>();
        } else {
            text = metaspace_to_spaces(token);
        }
    }
    for (auto& [content, id] : added) token_text_[id] = std::move(content);
    if (family_ == Family::kByteLevel) {
        // Some vocabularies lack bytes that never occur in UTF-8 text (SmolLM2 has no 0xC0, 0xF5..0xFF, ...).
        for (int b = 0; b < 256; ++b) byte_ids_[b] = token_id(byte_level_chars()[b]);
    }

    const json& unk = field_or_null(model, "unk_token");
    if (unk.is_string()) {
        unk_id_ = token_id(unk.get<std::string>());
        KASCADE_CHECK(unk_id_ >= 0, "{}: model.unk_token '{}' is not in model.vocab", name_, unk.get<std::string>());
    }

    const json& merges = field_or_null(model, "merges");
    KASCADE_CHECK(merges.is_null() || merges.is_array(), "{}: model.merges must be an array", name_);
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const json& m = merges[rank];
        std::string left, right;
        if (m.is_string()) {
            std::tie(left, right) = split_merge_line(m.get<std::string>(), rank);
        } else {
            KASCADE_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                          "{}: model.merges[{}] = {} is neither \"left right\" nor [\"left\", \"right\"]", name_, rank,
                          m.dump());
            left = m[0].get<std::string>();
            right = m[1].get<std::string>();
        }
        auto vocab_id = [&](const std::string& token, std::string_view role) {
            const int32_t id = token_id(token);
            KASCADE_CHECK(id >= 0, "{}: model.merges[{}] ('{} {}') {} the unknown token '{}'", name_, rank, left, right,
                          role, token);
            return id;
        };
        const int32_t left_id = vocab_id(left, "names");
        const int32_t right_id = vocab_id(right, "names");
        merges_.add(left_id, right_id, {vocab_id(left + right, "makes"), static_cast<double>(rank)});
    }
}

std::pair<std::string, std::string> HfTokenizer::split_merge_line(std::string_view line, std::size_t rank) const {
    const std::size_t first_space = line.find(' ');
    KASCADE_CHECK(first_space != std::string_view::npos,
                  "{}: model.merges[{}] = '{}' is not two tokens separated by a space", name_, rank, line);
    if (line.find(' ', first_space + 1) == std::string_view::npos) {
        return {std::string(line.substr(0, first_space)), std::string(line.substr(first_space + 1))};
    }
    // Tokens may contain spaces themselves (Llama 2 has " ", "  ", "▁ ": SentencePiece pieces that its
    // normalizer makes unreachable), so "   " is " " + " ". The separator is the one space whose two sides are
    // vocabulary tokens that together make a vocabulary token, which is how the merge was written. Hugging Face's
    // Rust reader refuses such lines (it splits on every space); its JavaScript one keeps the first two fields of
    // that split (empty strings: a rule that never applies), which gives the same ids as this reading on Llama 2,
    // where no token with a space is ever formed.
    std::vector<std::size_t> separators;
    for (std::size_t at = first_space; at != std::string_view::npos; at = line.find(' ', at + 1)) {
        const std::string_view left = line.substr(0, at);
        const std::string_view right = line.substr(at + 1);
        if (!left.empty() && !right.empty() && token_id(left) >= 0 && token_id(right) >= 0 &&
            token_id(std::string(left) + std::string(right)) >= 0) {
            separators.push_back(at);
        }
    }
    KASCADE_CHECK(separators.size() == 1,
                  "{}: model.merges[{}] = '{}' has several spaces and {} ways to read it as two vocabulary tokens "
                  "that make a vocabulary token (expected exactly one; write it as [\"left\", \"right\"])",
                  name_, rank, line, separators.size());
    return {std::string(line.substr(0, separators[0])), std::string(line.substr(separators[0] + 1))};
}

HfTokenizer::~HfTokenizer() = default;

std::string_view HfTokenizer::kind() const {
    return family_ == Family::kByteLevel ? "hf-bpe-bytelevel" : "hf-bpe-sentencepiece";
}

int32_t HfTokenizer::token_id(std::string_view token) const {
    const auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

void HfTokenizer::read_tokenizer_config(const std::filesystem::path& tokenizer_path) {
    std::string bos, eos;
    if (const std::optional<TokenizerConfig> config = kascade::read_tokenizer_config(tokenizer_path)) {
        bos = config->bos_token;
        eos = config->eos_token;
        adds_bos_token_ = config->add_bos_token;
        adds_eos_token_ = config->add_eos_token;
        config_file_ = config->path;
    }
    auto first_known = [this](std::initializer_list<std::string_view> names) {
        for (const std::string_view name : names) {
            if (token_id(name) >= 0) return std::string(name);
        }
        return std::string();
    };
    if (bos.empty()) bos = first_known({"<s>", "<|begin_of_text|>"});
    if (eos.empty()) eos = first_known({"</s>", "<|end_of_text|>", "<|endoftext|>"});
    bos_id_ = bos.empty() ? -1 : token_id(bos);
    eos_id_ = eos.empty() ? -1 : token_id(eos);
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    // Words repeat a lot in text; their BPE result is reused within one call (no shared state across threads).
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
    std::vector<std::string> words;
    for (const AddedVocabulary::Segment& segment : raw_added_.split(text)) {
        if (segment.id >= 0) {
            ids.push_back(segment.id);
            continue;
        }
        const std::string normalized = normalizer_->apply(segment.text);
        for (const AddedVocabulary::Segment& piece : normalized_added_.split(normalized)) {
            if (piece.id >= 0) {
                ids.push_back(piece.id);
                continue;
            }
            words.clear();
            const bool at_text_start = segment.text.data() == text.data() && piece.text.data() == normalized.data();
            pre_tokenizer_->split(piece.text, at_text_start, words);
            for (const std::string& word : words) {
                auto it = cache.find(word);
                if (it == cache.end()) {
                    std::vector<int32_t> word_ids;
                    encode_word(word, word_ids);
                    it = cache.emplace(word, std::move(word_ids)).first;
                }
                ids.insert(ids.end(), it->second.begin(), it->second.end());
            }
        }
    }
    return ids;
}

void HfTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
        std::string whole;
        if (family_ == Family::kByteLevel) {
            for (const char c : word) whole += byte_level_chars()[static_cast<unsigned char>(c)];
        } else {
            whole = word;
        }
        if (const int32_t id = token_id(whole); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    std::vector<int32_t> symbols;
    bool previous_unk = false;
    // Hugging Face: a character with no token becomes unk_token (consecutive ones fused if fuse_unk) or, with no
    // unk_token, silently disappears; we refuse to drop text instead.
    auto push_unknown = [&](const std::string& what) {
        KASCADE_CHECK(unk_id_ >= 0, "{}: no token for {} and the tokenizer has neither byte_fallback nor an unk_token",
                      name_, what);
        if (!(fuse_unk_ && previous_unk)) symbols.push_back(unk_id_);
        previous_unk = true;
    };
    auto push_known = [&](int32_t id) {
        symbols.push_back(id);
        previous_unk = false;
    };
    if (family_ == Family::kByteLevel) {
        for (const char c : word) {
            const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
            if (id >= 0) {
                push_known(id);
            } else {
                push_unknown(fmt::format("byte 0x{:02X}", static_cast<unsigned char>(c)));
            }
        }
    } else {
        for (std::size_t i = 0; i < word.size();) {
            const std::size_t length =
                std::min(utf8_sequence_length(static_cast<unsigned char>(word[i])), word.size() - i);
            const std::string_view character = word.substr(i, length);
            i += length;
            if (const int32_t id = token_id(character); id >= 0) {
                push_known(id);
            } else if (byte_fallback_ && std::all_of(character.begin(), character.end(), [&](char c) {
                           return byte_ids_[static_cast<unsigned char>(c)] >= 0;
                       })) {
                for (const char c : character) push_known(byte_ids_[static_cast<unsigned char>(c)]);
            } else {
                push_unknown(fmt::format("the text '{}'", character));
            }
        }
    }
    bpe_merge(symbols, merges_);
    out.insert(out.end(), symbols.begin(), symbols.end());
}

std::string HfTokenizer::decode_piece(int32_t prev, int32_t id) const {
    KASCADE_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range for {} ({} tokens)", id, name_, vocab_size());
    const std::string& text = token_text_[id];
    const bool at_start = prev < 0 || (prev == bos_id_ && bos_id_ >= 0);
    if (family_ == Family::kSentencePiece && at_start && text.starts_with(' ')) return text.substr(1);
    return text;
}

}  // namespace kascade
