// io/tokenizer/hf_normalizer.cpp: Prepend / Replace / Unicode normal form / Sequence normalizers of tokenizer.json.
#include "io/tokenizer/hf_normalizer.h"

#include <cstdlib>

#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace kascade {

namespace {

/// The utf8proc_map options of a Unicode normal form (those utf8proc_NFC() and friends use), or 0 if `type` is
/// not one.
int unicode_form_options(std::string_view type) {
    if (type == "NFC") return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    if (type == "NFD") return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    if (type == "NFKC") return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    if (type == "NFKD") return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    return 0;
}

std::string unicode_normal_form(const std::string& text, int options, std::string_view where, std::string_view form) {
    if (text.empty()) return text;
    utf8proc_uint8_t* normalized = nullptr;
    // Without UTF8PROC_NULLTERM the length is given, so NUL bytes in the text are characters like any other.
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                     &normalized, static_cast<utf8proc_option_t>(options));
    KASCADE_CHECK(length >= 0, "{}: the {} normalizer cannot read the text: {}", where, form, utf8proc_errmsg(length));
    std::string out(reinterpret_cast<const char*>(normalized), static_cast<std::size_t>(length));
    std::free(normalized);
    return out;
}

}  // namespace

std::unique_ptr<Pcre2Regex> compile_hf_pattern(const nlohmann::json& pattern, std::string_view where,
                                               const std::string& field) {
    KASCADE_CHECK(pattern.is_object(), "{}: {}.pattern must be an object {{\"String\": ...}} or {{\"Regex\": ...}}",
                  where, field);
    if (pattern.contains("String") && pattern["String"].is_string()) {
        return std::make_unique<Pcre2Regex>(pattern["String"].get<std::string>(), true, where);
    }
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
        return std::make_unique<Pcre2Regex>(pattern["Regex"].get<std::string>(), false, where);
    }
    KASCADE_FAIL("{}: {}.pattern must have a \"String\" or \"Regex\" text, found {}", where, field, pattern.dump());
}

HfNormalizer::HfNormalizer(const nlohmann::json& config, std::string_view where) : where_(where) {
    add_steps(config, where, "normalizer");
}

HfNormalizer::~HfNormalizer() = default;

void HfNormalizer::add_steps(const nlohmann::json& config, std::string_view where, const std::string& field) {
    if (config.is_null()) return;
    KASCADE_CHECK(config.is_object() && config.contains("type") && config["type"].is_string(),
                  "{}: {} must be null or an object with a \"type\"", where, field);
    const std::string type = config["type"].get<std::string>();
    if (type == "Sequence") {
        KASCADE_CHECK(config.contains("normalizers") && config["normalizers"].is_array(),
                      "{}: {}.normalizers must be an array", where, field);
        for (std::size_t i = 0; i < config["normalizers"].size(); ++i) {
            add_steps(config["normalizers"][i], where, fmt::format("{}.normalizers[{}]", field, i));
        }
    } else if (type == "Prepend") {
        KASCADE_CHECK(config.contains("prepend") && config["prepend"].is_string(), "{}: {}.prepend must be a string",
                      where, field);
        steps_.push_back({Step::Kind::kPrepend, config["prepend"].get<std::string>(), nullptr});
    } else if (type == "Replace") {
        KASCADE_CHECK(config.contains("content") && config["content"].is_string(), "{}: {}.content must be a string",
                      where, field);
        steps_.push_back({Step::Kind::kReplace, config["content"].get<std::string>(),
                          compile_hf_pattern(config.value("pattern", nlohmann::json()), where, field)});
    } else if (const int options = unicode_form_options(type); options != 0) {
        steps_.push_back({Step::Kind::kUnicodeForm, type, nullptr, options});
    } else {
        KASCADE_FAIL("{}: {}.type '{}' is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)",
                     where, field, type);
    }
}

std::string HfNormalizer::apply(std::string_view text) const {
    std::string current(text);
    for (const Step& step : steps_) {
        if (step.kind == Step::Kind::kPrepend) {
            // Hugging Face prepends only to non-empty text.
            if (!current.empty()) current.insert(0, step.content);
            continue;
        }
        if (step.kind == Step::Kind::kUnicodeForm) {
            current = unicode_normal_form(current, step.utf8proc_options, where_, step.content);
            continue;
        }
        std::string replaced;
        replaced.reserve(current.size());
        std::size_t last = 0;
        for (const Pcre2Regex::Match& m : step.regex->find_all(current)) {
            replaced.append(current, last, m.begin - last);
            replaced += step.content;
            last = m.end;
        }
        replaced.append(current, last);
        current = std::move(replaced);
    }
    return current;
}

bool HfNormalizer::produces(std::string_view content) const {
    for (const Step& step : steps_) {
        if (step.kind != Step::Kind::kUnicodeForm && step.content == content) return true;
    }
    return false;
}

}  // namespace kascade
