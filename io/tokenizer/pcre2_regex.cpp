// io/tokenizer/pcre2_regex.cpp: PCRE2 compile and match loop.
#include "io/tokenizer/pcre2_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace kascade {

struct Pcre2Regex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

Pcre2Regex::Pcre2Regex(std::string_view pattern, bool literal, std::string_view where)
    : code_(std::make_unique<Code>()) {
    // NO_UTF_CHECK is not used at match time: text is user input and may be invalid UTF-8, which PCRE2 then
    // reports instead of misreading.
    // PCRE2 refuses UCP together with LITERAL (a literal has no classes for UCP to change).
    const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error_code,
                                &error_offset, nullptr);
    if (!code_->code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error_code, message, sizeof(message));
        KASCADE_FAIL("{}: cannot compile regex '{}' at offset {}: {}", where, pattern, error_offset,
                     reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only; without it (unsupported CPU or build) the interpreter gives the same matches.
    pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Pcre2Regex::~Pcre2Regex() = default;

std::vector<Pcre2Regex::Match> Pcre2Regex::find_all(std::string_view text) const {
    std::vector<Match> matches;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t offset = 0;
    uint32_t options = 0;
    while (offset <= text.size()) {
        const int rc = pcre2_match(code_->code, subject, text.size(), offset, options, data.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
            KASCADE_FAIL("invalid UTF-8 in the text at byte {}", pcre2_get_startchar(data.get()));
        }
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof(message));
            KASCADE_FAIL("regex match failed at byte {} of the text: {}", offset,
                         reinterpret_cast<const char*>(message));
        }
        // Later searches start at a match end, which is a codepoint boundary: skip re-validating the UTF-8.
        options = PCRE2_NO_UTF_CHECK;
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
        const std::size_t begin = ovector[0];
        const std::size_t end = ovector[1];
        if (end > begin) {
            matches.push_back({begin, end});
            offset = end;
        } else {
            // Step over an empty match by one codepoint.
            offset = begin + 1;
            while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
        }
    }
    return matches;
}

}  // namespace kascade
