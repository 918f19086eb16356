// io/tokenizer/sentencepiece_tokenizer.cpp: loading a SentencePiece tokenizer.model, encoding through
// libsentencepiece, decoding piece by piece.
#include "io/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "base/error.h"
#include "io/tokenizer/sentencepiece_pieces.h"
#include "io/tokenizer/sentencepiece_proto.h"
#include "io/tokenizer/tokenizer_config.h"

namespace kascade {

namespace {

std::string replace_metaspace(std::string_view piece) {
    std::string out;
    for (std::size_t at = 0; at < piece.size();) {
        if (piece.substr(at).starts_with(kMetaspace)) {
            out += ' ';
            at += kMetaspace.size();
        } else {
            out += piece[at++];
        }
    }
    return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& path, std::string_view bytes)
    : name_(path.string()), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    // First our own walk, which says where a broken file breaks; the library would only say it cannot parse it.
    const SentencePieceModelInfo info = read_sentencepiece_model_info(bytes, name_);
    KASCADE_CHECK(!info.has_denormalizer_rules,
                  "{}: denormalizer_spec has rules; kascade decodes piece by piece and cannot apply them", name_);
    const sentencepiece::util::Status status = processor_->LoadFromSerializedProto(bytes);
    KASCADE_CHECK(status.ok(), "{}: libsentencepiece cannot load this SentencePiece model: {}", name_,
                  status.ToString());
    const int n = processor_->GetPieceSize();
    KASCADE_CHECK(n > 0 && static_cast<std::size_t>(n) == info.n_pieces,
                  "{}: libsentencepiece reads {} pieces where the file has {}", name_, n, info.n_pieces);

    // The library drops the first piece's "▁" only when the normalizer put one there (dummy prefix) or removes
    // leading whitespace anyway; its byte pieces are never stripped.
    const bool strip_first_space = info.add_dummy_prefix || info.remove_extra_whitespaces;
    texts_.resize(n);
    drops_space_.assign(n, 0);
    for (int id = 0; id < n; ++id) {
        const std::string& piece = processor_->IdToPiece(id);
        if (processor_->IsControl(id)) continue;  // BOS, EOS and other control tokens are invisible
        if (processor_->IsUnknown(id)) {
            texts_[id] = info.unk_surface;
        } else if (processor_->IsByte(id)) {
            const int byte = byte_fallback_value(piece);
            KASCADE_CHECK(byte >= 0, "{}: piece {} '{}' has type BYTE but is not <0x00>..<0xFF>", name_, id, piece);
            texts_[id] = std::string(1, static_cast<char>(byte));
        } else {
            texts_[id] = replace_metaspace(piece);
            drops_space_[id] = strip_first_space && piece.starts_with(kMetaspace);
        }
    }
    bos_id_ = processor_->bos_id();
    eos_id_ = processor_->eos_id();
    if (const std::optional<TokenizerConfig> config = read_tokenizer_config(path)) {
        adds_bos_token_ = config->add_bos_token;
        adds_eos_token_ = config->add_eos_token;
        config_file_ = config->path;
    }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
    std::vector<int> ids;
    const sentencepiece::util::Status status = processor_->Encode(text, &ids);
    KASCADE_CHECK(status.ok(), "{}: libsentencepiece cannot encode the text: {}", name_, status.ToString());
    return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode_piece(int32_t prev, int32_t id) const {
    KASCADE_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range for {} ({} tokens)", id, name_, vocab_size());
    const bool at_start = prev < 0 || (bos_id_ >= 0 && prev == bos_id_);
    if (at_start && drops_space_[id]) return texts_[id].substr(1);
    return texts_[id];
}

}  // namespace kascade
