// pipeline/tasks/longbench_metrics.cpp: LongBench's English metrics (see the header for what is reproduced and how).
// Each function follows the Python it reproduces step by step, in the same order of floating-point operations, so
// that scores match to the last bit; comments name the Python each step stands for.
#include "pipeline/tasks/longbench_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/ranges.h>
#include <utf8proc.h>

#include "base/closest_match.h"
#include "base/error.h"
#include "pipeline/tasks/python_text.h"

namespace kascade {

namespace {

// ---------------------------------------------------------------------------------------------------------------
// UTF-8 read as a Python str

/// A byte that starts no valid UTF-8 sequence decodes to U+DC00 + byte, as Python's surrogateescape does, so every
/// byte string has a code-point reading and encodes back to itself.
constexpr char32_t kEscapeBase = 0xDC00;

std::u32string decode_utf8(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const auto continuation = [&](std::size_t i, unsigned lo, unsigned hi) {
        return i < s.size() && byte(i) >= lo && byte(i) <= hi;
    };
    std::size_t i = 0;
    while (i < s.size()) {
        const unsigned b0 = byte(i);
        // The well-formed sequences of Unicode's Table 3-7 (what Python's strict decoder accepts): no overlong
        // forms, no surrogates, nothing above U+10FFFF.
        std::size_t n = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (b0 < 0x80) {
            n = 1;
        } else if (b0 >= 0xC2 && b0 <= 0xDF) {
            n = 2;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            n = 3;
            if (b0 == 0xE0) lo = 0xA0;
            if (b0 == 0xED) hi = 0x9F;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            n = 4;
            if (b0 == 0xF0) lo = 0x90;
            if (b0 == 0xF4) hi = 0x8F;
        }
        bool valid = n > 0 && (n == 1 || continuation(i + 1, lo, hi));
        for (std::size_t k = 2; valid && k < n; ++k) valid = continuation(i + k, 0x80, 0xBF);
        if (!valid) {
            out.push_back(kEscapeBase + b0);
            ++i;
            continue;
        }
        char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
        for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (byte(i + k) & 0x3F);
        out.push_back(c);
        i += n;
    }
    return out;
}

bool is_escaped_byte(char32_t c) {
    return c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF;
}

std::string encode_utf8(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char32_t c : s) {
        if (is_escaped_byte(c)) {
            out.push_back(static_cast<char>(c - kEscapeBase));
            continue;
        }
        utf8proc_uint8_t buf[4];
        const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
        out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
    }
    return out;
}

utf8proc_category_t category(char32_t c) {
    if (c > 0x10FFFF || is_escaped_byte(c)) return UTF8PROC_CATEGORY_CS;  // what Python sees: a lone surrogate
    return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

/// `\w` of a str pattern: str.isalnum() (a letter or a number) or '_'.
bool is_word_char(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    switch (category(c)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO:
            return true;
        default:
            return false;
    }
}

/// `\d` of a str pattern: str.isdecimal(), the general category Nd.
bool is_decimal(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return category(c) == UTF8PROC_CATEGORY_ND;
}

/// The Unicode property Cased, approximated by the cased letter categories (see the header).
bool is_cased(char32_t c) {
    const utf8proc_category_t cat = category(c);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

/// The Unicode property Case_Ignorable: marks, format characters, modifiers, and Word_Break's MidLetter,
/// MidNumLet and Single_Quote characters.
bool is_case_ignorable(char32_t c) {
    constexpr std::array<char32_t, 17> kWordBreakMid{0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F,
                                                     0x05F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                                     0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    if (std::find(kWordBreakMid.begin(), kWordBreakMid.end(), c) != kWordBreakMid.end()) return true;
    const utf8proc_category_t cat = category(c);
    return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

/// CPython's handle_capital_sigma: U+03A3 lower-cases to the final sigma U+03C2 when a cased letter precedes it and
/// none follows it (case-ignorable characters skipped both ways).
bool is_final_sigma(std::u32string_view s, std::size_t i) {
    std::size_t j = i;
    while (j > 0 && is_case_ignorable(s[j - 1])) --j;
    if (j == 0 || !is_cased(s[j - 1])) return false;
    j = i + 1;
    while (j < s.size() && is_case_ignorable(s[j])) ++j;
    return j == s.size() || !is_cased(s[j]);
}

/// str.lower().
std::u32string python_lower(std::u32string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char32_t c = s[i];
        if (c < 0x80) {
            out.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        } else if (c == 0x0130) {  // the one multi-character lower case of SpecialCasing.txt: i + combining dot
            out.push_back(U'i');
            out.push_back(0x0307);
        } else if (c == 0x03A3) {
            out.push_back(is_final_sigma(s, i) ? 0x03C2 : 0x03C3);
        } else if (is_escaped_byte(c) || c > 0x10FFFF) {
            out.push_back(c);
        } else {
            out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
        }
    }
    return out;
}

/// str.split(): the runs between whitespace, none empty.
std::vector<std::u32string_view> python_split(std::u32string_view s) {
    std::vector<std::u32string_view> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_python_space(s[i])) ++i;
        const std::size_t begin = i;
        while (i < s.size() && !is_python_space(s[i])) ++i;
        if (i > begin) out.push_back(s.substr(begin, i - begin));
    }
    return out;
}

/// str.split(sep) for a one-character sep: every piece, empty ones included.
std::vector<std::u32string_view> split_at(std::u32string_view s, char32_t sep) {
    std::vector<std::u32string_view> out;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(begin, i - begin));
            begin = i + 1;
        }
    }
    return out;
}

