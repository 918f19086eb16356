// io/tokenizer/hf_pre_tokenizer.cpp: pre-tokenizer steps of tokenizer.json, each a split of every current word.
#include "io/tokenizer/hf_pre_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/tokenizer/hf_normalizer.h"

namespace kascade {

namespace {

/// The split pattern of GPT-2, which Hugging Face's ByteLevel pre-tokenizer uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool json_bool(const nlohmann::json& config, const char* key, bool fallback, std::string_view where,
               const std::string& field) {
    if (!config.contains(key) || config[key].is_null()) return fallback;
    KASCADE_CHECK(config[key].is_boolean(), "{}: {}.{} must be true or false", where, field, key);
    return config[key].get<bool>();
}

struct Span {
    std::size_t begin;
    std::size_t end;
    bool is_match;
};

}  // namespace

HfPreTokenizer::HfPreTokenizer(const nlohmann::json& config, std::string_view where) {
    add_steps(config, where, "pre_tokenizer");
}

HfPreTokenizer::~HfPreTokenizer() = default;

void HfPreTokenizer::add_steps(const nlohmann::json& config, std::string_view where, const std::string& field) {
    if (config.is_null()) return;
    KASCADE_CHECK(config.is_object() && config.contains("type") && config["type"].is_string(),
                  "{}: {} must be null or an object with a \"type\"", where, field);
    const std::string type = config["type"].get<std::string>();
    if (type == "Sequence") {
        KASCADE_CHECK(config.contains("pretokenizers") && config["pretokenizers"].is_array(),
                      "{}: {}.pretokenizers must be an array", where, field);
        for (std::size_t i = 0; i < config["pretokenizers"].size(); ++i) {
            add_steps(config["pretokenizers"][i], where, fmt::format("{}.pretokenizers[{}]", field, i));
        }
    } else if (type == "Split") {
        Step step{.kind = Step::Kind::kSplit,
                  .regex = compile_hf_pattern(config.value("pattern", nlohmann::json()), where, field)};
        const std::string behavior = config.value("behavior", std::string("Isolated"));
        if (behavior == "Removed") {
            step.behavior = Behavior::kRemoved;
        } else if (behavior == "Isolated") {
            step.behavior = Behavior::kIsolated;
        } else if (behavior == "MergedWithPrevious") {
            step.behavior = Behavior::kMergedWithPrevious;
        } else if (behavior == "MergedWithNext") {
            step.behavior = Behavior::kMergedWithNext;
        } else if (behavior == "Contiguous") {
            step.behavior = Behavior::kContiguous;
        } else {
            KASCADE_FAIL(
                "{}: {}.behavior '{}' is unknown (expected Removed, Isolated, MergedWithPrevious, "
                "MergedWithNext or Contiguous)",
                where, field, behavior);
        }
        step.invert = json_bool(config, "invert", false, where, field);
        steps_.push_back(std::move(step));
    } else if (type == "ByteLevel") {
        has_byte_level_ = true;
        if (json_bool(config, "add_prefix_space", false, where, field))
            steps_.push_back({.kind = Step::Kind::kPrefixSpace});
        if (json_bool(config, "use_regex", true, where, field)) {
            steps_.push_back(
                {.kind = Step::Kind::kSplit, .regex = std::make_unique<Pcre2Regex>(kGpt2Pattern, false, where)});
        }
    } else if (type == "Digits") {
        // Rust's char::is_numeric, which Hugging Face uses, is the Unicode N category, as \p{N} is.
        const bool individual = json_bool(config, "individual_digits", false, where, field);
        steps_.push_back({.kind = Step::Kind::kSplit,
                          .regex = std::make_unique<Pcre2Regex>(individual ? R"(\p{N})" : R"(\p{N}+)", false, where)});
    } else if (type == "Metaspace") {
        has_metaspace_ = true;
        Step step{.kind = Step::Kind::kMetaspace};
        step.replacement = config.value("replacement", std::string("\xe2\x96\x81"));
        const std::string scheme = config.value(
            "prepend_scheme", json_bool(config, "add_prefix_space", true, where, field) ? "always" : "never");
        KASCADE_CHECK(scheme == "always" || scheme == "first" || scheme == "never",
                      "{}: {}.prepend_scheme '{}' is unknown (expected always, first or never)", where, field, scheme);
        step.prepend_always = scheme == "always";
        step.prepend_first = scheme == "first";
        if (json_bool(config, "split", true, where, field)) {
            step.regex = std::make_unique<Pcre2Regex>(step.replacement, true, where);
            step.behavior = Behavior::kMergedWithNext;
        }
        steps_.push_back(std::move(step));
    } else {
        KASCADE_FAIL("{}: {}.type '{}' is not supported (supported: Sequence, Split, ByteLevel, Digits, Metaspace)",
                     where, field, type);
    }
}

