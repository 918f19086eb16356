// pipeline/tasks/longbench_metrics.h: LongBench's English metrics, reproducing to the value what THUDM/LongBench's
// LongBench/metrics.py and LongBench/eval.py (commit 2e00731; metrics.py last changed in ad1ea89, 2023-11-24)
// compute, with the packages its requirements.txt installs: rouge 1.0.1 (pltrdy/rouge) and fuzzywuzzy 0.18.0 without
// python-Levenshtein. A score differs from LongBench's only where a comment below says so.
//
// Text is UTF-8 and is read as Python reads a str: as code points, so that lengths (fuzz.ratio), lower-casing,
// whitespace and the word and digit classes of Python's `re` are those of Python 3 on non-ASCII text too:
//  - lower-casing is str.lower(): Unicode lower case (utf8proc's simple mapping), U+0130 to "i" + U+0307, and a
//    capital sigma to a final sigma at the end of a word. Python decides "end of a word" with the Unicode properties
//    Cased and Case_Ignorable; they are approximated here from general categories (Lu/Ll/Lt, and Mn/Me/Cf/Lm/Sk
//    with the apostrophes, periods and colons of Word_Break), which differs only for rare symbols (circled
//    letters, modifier letters) next to a capital sigma;
//  - punctuation is Python's string.punctuation, the 32 ASCII marks; other bytes are left alone (curly quotes stay);
//  - whitespace is str.split()'s, which includes U+00A0, U+2000..U+200A, U+3000 and the other Unicode spaces;
//  - `\b`, `\w` and `\d` are Unicode-aware, as in Python 3: "éthe" is one word, and "٣" (Arabic-Indic three) is a
//    digit, so "3٣" is one number, not "3".
// The tables are utf8proc's (Unicode 13 for utf8proc 2.6) where Python 3.11 uses Unicode 14: letters added in 14
// are not letters here. Bytes that are not valid UTF-8 become one code point each, as Python's surrogateescape makes
// them. LongBench never sees such bytes (its pred.py decodes generations with U+FFFD replacement), so a caller
// wanting its exact scores replaces invalid sequences before scoring.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"