/// " ".join(s.split()).
std::u32string collapse_whitespace(std::u32string_view s) {
    std::u32string out;
    for (const std::u32string_view word : python_split(s)) {
        if (!out.empty()) out.push_back(U' ');
        out.append(word);
    }
    return out;
}

/// re.findall(r"\d+", s).
std::vector<std::u32string_view> digit_runs(std::u32string_view s) {
    std::vector<std::u32string_view> out;
    std::size_t i = 0;
    while (i < s.size()) {
        if (!is_decimal(s[i])) {
            ++i;
            continue;
        }
        const std::size_t begin = i;
        while (i < s.size() && is_decimal(s[i])) ++i;
        out.push_back(s.substr(begin, i - begin));
    }
    return out;
}

/// Python's round() of a float: to the nearest integer, halves to the even one (utils.intr in fuzzywuzzy).
long round_half_even(double x) {
    const double floor = std::floor(x);
    const double fraction = x - floor;
    long n = static_cast<long>(floor);
    if (fraction > 0.5 || (fraction == 0.5 && n % 2 != 0)) ++n;
    return n;
}

/// prediction.lstrip('\n').split('\n'): the lines after the leading newlines.
std::vector<std::string_view> lines_after_leading_newlines(std::string_view s) {
    s.remove_prefix(std::min(s.find_first_not_of('\n'), s.size()));
    std::vector<std::string_view> lines;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == '\n') {
            lines.push_back(s.substr(begin, i - begin));
            begin = i + 1;
        }
    }
    return lines;
}

// ---------------------------------------------------------------------------------------------------------------
// rouge 1.0.1's ROUGE-L (rouge/rouge.py and rouge/rouge_score.py)

/// Rouge._get_avg_scores's sentences: [" ".join(_.split()) for _ in text.split(".") if len(_) > 0].
std::vector<std::u32string> rouge_sentences(std::u32string_view text) {
    std::vector<std::u32string> sentences;
    for (const std::u32string_view piece : split_at(text, U'.'))
        if (!piece.empty()) sentences.push_back(collapse_whitespace(piece));
    return sentences;
}

