// The tokenizer fuzz targets: tokenizer.json, the llama2.c tokenizer.bin and the tiktoken rank file (Llama 3's
// tokenizer.model), each loaded and then used, since a tokenizer that loads but cannot encode or decode safely is as
// bad as a parser that crashes.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/file_util.h"
#include "io/tokenizer/tiktoken_tokenizer.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade::fuzz {

namespace {

// ASCII words and punctuation, spaces and newlines, 2-, 3- and 4-byte UTF-8 (accents, CJK, an emoji), digits:
// enough to reach every pre-tokenizer branch and byte fallback.
constexpr std::string_view kSampleText =
    "Once upon a time,  Lily's cat said \"héllo\"!\n\t42 + 3.5 = 日本語 🙂 end.";

void use_tokenizer(const Tokenizer& tokenizer) {
    const int vocab = tokenizer.vocab_size();
    require(vocab > 0, "a tokenizer with an empty vocabulary was accepted");
    require(tokenizer.bos_id() >= -1 && tokenizer.bos_id() < vocab, fmt::format("bos id {}", tokenizer.bos_id()));
    require(tokenizer.eos_id() >= -1 && tokenizer.eos_id() < vocab, fmt::format("eos id {}", tokenizer.eos_id()));
    static_cast<void>(tokenizer.kind());
    static_cast<void>(tokenizer.adds_bos_token());
    static_cast<void>(tokenizer.adds_eos_token());
    try {
        const std::vector<std::int32_t> ids = tokenizer.encode(kSampleText);
        for (const std::int32_t id : ids) require(id >= 0 && id < vocab, fmt::format("encode gave id {}", id));
        static_cast<void>(tokenizer.decode(ids));
    } catch (const kascade::Error&) {
        // A tokenizer may lack a piece for some of the text (no byte fallback, no unk token).
    }
    // Every id decodes alone and after each special token (the inputs are small, so the vocabulary is too).
    for (std::int32_t id = 0; id < vocab; ++id) {
        try {
            static_cast<void>(tokenizer.decode_piece(-1, id));
            if (tokenizer.bos_id() >= 0) static_cast<void>(tokenizer.decode_piece(tokenizer.bos_id(), id));
        } catch (const kascade::Error&) {
        }
    }
}

}  // namespace

bool fuzz_tokenizer_json(FuzzInput input) {
    try {
        // No tokenizer_config.json beside it: the loader then takes add_bos_token from nowhere (nullopt).
        use_tokenizer(*load_tokenizer(write_input_file("tokenizer.json", input)));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

bool fuzz_tokenizer_bin(FuzzInput input) {
    try {
        use_tokenizer(*load_tokenizer(write_input_file("tokenizer.bin", input)));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

bool fuzz_tokenizer_tiktoken(FuzzInput input) {
    try {
        // The parser itself, not load_tokenizer(): chosen by content, most inputs would go to another reader.
        const std::filesystem::path path = write_input_file("tokenizer.model", input);
        use_tokenizer(TiktokenTokenizer(path, read_file(path)));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