void HfPreTokenizer::split(std::string_view text, bool at_text_start, std::vector<std::string>& words) const {
    std::vector<std::string> current{std::string(text)};
    std::vector<std::string> next;
    for (const Step& step : steps_) {
        next.clear();
        for (std::size_t i = 0; i < current.size(); ++i) {
            apply(step, std::move(current[i]), at_text_start && i == 0, next);
        }
        std::swap(current, next);
    }
    for (std::string& word : current) {
        if (!word.empty()) words.push_back(std::move(word));
    }
}

void HfPreTokenizer::apply(const Step& step, std::string&& word, bool at_text_start, std::vector<std::string>& out) {
    if (step.kind == Step::Kind::kPrefixSpace) {
        if (!word.starts_with(' ')) word.insert(0, 1, ' ');
        out.push_back(std::move(word));
        return;
    }
    if (step.kind == Step::Kind::kMetaspace) {
        std::string replaced;
        for (const char c : word) {
            if (c == ' ') {
                replaced += step.replacement;
            } else {
                replaced += c;
            }
        }
        const bool prepend = step.prepend_always || (step.prepend_first && at_text_start);
        if (prepend && !replaced.starts_with(step.replacement)) replaced.insert(0, step.replacement);
        word = std::move(replaced);
        if (!step.regex) {
            out.push_back(std::move(word));
            return;
        }
    }
    // Hugging Face's split: the text as alternating spans of matches and gaps, then each behaviour's fold.
    std::vector<Span> spans;
    std::size_t last = 0;
    for (const Pcre2Regex::Match& m : step.regex->find_all(word)) {
        if (m.begin > last) spans.push_back({last, m.begin, false});
        spans.push_back({m.begin, m.end, true});
        last = m.end;
    }
    if (last < word.size()) spans.push_back({last, word.size(), false});
    if (step.invert) {
        for (Span& s : spans) s.is_match = !s.is_match;
    }
    std::vector<Span> kept;
    bool previous_match = false;
    switch (step.behavior) {
        case Behavior::kIsolated:
            kept = std::move(spans);
            break;
        case Behavior::kRemoved:
            for (const Span& s : spans) {
                if (!s.is_match) kept.push_back(s);
            }
            break;
        case Behavior::kMergedWithPrevious:
            for (const Span& s : spans) {
                if (s.is_match && !previous_match && !kept.empty()) {
                    kept.back().end = s.end;
                } else {
                    kept.push_back(s);
                }
                previous_match = s.is_match;
            }
            break;
        case Behavior::kMergedWithNext:
            for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
                if (it->is_match && !previous_match && !kept.empty()) {
                    kept.back().begin = it->begin;
                } else {
                    kept.push_back(*it);
                }
                previous_match = it->is_match;
            }
            std::reverse(kept.begin(), kept.end());
            break;
        case Behavior::kContiguous:
            for (const Span& s : spans) {
                if (s.is_match == previous_match && !kept.empty()) {
                    kept.back().end = s.end;
                } else {
                    kept.push_back(s);
                }
                previous_match = s.is_match;
            }
            break;
    }
    for (const Span& s : kept) {
        if (s.end > s.begin) out.emplace_back(word, s.begin, s.end - s.begin);
    }
}

}  // namespace kascade