/// The words of sentences as word ids (_split_into_words: sentence.split(" "), so "" is the word ""), and the ids'
/// dictionary, shared by the reference and the prediction so that equal words get equal ids.
using WordIds = std::unordered_map<std::u32string_view, int>;
std::vector<std::vector<int>> rouge_words(const std::vector<std::u32string>& sentences, WordIds& ids) {
    std::vector<std::vector<int>> words;
    for (const std::u32string& sentence : sentences) {
        std::vector<int>& w = words.emplace_back();
        for (const std::u32string_view word : split_at(sentence, U' ')) {
            const auto [it, added] = ids.try_emplace(word, static_cast<int>(ids.size()));
            w.push_back(it->second);
        }
    }
    return words;
}

std::size_t distinct_words(const std::vector<std::vector<int>>& sentences) {
    std::unordered_set<int> distinct;
    for (const std::vector<int>& s : sentences) distinct.insert(s.begin(), s.end());
    return distinct.size();
}

/// _recon_lcs(x, y): the words of the one LCS that backtracking from the table's end finds: a match steps back in
/// both, otherwise it steps back in x only if that keeps a strictly longer LCS, else in y.
void add_recon_lcs(const std::vector<int>& x, const std::vector<int>& y, std::unordered_set<int>& out) {
    const std::size_t n = x.size(), m = y.size();
    std::vector<int> table((n + 1) * (m + 1), 0);  // _lcs: table[i, j] = LCS length of x[:i] and y[:j]
    const auto at = [&](std::size_t i, std::size_t j) -> int& { return table[i * (m + 1) + j]; };
    for (std::size_t i = 1; i <= n; ++i)
        for (std::size_t j = 1; j <= m; ++j)
            at(i, j) = x[i - 1] == y[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
    std::size_t i = n, j = m;
    while (i > 0 && j > 0) {
        if (x[i - 1] == y[j - 1]) {
            out.insert(x[i - 1]);
            --i;
            --j;
        } else if (at(i - 1, j) > at(i, j - 1)) {
            --i;
        } else {
            --j;
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// difflib.SequenceMatcher(None, a, b).ratio()

class SequenceMatcher {
  public:
    SequenceMatcher(std::u32string_view a, std::u32string_view b) : a_(a), b_(b) {
        // __chain_b: where each character occurs in b; with autojunk (the default) and len(b) >= 200, characters
        // occurring more than len(b) // 100 + 1 times are "popular" and left out. There is no isjunk, so no junk.
        for (std::size_t j = 0; j < b.size(); ++j) b2j_[b[j]].push_back(static_cast<int>(j));
        if (b.size() >= 200) {
            const std::size_t ntest = b.size() / 100 + 1;
            std::erase_if(b2j_, [&](const auto& entry) { return entry.second.size() > ntest; });
        }
        j2len_.assign(b.size() + 1, 0);
        new_j2len_.assign(b.size() + 1, 0);
    }

    /// sum(size for the blocks of get_matching_blocks()): the longest match of the whole, then recursively of the
    /// parts before and after it (the order the parts are taken in changes nothing in the sum).
    std::size_t matching_characters() {
        std::size_t total = 0;
        std::vector<std::array<std::size_t, 4>> queue{{0, a_.size(), 0, b_.size()}};
        while (!queue.empty()) {
            const auto [alo, ahi, blo, bhi] = queue.back();
            queue.pop_back();
            const auto [i, j, k] = find_longest_match(alo, ahi, blo, bhi);
            if (k == 0) continue;
            total += k;
            if (alo < i && blo < j) queue.push_back({alo, i, blo, j});
            if (i + k < ahi && j + k < bhi) queue.push_back({i + k, ahi, j + k, bhi});
        }
        return total;
    }

  private:
    struct Match {
        std::size_t i, j, size;
    };

    /// find_longest_match: the longest a[i:i+k] == b[j:j+k] within the bounds made of non-popular characters,
    /// earliest in a and then in b on ties, then extended on both sides by equal (popular) characters.
    Match find_longest_match(std::size_t alo, std::size_t ahi, std::size_t blo, std::size_t bhi) {
        std::size_t besti = alo, bestj = blo, bestsize = 0;
        // j2len[j + 1]: length of the match ending at a[i - 1] and b[j] (difflib's dict j2len, here an array that
        // is cleared after each row through the list of the entries set).
        std::vector<std::size_t> touched, new_touched;
        for (std::size_t i = alo; i < ahi; ++i) {
            new_touched.clear();
            const auto found = b2j_.find(a_[i]);
            if (found != b2j_.end()) {
                for (const int jj : found->second) {
                    const auto j = static_cast<std::size_t>(jj);
                    if (j < blo) continue;
                    if (j >= bhi) break;
                    const std::size_t k = j2len_[j] + 1;  // j2len.get(j - 1, 0) + 1
                    new_j2len_[j + 1] = k;
                    new_touched.push_back(j + 1);
                    if (k > bestsize) {
                        besti = i + 1 - k;
                        bestj = j + 1 - k;
                        bestsize = k;
                    }
                }
            }
            for (const std::size_t t : touched) j2len_[t] = 0;
            std::swap(j2len_, new_j2len_);
            std::swap(touched, new_touched);
        }
        for (const std::size_t t : touched) j2len_[t] = 0;
        // Popular characters are not in b2j, so the best match cannot contain them: extend it by equal characters
        // on each side. (The second pair of loops in difflib, over junk, never runs: there is no junk.)
        while (besti > alo && bestj > blo && a_[besti - 1] == b_[bestj - 1]) {
            --besti;
            --bestj;
            ++bestsize;
        }
        while (besti + bestsize < ahi && bestj + bestsize < bhi && a_[besti + bestsize] == b_[bestj + bestsize])
            ++bestsize;
        return {besti, bestj, bestsize};
    }

    std::u32string_view a_, b_;
    std::unordered_map<char32_t, std::vector<int>> b2j_;
    std::vector<std::size_t> j2len_, new_j2len_;
};

// ---------------------------------------------------------------------------------------------------------------
// The names

/// One row of eval.py's dataset2metric.
struct DatasetRow {
    std::string_view name;
    std::optional<LongBenchMetric> metric;  ///< none for a Chinese dataset
    bool first_line_only;                   ///< in eval.py's ["trec", "triviaqa", "samsum", "lsht"]
    bool longbench_e;                       ///< in pred.py's LongBench-E list, loaded as "<name>_e"
    std::string_view chinese_metric = {};   ///< how LongBench scores a Chinese dataset, for the refusal
};

// The one table of LongBench's datasets, in eval.py's order. Columns: name, metric, first line only, in LongBench-E,
// and for the Chinese ones how LongBench scores them.
constexpr std::array<DatasetRow, 21> kDatasets{{
    {"narrativeqa", LongBenchMetric::QaF1, false, false},
    {"qasper", LongBenchMetric::QaF1, false, true},
    {"multifieldqa_en", LongBenchMetric::QaF1, false, true},
    {"multifieldqa_zh", std::nullopt, false, false, "qa_f1_zh_score, a token F1 over jieba's word segmentation"},
    {"hotpotqa", LongBenchMetric::QaF1, false, true},
    {"2wikimqa", LongBenchMetric::QaF1, false, true},
    {"musique", LongBenchMetric::QaF1, false, false},
    {"dureader", std::nullopt, false, false, "rouge_zh_score, ROUGE-L over jieba's word segmentation"},
    {"gov_report", LongBenchMetric::RougeL, false, true},
    {"qmsum", LongBenchMetric::RougeL, false, false},
    {"multi_news", LongBenchMetric::RougeL, false, true},
    {"vcsum", std::nullopt, false, false, "rouge_zh_score, ROUGE-L over jieba's word segmentation"},
    {"trec", LongBenchMetric::Classification, true, true},
    {"triviaqa", LongBenchMetric::QaF1, true, true},
    {"samsum", LongBenchMetric::RougeL, true, true},
    {"lsht", std::nullopt, true, false, "classification_score on Chinese labels"},
    {"passage_retrieval_en", LongBenchMetric::Retrieval, false, true},
    {"passage_count", LongBenchMetric::Count, false, true},
    {"passage_retrieval_zh", std::nullopt, false, false, "retrieval_zh_score, which looks for \"段落N\""},
    {"lcc", LongBenchMetric::CodeSim, false, true},
    {"repobench-p", LongBenchMetric::CodeSim, false, true},
}};

constexpr std::string_view kLongBenchESuffix = "_e";

/// pred.py's datasets whose prompt is given to an instruct model as is, without build_chat: few-shot and code
/// completion prompts that the model continues.
constexpr std::array<std::string_view, 6> kWithoutChatTemplate{"trec", "triviaqa", "samsum",
                                                               "lsht", "lcc",      "repobench-p"};

/// Every name the table knows, Chinese ones included (for "did you mean").
std::vector<std::string> all_dataset_names() {
    std::vector<std::string> names;
    for (const DatasetRow& row : kDatasets) names.emplace_back(row.name);
    for (const DatasetRow& row : kDatasets)
        if (row.longbench_e) names.push_back(std::string(row.name) + std::string(kLongBenchESuffix));
    return names;
}

}  // namespace
const std::vector<std::string>& longbench_dataset_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> english;
        for (const DatasetRow& row : kDatasets)
            if (row.metric) english.emplace_back(row.name);
        for (const DatasetRow& row : kDatasets)
            if (row.metric && row.longbench_e)
                english.push_back(std::string(row.name) + std::string(kLongBenchESuffix));
        return english;
    }();
    return names;
}

LongBenchDataset parse_longbench_dataset(std::string_view name, std::string_view option) {
    for (const bool e : {false, true}) {
        if (e && !name.ends_with(kLongBenchESuffix)) continue;
        const std::string_view base = e ? name.substr(0, name.size() - kLongBenchESuffix.size()) : name;
        for (const DatasetRow& row : kDatasets) {
            if (row.name != base || (e && !row.longbench_e)) continue;
            KASCADE_CHECK(row.metric.has_value(),
                          "invalid {}='{}': a Chinese LongBench dataset, and no Chinese metric is implemented "
                          "(LongBench scores it with {}); the English datasets are {}",
                          option, name, row.chinese_metric, fmt::join(longbench_dataset_names(), ", "));
            const bool chat = std::find(kWithoutChatTemplate.begin(), kWithoutChatTemplate.end(), row.name) ==
                              kWithoutChatTemplate.end();
            return {row.name, e, *row.metric, row.first_line_only, chat};
        }
    }
    const std::string suggestion = closest_match(name, all_dataset_names());
    KASCADE_FAIL("invalid {}='{}' (expected a LongBench dataset: {}){}", option, name,
                 fmt::join(longbench_dataset_names(), ", "),
                 suggestion.empty() ? "" : fmt::format("; did you mean {}?", suggestion));
}

std::string longbench_normalize_answer(std::string_view text) {
    // white_space_fix(remove_articles(remove_punc(lower(s))))
    const std::u32string lower = python_lower(decode_utf8(text));
    constexpr std::u32string_view kPunctuation = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // string.punctuation
    std::u32string no_punc;
    no_punc.reserve(lower.size());
    for (const char32_t c : lower)
        if (kPunctuation.find(c) == std::u32string_view::npos) no_punc.push_back(c);
    // re.sub(r"\b(a|an|the)\b", " ", text): a match is a whole run of word characters equal to a, an or the.
    std::u32string no_articles;
    no_articles.reserve(no_punc.size());
    std::size_t i = 0;
    while (i < no_punc.size()) {
        if (!is_word_char(no_punc[i])) {
            no_articles.push_back(no_punc[i++]);
            continue;
        }
        const std::size_t begin = i;
        while (i < no_punc.size() && is_word_char(no_punc[i])) ++i;
        const std::u32string_view word = std::u32string_view(no_punc).substr(begin, i - begin);
        if (word == U"a" || word == U"an" || word == U"the") {
            no_articles.push_back(U' ');
        } else {
            no_articles.append(word);
        }
    }
    return encode_utf8(collapse_whitespace(no_articles));
}

double longbench_qa_f1(std::string_view prediction, std::string_view ground_truth) {
    const std::u32string pred_text = decode_utf8(longbench_normalize_answer(prediction));
    const std::u32string truth_text = decode_utf8(longbench_normalize_answer(ground_truth));
    const std::vector<std::u32string_view> pred = python_split(pred_text);
    const std::vector<std::u32string_view> truth = python_split(truth_text);
    // f1_score: sum((Counter(prediction) & Counter(ground_truth)).values())
    std::unordered_map<std::u32string_view, long> truth_counts;
    for (const std::u32string_view t : truth) ++truth_counts[t];
    long num_same = 0;
    for (const std::u32string_view t : pred) {
        const auto it = truth_counts.find(t);
        if (it != truth_counts.end() && it->second > 0) {
            --it->second;
            ++num_same;
        }
    }
    if (num_same == 0) return 0;
    const double precision = 1.0 * static_cast<double>(num_same) / static_cast<double>(pred.size());
    const double recall = 1.0 * static_cast<double>(num_same) / static_cast<double>(truth.size());
    return (2 * precision * recall) / (precision + recall);
}

double longbench_rouge_l_f(std::string_view prediction, std::string_view ground_truth) {
    const std::vector<std::u32string> hyp = rouge_sentences(decode_utf8(prediction));
    const std::vector<std::u32string> ref = rouge_sentences(decode_utf8(ground_truth));
    // rouge_n and rouge_l_summary_level raise ValueError on an empty collection; rouge_score's `except` gives 0.
    if (hyp.empty() || ref.empty()) return 0.0;
    WordIds ids;
    const std::vector<std::vector<int>> hyp_words = rouge_words(hyp, ids);
    const std::vector<std::vector<int>> ref_words = rouge_words(ref, ids);
    const std::size_t m = distinct_words(ref_words);  // len(Ngrams(words, exclusive=True)): a set
    const std::size_t n = distinct_words(hyp_words);
    // The sum over reference sentences of what each adds to the union of LCS words is the union's final size.
    std::unordered_set<int> lcs_union;
    for (const std::vector<int>& r : ref_words)
        for (const std::vector<int>& h : hyp_words) add_recon_lcs(r, h, lcs_union);
    const auto llcs = static_cast<double>(lcs_union.size());
    const double r_lcs = llcs / static_cast<double>(m);
    const double p_lcs = llcs / static_cast<double>(n);
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
}

double longbench_classification_score(std::string_view prediction, std::string_view ground_truth,
                                      const std::vector<std::string>& all_classes) {
    KASCADE_CHECK(!all_classes.empty(),
                  "classification_score needs the sample's all_classes (the labels the prediction may name), and "
                  "it is empty (expected the dataset's list of classes, as LongBench's trec has)");
    std::vector<std::string_view> matches;
    for (const std::string& name : all_classes)
        if (prediction.find(name) != std::string_view::npos) matches.push_back(name);
    // `for match_term in em_match_list: ... em_match_list.remove(match_term)`: Python's list iterator walks an
    // index over the list as it shrinks, so the entry after a removed one is never looked at. Reproduced, since
    // LongBench's published numbers include it.
    for (std::size_t i = 0; i < matches.size(); ++i) {
        const std::string_view term = matches[i];
        if (ground_truth.find(term) != std::string_view::npos && term != ground_truth)
            matches.erase(std::find(matches.begin(), matches.end(), term));  // list.remove: the first equal entry
    }
    if (std::find(matches.begin(), matches.end(), ground_truth) == matches.end()) return 0.0;
    return 1.0 / static_cast<double>(matches.size());
}

namespace {

/// The share of the digit runs of `prediction` equal to `number` (retrieval_score's and count_score's loop).
double share_equal(std::string_view prediction, std::u32string_view number) {
    const std::u32string text = decode_utf8(prediction);
    const std::vector<std::u32string_view> numbers = digit_runs(text);
    const auto right = std::count(numbers.begin(), numbers.end(), number);
    return numbers.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(numbers.size());
}

}  // namespace

double longbench_retrieval_score(std::string_view prediction, std::string_view ground_truth) {
    // re.findall(r'Paragraph (\d+)', ground_truth)[0]
    const std::u32string truth = decode_utf8(ground_truth);
    constexpr std::u32string_view kParagraph = U"Paragraph ";
    for (std::size_t at = truth.find(kParagraph); at != std::u32string::npos; at = truth.find(kParagraph, at + 1)) {
        const std::size_t begin = at + kParagraph.size();
        std::size_t end = begin;
        while (end < truth.size() && is_decimal(truth[end])) ++end;
        if (end > begin) return share_equal(prediction, std::u32string_view(truth).substr(begin, end - begin));
    }
    KASCADE_FAIL(
        "retrieval_score: the ground truth '{}' names no paragraph (expected 'Paragraph N', as in "
        "passage_retrieval_en's answers)",
        ground_truth);
}

double longbench_count_score(std::string_view prediction, std::string_view ground_truth) {
    return share_equal(prediction, decode_utf8(ground_truth));
}

int longbench_fuzz_ratio(std::string_view a, std::string_view b) {
    // The decorators of fuzz.ratio, in their order: check_for_equivalence, then check_empty_string.
    if (a == b) return 100;
    if (a.empty() || b.empty()) return 0;
    const std::u32string ua = decode_utf8(a), ub = decode_utf8(b);
    const std::size_t matches = SequenceMatcher(ua, ub).matching_characters();
    // _calculate_ratio: 2.0 * matches / length; then utils.intr(100 * ratio) = int(round(...)).
    const double ratio = 2.0 * static_cast<double>(matches) / static_cast<double>(ua.size() + ub.size());
    return static_cast<int>(round_half_even(100 * ratio));
}

double longbench_code_sim_score(std::string_view prediction, std::string_view ground_truth) {
    std::string_view line;
    for (const std::string_view l : lines_after_leading_newlines(prediction)) {
        if (l.find('`') == std::string_view::npos && l.find('#') == std::string_view::npos &&
            l.find("//") == std::string_view::npos) {
            line = l;
            break;
        }
    }
    return static_cast<double>(longbench_fuzz_ratio(line, ground_truth)) / 100;
}

double longbench_exact_match(std::string_view prediction, std::string_view ground_truth) {
    return longbench_normalize_answer(prediction) == longbench_normalize_answer(ground_truth) ? 1.0 : 0.0;
}

double longbench_metric_score(LongBenchMetric metric, std::string_view prediction, std::string_view ground_truth,
                              const std::vector<std::string>& all_classes) {
    switch (metric) {
        case LongBenchMetric::QaF1:
            return longbench_qa_f1(prediction, ground_truth);
        case LongBenchMetric::RougeL:
            return longbench_rouge_l_f(prediction, ground_truth);
        case LongBenchMetric::Classification:
            return longbench_classification_score(prediction, ground_truth, all_classes);
        case LongBenchMetric::Retrieval:
            return longbench_retrieval_score(prediction, ground_truth);
        case LongBenchMetric::Count:
            return longbench_count_score(prediction, ground_truth);
        case LongBenchMetric::CodeSim:
            return longbench_code_sim_score(prediction, ground_truth);
        case LongBenchMetric::ExactMatch:
            return longbench_exact_match(prediction, ground_truth);
    }
    KASCADE_ASSERT(false && "unknown LongBench metric");
    return 0;
}

double longbench_sample_score(const LongBenchDataset& dataset, std::string_view prediction,
                              const std::vector<std::string>& answers, const std::vector<std::string>& all_classes) {
    if (dataset.first_line_only) prediction = lines_after_leading_newlines(prediction).front();
    double score = 0.;
    for (const std::string& truth : answers)
        score = std::max(score, longbench_metric_score(dataset.metric, prediction, truth, all_classes));
    return score;
}

}  // namespace kascade