namespace kascade {

/// The scorers of eval.py's dataset2metric that kascade implements (the English ones), named as in metrics.py.
enum class LongBenchMetric {
    QaF1,            ///< qa_f1_score: token F1 of the normalised answers
    RougeL,          ///< rouge_score: rouge-l F of Rouge().get_scores(..., avg=True)
    Classification,  ///< classification_score: 1/len(matches) if the true class is among the classes named
    Retrieval,       ///< retrieval_score: share of the numbers in the prediction equal to "Paragraph N"'s N
    Count,           ///< count_score: share of the numbers in the prediction equal to the answer
    CodeSim,         ///< code_sim_score: fuzz.ratio / 100 of the first code line and the answer
    ExactMatch,      ///< exact_match: 1 if the normalised answers are equal (not one of eval.py's: for the user's
                     ///< own datasets, as SQuAD's exact match)
};
template <>
struct EnumNameTable<LongBenchMetric> {
    static constexpr EnumNames<LongBenchMetric, 7> names{{{LongBenchMetric::QaF1, "qa_f1_score"},
                                                          {LongBenchMetric::RougeL, "rouge_score"},
                                                          {LongBenchMetric::Classification, "classification_score"},
                                                          {LongBenchMetric::Retrieval, "retrieval_score"},
                                                          {LongBenchMetric::Count, "count_score"},
                                                          {LongBenchMetric::CodeSim, "code_sim_score"},
                                                          {LongBenchMetric::ExactMatch, "exact_match"}}};
};

/// How eval.py scores one LongBench dataset.
struct LongBenchDataset {
    std::string_view name;  ///< LongBench's name, without LongBench-E's "_e"
    bool longbench_e;       ///< named "<name>_e": the LongBench-E test set, scored by the same rule
    LongBenchMetric metric;
    bool first_line_only;  ///< eval.py scores only the prediction's first line (trec, triviaqa, samsum, lsht)
    bool chat_template;    ///< pred.py puts the prompt through an instruct model's chat template (all but its few-shot
                           ///< and code-completion datasets: trec, triviaqa, samsum, lsht, lcc, repobench-p)
};

/// The English datasets of LongBench and LongBench-E ("qasper", "qasper_e", ...), as parse_longbench_dataset takes.
const std::vector<std::string>& longbench_dataset_names();
/// Dataset name -> its scoring rule. A Chinese dataset (multifieldqa_zh, dureader, vcsum, lsht,
/// passage_retrieval_zh) is an error saying that no Chinese metric is implemented (LongBench segments Chinese words
/// with jieba); any other unknown name is an error listing the known ones with the closest one.
LongBenchDataset parse_longbench_dataset(std::string_view name, std::string_view option);

/// metrics.py's normalize_answer: lower-case, drop string.punctuation, replace the words a, an and the by a space,
/// collapse whitespace runs to one space (and trim).
std::string longbench_normalize_answer(std::string_view text);

/// qa_f1_score: F1 of the whitespace tokens of the two normalised answers, shared tokens counted as a multiset
/// intersection; 0 when none is shared (and when either side has no token).
double longbench_qa_f1(std::string_view prediction, std::string_view ground_truth);

/// rouge_score: Rouge().get_scores([prediction], [ground_truth], avg=True)["rouge-l"]["f"] of rouge 1.0.1, which is
/// not textbook ROUGE-L. Each text is split into sentences at every '.', empty pieces dropped, each sentence's
/// whitespace collapsed to single spaces and its words split at ' ' (so a blank sentence is the one word "").
/// With exclusive=True (the default) words are counted as sets: m and n are the numbers of *distinct* words of the
/// reference and of the prediction, and the overlap is the number of distinct words in the union, over every pair
/// (reference sentence, predicted sentence), of the one LCS that _recon_lcs backtracks (on a tie it steps back in
/// the prediction, so which LCS is found matters). R = overlap/m, P = overlap/n and F = 2*P*R / (P + R + 1e-8):
/// F1 with an epsilon, no beta. A text with no sentence makes rouge raise, which LongBench scores 0.
/// Not reproduced: rouge's recursive _recon overflows Python's recursion limit (1000 frames) when a reference
/// sentence and a predicted sentence together have about 1000 words with no '.', and LongBench's bare `except`
/// then scores 0; the value computed here is the one rouge would give without that limit. LongBench's generation
/// limits (at most 512 tokens for its summaries) keep predictions far below that.
double longbench_rouge_l_f(std::string_view prediction, std::string_view ground_truth);

/// classification_score: the classes of `all_classes` that are substrings of the prediction, less those that are a
/// proper substring of the ground truth; 1/len(remaining) if the ground truth remains, else 0. Reproduces
/// metrics.py's removal *while iterating* over the list, which skips the entry after each removed one (matches
/// [a, b, abc] with truth "abc" keep b: 0.5). Throws if all_classes is empty (a dataset without classes).
double longbench_classification_score(std::string_view prediction, std::string_view ground_truth,
                                      const std::vector<std::string>& all_classes);

/// retrieval_score: N of the first "Paragraph N" in the ground truth (an error if there is none; LongBench raises
/// IndexError); the share of the digit runs of the prediction equal to N as strings ("012" is not "12"); 0 if the
/// prediction has no digits.
double longbench_retrieval_score(std::string_view prediction, std::string_view ground_truth);

/// count_score: the share of the digit runs of the prediction equal to the ground truth; 0 if it has none.
double longbench_count_score(std::string_view prediction, std::string_view ground_truth);

/// exact_match: 1 if normalize_answer gives the same text for both, else 0.
double longbench_exact_match(std::string_view prediction, std::string_view ground_truth);

/// fuzzywuzzy 0.18.0's fuzz.ratio with difflib's SequenceMatcher (LongBench's requirements.txt installs fuzzywuzzy
/// without python-Levenshtein, so fuzz.py falls back to difflib): 100 if the strings are equal (both empty too),
/// else 0 if either is empty, else round(100 * 2M / (len(a) + len(b))) with Python's round-half-to-even, where M is
/// the size of difflib's matching blocks (longest common substring first, then recursively on each side; with
/// autojunk, characters more frequent than 1% + 1 of a `b` of 200 or more characters are not matched first).
/// Lengths count code points. (python-Levenshtein would instead give 2*LCS / (len(a) + len(b)); LongBench issue
/// #96 asks which one its published numbers used and is unanswered.)
int longbench_fuzz_ratio(std::string_view a, std::string_view b);

/// code_sim_score: the first line of the prediction (after leading newlines) containing none of '`', '#' and "//"
/// ("" if none does), scored fuzz.ratio(line, ground_truth) / 100.
double longbench_code_sim_score(std::string_view prediction, std::string_view ground_truth);

/// One metric of one (prediction, ground truth) pair; all_classes is read by Classification only.
double longbench_metric_score(LongBenchMetric metric, std::string_view prediction, std::string_view ground_truth,
                              const std::vector<std::string>& all_classes);

/// eval.py's per-sample score: the prediction cut to its first line (after stripping leading newlines) for the
/// first-line datasets, then the maximum over the answers of the dataset's metric (0 when there is no answer).
double longbench_sample_score(const LongBenchDataset& dataset, std::string_view prediction,
                              const std::vector<std::string>& answers, const std::vector<std::string>& all_classes);

}  // namespace kascade
