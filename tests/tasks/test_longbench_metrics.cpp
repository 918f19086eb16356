// tests/tasks/test_longbench_metrics.cpp: LongBench's English metrics against values derived by hand from
// LongBench's metrics.py / eval.py, rouge 1.0.1 and fuzzywuzzy 0.18.0 with difflib (each derivation in a comment
// beside its check); the dataset table against eval.py's dataset2metric; the refusals; and, where python3 is on
// PATH, thousands of generated cases against an independent Python reading (longbench_reference.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "common/error_of.h"
#include "common/temp_dir.h"
#include "io/file_util.h"
#include "pipeline/tasks/longbench_metrics.h"

using namespace kascade;

namespace {

using test::error_of;

double sample(std::string_view dataset, std::string_view prediction, const std::vector<std::string>& answers,
              const std::vector<std::string>& all_classes = {}) {
    return longbench_sample_score(parse_longbench_dataset(dataset, "--dataset"), prediction, answers, all_classes);
}

/// "y" followed by n 'x' (built in place: GCC 12 warns falsely, -Warray-bounds, about "y" + std::string(n, 'x')).
std::string y_then_x(std::size_t n) {
    std::string s(n + 1, 'x');
    s[0] = 'y';
    return s;
}

// ROUGE-L's F = 2PR / (P + R + 1e-8) for P = R = 1: 2 / (2 + 1e-8) = 1 / (1 + 5e-9) = 0.999999995 (to 1e-17).
constexpr double kRougeFull = 0.999999995;

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// normalize_answer

TEST(LongBenchNormalize, LowerCasesDropsPunctuationAndArticles) {
    // lower: "the cat, sat on a mat!"; punctuation: "the cat sat on a mat"; articles: "  cat sat on   mat".
    EXPECT_EQ(longbench_normalize_answer("The Cat, sat on A mat!"), "cat sat on mat");
    // Only whole words go: "ant" and "theme" contain an article but are other words.
    EXPECT_EQ(longbench_normalize_answer("an ant and the theme"), "ant and theme");
    // Punctuation goes before articles: "a. smith" -> "a smith" -> " smith".
    EXPECT_EQ(longbench_normalize_answer("A. Smith"), "smith");
    // Inner punctuation joins the parts: "don't" -> "dont", "u.s.a." -> "usa".
    EXPECT_EQ(longbench_normalize_answer("don't re-use U.S.A."), "dont reuse usa");
    // '_' is in string.punctuation, so "the_cat" becomes the one word "thecat", not an article.
    EXPECT_EQ(longbench_normalize_answer("the_cat"), "thecat");
    EXPECT_EQ(longbench_normalize_answer("The"), "");
}

TEST(LongBenchNormalize, CollapsesPythonWhitespace) {
    EXPECT_EQ(longbench_normalize_answer("  hello \t\n  world  "), "hello world");
    // str.split() also splits at U+00A0 (no-break space) and U+3000 (ideographic space).
    EXPECT_EQ(longbench_normalize_answer("hello\u00a0world\u3000again"), "hello world again");
}

TEST(LongBenchNormalize, NonAsciiAsPython) {
    // Python lower-cases non-ASCII letters: É -> é, Ü -> ü.
    EXPECT_EQ(longbench_normalize_answer("ÉCOLE Über"), "école über");
    // U+0130 (capital I with dot) lower-cases to two code points, i + U+0307.
    EXPECT_EQ(longbench_normalize_answer("\u0130"), "i\u0307");
    // A capital sigma at the end of a word becomes the final sigma U+03C2, elsewhere U+03C3.
    EXPECT_EQ(longbench_normalize_answer("ΟΔΟΣ ΣΑ"), "οδο\u03c2 \u03c3α");
    // Curly quotes, the en dash and the ellipsis are not string.punctuation: they stay.
    EXPECT_EQ(longbench_normalize_answer("“Quoted” – text…"), "“quoted” – text…");
    // \b is Unicode-aware: é is a word character, so "éthe" and "théa" are words; "the" alone is an article.
    EXPECT_EQ(longbench_normalize_answer("éthe the théa"), "éthe théa");
    // A byte that is not UTF-8 is kept as it is and is no word character (Python's surrogateescape reading), so
    // "the" after it is a whole word: "\xff" + " " -> "\xff".
    EXPECT_EQ(longbench_normalize_answer("\xffThe"), "\xff");
}

// ---------------------------------------------------------------------------------------------------------------
// qa_f1_score

TEST(LongBenchQaF1, TokenF1) {
    // [cat, sat] vs [cat, sat, down]: P = 2/2, R = 2/3, F1 = 2 * 1 * 2/3 / (5/3) = 0.8.
    EXPECT_DOUBLE_EQ(longbench_qa_f1("the cat sat", "a cat sat down"), 0.8);
    // [cat] vs [cat]: 1.
    EXPECT_DOUBLE_EQ(longbench_qa_f1("The Cat!", "cat"), 1.0);
    EXPECT_EQ(longbench_qa_f1("dog", "cat"), 0.0);
    // Both normalise to no token: nothing shared, 0 (not 1).
    EXPECT_EQ(longbench_qa_f1("the", "a"), 0.0);
}

TEST(LongBenchQaF1, RepeatedTokensCountAsMultiset) {
    // {cat: 3, dog: 1} & {cat: 2, bird: 1} = {cat: 2}: P = 2/4, R = 2/3, F1 = 2 * 1/2 * 2/3 / (7/6) = 4/7.
    EXPECT_DOUBLE_EQ(longbench_qa_f1("cat cat cat dog", "cat cat bird"), 4.0 / 7.0);
}

// ---------------------------------------------------------------------------------------------------------------
// rouge_score (rouge 1.0.1's rouge-l f)

TEST(LongBenchRougeL, OneSentenceCountsDistinctWords) {
    // Words [the cat sat on the mat] vs [the cat lay on the mat]: n = m = 5 distinct words. The LCS is
    // "the cat on the mat", whose distinct words {the, cat, on, mat} are 4: P = R = 4/5, and
    // F = 2 * (16/25) / (8/5 + 1e-8) = 1.28 / 1.60000001 = 0.799999995.
    EXPECT_NEAR(longbench_rouge_l_f("the cat sat on the mat", "the cat lay on the mat"), 0.799999995, 1e-12);
    // A repeated word counts once: n = m = 1, overlap {the}: P = R = 1 (textbook ROUGE-L would give P = 1/3).
    EXPECT_NEAR(longbench_rouge_l_f("the the the", "the"), kRougeFull, 1e-12);
}

TEST(LongBenchRougeL, UnionOverSentencePairs) {
    // Reference sentences [a b c], [d e]; predicted [a c e], [b d] (split at '.'). LCS words by pair:
    // [a b c]x[a c e] = {a, c}; [a b c]x[b d] = {b}; [d e]x[a c e] = {e}; [d e]x[b d] = {d}.
    // The union {a, b, c, d, e} has 5 words, m = n = 5: P = R = 1.
    EXPECT_NEAR(longbench_rouge_l_f("a c e. b d", "a b c. d e"), kRougeFull, 1e-12);
}

TEST(LongBenchRougeL, TieStepsBackInThePrediction) {
    // Reference sentences [a b] and [a]; prediction [b a]. [a b]x[b a] has two LCS of length 1; at (2, 2) the table
    // holds 1 both above and to the left, and rouge steps back in the prediction, reaching b == b: {b}.
    // [a]x[b a] = {a}. Union {a, b}: 2 words, m = n = 2, F = 0.999999995. (Stepping back in the reference instead
    // would find {a} twice: overlap 1, P = R = 1/2, F = 0.499999995.)
    EXPECT_NEAR(longbench_rouge_l_f("b a", "a b. a"), kRougeFull, 1e-12);
}

TEST(LongBenchRougeL, EmptyAndBlankSentences) {
    // No sentence on one side: rouge raises ValueError and LongBench scores 0.
    EXPECT_EQ(longbench_rouge_l_f("", "x"), 0.0);
    EXPECT_EQ(longbench_rouge_l_f("...", "x"), 0.0);
    EXPECT_EQ(longbench_rouge_l_f("x", ""), 0.0);
    // " . x" splits into " " and " x": the blank sentence is the word "", so n = |{"", x}| = 2, m = 1, overlap
    // {x}: R = 1, P = 1/2, F = 2 * (1/2) / (3/2 + 1e-8) = 1 / 1.50000001 = 0.66666666222...
    EXPECT_NEAR(longbench_rouge_l_f(" . x", "x"), 0.6666666622222222, 1e-13);
    // A no-break space separates words like a space: "cat sat" on both sides, F = 0.999999995.
    EXPECT_NEAR(longbench_rouge_l_f("cat\u00a0sat", "cat sat"), kRougeFull, 1e-12);
}

// ---------------------------------------------------------------------------------------------------------------
// classification_score

TEST(LongBenchClassification, SubstringOfTheTruthIsDropped) {
    const std::vector<std::string> classes{"Human", "Human being", "Animal"};
    // Named: [Human, Human being]; "Human" is a proper substring of the truth, dropped: [Human being] -> 1/1.
    EXPECT_EQ(longbench_classification_score("Type: Human being", "Human being", classes), 1.0);
    // Truth "Human": "Human" equals it (kept), "Human being" is not in it (kept): 1/2.
    EXPECT_EQ(longbench_classification_score("Human being", "Human", classes), 0.5);
    // The truth is not named: 0.
    EXPECT_EQ(longbench_classification_score("Animal", "Human", classes), 0.0);
}

TEST(LongBenchClassification, RemovalWhileIteratingSkipsTheNextEntry) {
    // Named [a, b, abc], truth "abc". Index 0: "a" is dropped, the list becomes [b, abc]; index 1 is "abc" (kept):
    // "b" was never looked at and stays. [b, abc] -> 1/2, where the intended rule would give 1.
    EXPECT_EQ(longbench_classification_score("abc", "abc", {"a", "b", "abc"}), 0.5);
}

TEST(LongBenchClassification, RefusesNoClasses) {
    EXPECT_NE(error_of([] { longbench_classification_score("x", "x", {}); }).find("all_classes"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// retrieval_score and count_score

TEST(LongBenchRetrieval, ShareOfNumbersEqualToTheParagraph) {
    // Numbers [12, 3, 12], two equal to 12: 2/3.
    EXPECT_DOUBLE_EQ(longbench_retrieval_score("Paragraph 12 and Paragraph 3, maybe 12", "Paragraph 12"), 2.0 / 3.0);
    // Compared as strings: "012" is not "12".
    EXPECT_EQ(longbench_retrieval_score("Paragraph 012", "Paragraph 12"), 0.0);
    EXPECT_EQ(longbench_retrieval_score("none", "Paragraph 12"), 0.0);
    // The first "Paragraph <digits>" of the truth: "Paragraph x" is skipped, N = 7.
    EXPECT_EQ(longbench_retrieval_score("7", "See Paragraph x, then Paragraph 7"), 1.0);
}

TEST(LongBenchRetrieval, RefusesATruthWithoutParagraph) {
    EXPECT_NE(error_of([] { longbench_retrieval_score("7", "paragraph 7"); }).find("Paragraph N"), std::string::npos);
    EXPECT_NE(error_of([] { longbench_retrieval_score("7", "Paragraph"); }).find("'Paragraph'"), std::string::npos);
}

TEST(LongBenchCount, ShareOfNumbersEqualToTheCount) {
    // Numbers [3, 30, 3]: 2/3.
    EXPECT_DOUBLE_EQ(longbench_count_score("There are 3 unique paragraphs among 30, I think 3", "3"), 2.0 / 3.0);
    // Numbers [3, 5]: 1/2.
    EXPECT_EQ(longbench_count_score("3.5", "3"), 0.5);
    EXPECT_EQ(longbench_count_score("none", "3"), 0.0);
    // \d is Unicode: "3٣" (with an Arabic-Indic three) is one number, not "3": 0/1. "3 ٣" is [3, ٣]: 1/2.
    EXPECT_EQ(longbench_count_score("3\u0663", "3"), 0.0);
    EXPECT_EQ(longbench_count_score("3 \u0663", "3"), 0.5);
}

// ---------------------------------------------------------------------------------------------------------------
// fuzz.ratio and code_sim_score

TEST(LongBenchFuzzRatio, DifflibRatioRoundedHalfToEven) {
    // Only 'a' is shared: M = 1, 100 * 2/16 = 12.5, rounded to the even 12.
    EXPECT_EQ(longbench_fuzz_ratio("abcdefgh", "aijklmno"), 12);
    // Block "abc": M = 3, 100 * 6/16 = 37.5, rounded to the even 38.
    EXPECT_EQ(longbench_fuzz_ratio("abcdefgh", "abcijklm"), 38);
    // difflib takes the longest block "abc" (a[4:7], b[0:3]) first; nothing is left before or after it, so M = 3:
    // 100 * 6/17 = 35.29 -> 35. (The LCS "1234" has 4: python-Levenshtein's 2*4/17 would give 47.)
    EXPECT_EQ(longbench_fuzz_ratio("1234abc", "abc1x2x3x4"), 35);
    // Lengths are code points: "aé" vs "ae" share 'a', 100 * 2/4 = 50 (in bytes it would be 2/5 -> 40).
    EXPECT_EQ(longbench_fuzz_ratio("a\u00e9", "ae"), 50);
    // Equal strings are 100, even empty ones; otherwise an empty one is 0.
    EXPECT_EQ(longbench_fuzz_ratio("", ""), 100);
    EXPECT_EQ(longbench_fuzz_ratio("", "x"), 0);
}

TEST(LongBenchFuzzRatio, AutojunkFromTwoHundredCharacters) {
    // b = "y" + 198 x (199 characters, no autojunk): the block "xx" is found, M = 2: 100 * 4/201 = 1.99 -> 2.
    EXPECT_EQ(longbench_fuzz_ratio("xx", y_then_x(198)), 2);
    // b = "y" + 199 x (200 characters): 'x' occurs 199 > 200 // 100 + 1 = 3 times, so it is "popular" and never
    // starts a match; a has nothing else: M = 0 -> 0.
    EXPECT_EQ(longbench_fuzz_ratio("xx", y_then_x(199)), 0);
}

TEST(LongBenchCodeSim, FirstCodeLine) {
    // Leading newlines stripped; "```python" and "# comment" skipped; the line is "x = foo(1)  " (12 characters)
    // against "x = foo(1)" (10): M = 10, 100 * 20/22 = 90.9 -> 91 -> 0.91.
    EXPECT_DOUBLE_EQ(longbench_code_sim_score("\n\n```python\n# comment\nx = foo(1)  \nreturn x", "x = foo(1)"), 0.91);
    // A line with "//" is skipped even when it is Python's floor division: the line is "z = 1", equal: 1.0.
    EXPECT_EQ(longbench_code_sim_score("y = a // b\nz = 1", "z = 1"), 1.0);
    // Lines end at '\n' only: "x = 1\r" (6) vs "x = 1" (5): 100 * 10/11 = 90.9 -> 0.91.
    EXPECT_DOUBLE_EQ(longbench_code_sim_score("x = 1\r\ny = 2", "x = 1"), 0.91);
    // No acceptable line: the line is "", equal to an empty truth (1.0), else 0.
    EXPECT_EQ(longbench_code_sim_score("# only a comment", ""), 1.0);
    EXPECT_EQ(longbench_code_sim_score("# only a comment", "x"), 0.0);
}

// ---------------------------------------------------------------------------------------------------------------
// eval.py's per-sample rule and the dataset table

TEST(LongBenchSample, FirstLineRule) {
    const std::string prediction = "\n\nParis\nThe capital of France is Paris";
    // triviaqa scores the first line after the leading newlines, "Paris": F1 1.
    EXPECT_EQ(sample("triviaqa", prediction, {"Paris"}), 1.0);
    EXPECT_EQ(sample("triviaqa_e", prediction, {"Paris"}), 1.0);
    // narrativeqa scores it all: [paris capital of france is paris] vs [paris], one shared:
    // P = 1/6, R = 1, F1 = 2 * 1/6 / (7/6) = 2/7.
    EXPECT_DOUBLE_EQ(sample("narrativeqa", prediction, {"Paris"}), 2.0 / 7.0);
    // trec: the first line "Human being" names [Human, Human being] -> [Human being] -> 1. The whole text would
    // name Animal too: [Human being, Animal] -> 1/2.
    const std::vector<std::string> classes{"Human", "Human being", "Animal"};
    EXPECT_EQ(sample("trec", "Human being\nAnimal", {"Human being"}, classes), 1.0);
    EXPECT_EQ(longbench_classification_score("Human being\nAnimal", "Human being", classes), 0.5);
}

TEST(LongBenchSample, MaxOverAnswers) {
    // "cat sat" vs "dog": 0; vs "the cat sat down": P = 1, R = 2/3, F1 = 0.8; vs "cat": P = 1/2, R = 1, 2/3.
    EXPECT_DOUBLE_EQ(sample("hotpotqa", "cat sat", {"dog", "the cat sat down", "cat"}), 0.8);
    EXPECT_EQ(sample("hotpotqa", "cat sat", {}), 0.0);
}

TEST(LongBenchDatasets, TableIsEvalPysDataset2Metric) {
    // eval.py's dataset2metric (English rows) and its first-line list ["trec", "triviaqa", "samsum", "lsht"].
    const std::vector<std::tuple<std::string, std::string, bool>> expected{
        {"narrativeqa", "qa_f1_score", false},
        {"qasper", "qa_f1_score", false},
        {"multifieldqa_en", "qa_f1_score", false},
        {"hotpotqa", "qa_f1_score", false},
        {"2wikimqa", "qa_f1_score", false},
        {"musique", "qa_f1_score", false},
        {"gov_report", "rouge_score", false},
        {"qmsum", "rouge_score", false},
        {"multi_news", "rouge_score", false},
        {"trec", "classification_score", true},
        {"triviaqa", "qa_f1_score", true},
        {"samsum", "rouge_score", true},
        {"passage_retrieval_en", "retrieval_score", false},
        {"passage_count", "count_score", false},
        {"lcc", "code_sim_score", false},
        {"repobench-p", "code_sim_score", false},
    };
    for (const auto& [name, metric, first_line] : expected) {
        const LongBenchDataset d = parse_longbench_dataset(name, "--dataset");
        EXPECT_EQ(d.name, name);
        EXPECT_FALSE(d.longbench_e) << name;
        EXPECT_EQ(mode_name(d.metric), metric) << name;
        EXPECT_EQ(d.first_line_only, first_line) << name;
        // pred.py: `if dataset not in ["trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"]: build_chat`.
        const bool raw =
            name == "trec" || name == "triviaqa" || name == "samsum" || name == "lcc" || name == "repobench-p";
        EXPECT_EQ(d.chat_template, !raw) << name;
    }
    // pred.py's LongBench-E list: 13 datasets, loaded as "<name>_e", scored as the base dataset.
    const std::vector<std::string> e{
        "qasper",     "multifieldqa_en", "hotpotqa", "2wikimqa",      "gov_report",           "multi_news",
        "trec",       "triviaqa",        "samsum",   "passage_count", "passage_retrieval_en", "lcc",
        "repobench-p"};
    for (const std::string& name : e) {
        const LongBenchDataset d = parse_longbench_dataset(name + "_e", "--dataset");
        EXPECT_EQ(d.name, name);
        EXPECT_TRUE(d.longbench_e);
        EXPECT_EQ(d.metric, parse_longbench_dataset(name, "--dataset").metric);
    }
    EXPECT_EQ(longbench_dataset_names().size(), expected.size() + e.size());
}

TEST(LongBenchDatasets, RefusesChineseAndUnknown) {
    for (const std::string name : {"multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh"}) {
        const std::string message = error_of([&] { parse_longbench_dataset(name, "--dataset"); });
        EXPECT_NE(message.find("'" + name + "'"), std::string::npos) << message;
        EXPECT_NE(message.find("no Chinese metric is implemented"), std::string::npos) << message;
    }
    const std::string typo = error_of([] { parse_longbench_dataset("hotpotq", "--dataset"); });
    EXPECT_NE(typo.find("invalid --dataset='hotpotq'"), std::string::npos) << typo;
    EXPECT_NE(typo.find("narrativeqa, qasper"), std::string::npos) << typo;
    EXPECT_NE(typo.find("did you mean hotpotqa?"), std::string::npos) << typo;
    // qmsum is not in LongBench-E.
    const std::string not_e = error_of([] { parse_longbench_dataset("qmsum_e", "--dataset"); });
    EXPECT_NE(not_e.find("did you mean qmsum?"), std::string::npos) << not_e;
}

TEST(LongBenchMetrics, ExactMatchComparesNormalisedAnswers) {
    // normalize_answer drops case, string.punctuation and the articles, and collapses spaces.
    EXPECT_EQ(longbench_exact_match("The Eiffel  Tower!", "eiffel tower"), 1.0);
    EXPECT_EQ(longbench_exact_match("An apple", "apple."), 1.0);
    EXPECT_EQ(longbench_exact_match("Eiffel Tower, Paris", "Eiffel Tower"), 0.0);
    EXPECT_EQ(longbench_exact_match("", ""), 1.0);
    const LongBenchDataset d{"own", false, LongBenchMetric::ExactMatch, false, true};
    EXPECT_EQ(longbench_sample_score(d, "Paris", {"London", "paris"}, {}), 1.0);  // best over the answers
}

TEST(LongBenchDatasets, MetricNames) {
    for (const std::string& name : mode_names<LongBenchMetric>())
        EXPECT_EQ(mode_name(parse_mode<LongBenchMetric>(name, "--metric")), name);
    EXPECT_NE(error_of([] { parse_mode<LongBenchMetric>("bleu", "--metric"); }).find("qa_f1_score"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// Generated cases against the Python reading

namespace {

/// Random text from pieces that reach every rule: articles in all cases, ASCII and other punctuation, periods,
/// Unicode spaces and digits, capital sigma and dotted I, code markers, paragraph names.
std::string random_text(std::mt19937& rng, int max_pieces) {
    static const std::vector<std::string> pieces{
        "The",        "the",          "a",     "An", "an",     "cat",  "Cat",      "sat",
        "mat",        "dog",          ".",     ",",  "!",      "'",    "_",        "-",
        "\u00c9cole", "\u00e9",       "ΟΔΟΣ",  "Σ",  "\u0130", "éthe", "“q”",      "\u00a0",
        "\u3000",     "\t",           "\n",    " ",  "3",      "12",   "\u0663",   "3\u0663",
        "Paragraph",  "Paragraph 12", "x = 1", "#",  "//",     "`",    "return x", "..."};
    std::uniform_int_distribution<int> count(0, max_pieces), pick(0, static_cast<int>(pieces.size()) - 1), coin(0, 1);
    std::string text;
    const int n = count(rng);
    for (int i = 0; i < n; ++i) {
        if (!text.empty() && coin(rng)) text += ' ';
        text += pieces[pick(rng)];
    }
    return text;
}

/// Up to 12 of the words a, b, c, d and '.' (a sentence end), spaced.
std::string random_words(std::mt19937& rng) {
    static const std::vector<std::string> words{"a", "b", "c", "d", "."};
    std::uniform_int_distribution<int> count(1, 12), pick(0, static_cast<int>(words.size()) - 1);
    std::string text;
    for (int i = count(rng); i > 0; --i) text += words[pick(rng)] + " ";
    return text;
}

}  // namespace

TEST(LongBenchPythonReference, GeneratedCasesMatch) {
    if (std::system("python3 -c 'import difflib' > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not on PATH";
    std::mt19937 rng(0);
    std::uniform_int_distribution<int> coin(0, 1), small(0, 2);
    const std::vector<std::string> classes{"Human", "Human being", "Animal", "a", "b", "abc", "cat"};
    nlohmann::json cases = nlohmann::json::array();
    const std::vector<std::string> kinds{"normalize",       "qa_f1_score", "rouge_score",    "classification_score",
                                         "retrieval_score", "count_score", "code_sim_score", "fuzz_ratio"};
    for (int i = 0; i < 400; ++i) {
        for (const std::string& kind : kinds) {
            nlohmann::json c{{"kind", kind}, {"first_line", kind != "normalize" && kind != "fuzz_ratio" && coin(rng)}};
            c["prediction"] = random_text(rng, 14);
            c["ground_truth"] = random_text(rng, 10);
            c["all_classes"] = nlohmann::json::array();
            if (kind == "classification_score") {
                std::vector<std::string> some;
                for (const std::string& name : classes)
                    if (coin(rng)) some.push_back(name);
                if (some.empty()) some.push_back("cat");
                c["ground_truth"] = some[std::uniform_int_distribution<size_t>(0, some.size() - 1)(rng)];
                c["all_classes"] = some;
                // Name some classes, so that predictions name several, substrings of one another among them.
                std::string named = c["prediction"];
                for (const std::string& name : some)
                    if (coin(rng)) named += (coin(rng) ? " " : "") + name;
                c["prediction"] = named;
            } else if (kind == "rouge_score" && coin(rng)) {
                // Few words, repeated, across sentences: where which LCS rouge backtracks changes the score.
                c["prediction"] = random_words(rng);
                c["ground_truth"] = random_words(rng);
            } else if (kind == "retrieval_score") {
                c["ground_truth"] = "Paragraph " + std::vector<std::string>{"3", "12", "\u0663"}[small(rng)];
            } else if (kind == "count_score") {
                c["ground_truth"] = std::vector<std::string>{"3", "12", "\u0663"}[small(rng)];
            } else if (kind == "fuzz_ratio" && i % 4 == 0) {
                // Long enough (200+ characters) for difflib's autojunk to take out the frequent characters.
                std::string b;
                while (b.size() < 260) b += random_text(rng, 10) + "x";
                c["ground_truth"] = b;
            }
            cases.push_back(c);
        }
    }
    const test::TempDir dir("longbench_reference");
    const auto in = dir.write("cases.json", cases.dump());
    const auto out = dir / "scores.json";
    const std::string script = std::string(KASCADE_SOURCE_DIR) + "/tests/tasks/longbench_reference.py";
    const std::string command = "python3 '" + script + "' '" + in.string() + "' '" + out.string() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const nlohmann::json expected = nlohmann::json::parse(read_file(out));
    ASSERT_EQ(expected.size(), cases.size());
    int mismatches = 0;
    for (size_t i = 0; i < cases.size() && mismatches < 10; ++i) {
        const nlohmann::json& c = cases[i];
        const std::string kind = c["kind"], pred = c["prediction"], truth = c["ground_truth"];
        const std::string where = "case " + std::to_string(i) + ": " + c.dump();
        if (kind == "normalize") {
            mismatches += longbench_normalize_answer(pred) != expected[i].get<std::string>();
            EXPECT_EQ(longbench_normalize_answer(pred), expected[i].get<std::string>()) << where;
            continue;
        }
        double got = 0;
        if (kind == "fuzz_ratio") {
            got = longbench_fuzz_ratio(pred, truth);
        } else {
            const LongBenchDataset d{"generated", false, parse_mode<LongBenchMetric>(kind, "kind"), c["first_line"],
                                     /*chat_template=*/true};
            got = longbench_sample_score(d, pred, {truth}, c["all_classes"].get<std::vector<std::string>>());
        }
        mismatches += got != expected[i].get<double>();
        EXPECT_EQ(got, expected[i].get<double>()) << where;  // exact: the same operations in the same order
    }
}
