// Task prompts: exact token lengths and needle depths, checked by tokenizing the prompt text again with three real
// tokenizers (llama2.c's tok512.bin, which the retrieval fixture uses; SmolLM2's byte-level BPE; the SentencePiece-
// style tokenizer.json of Llama 2);
// reproducibility; and the scores against hand-derived values.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "io/tokenizer/tokenizer.h"
#include "pipeline/tasks/task_prompt.h"
#include "pipeline/tasks/task_score.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

struct NamedTokenizer {
    std::string name;
    fs::path path;
    int32_t start;  ///< the BOS the models of this tokenizer read
};

std::vector<NamedTokenizer> tokenizers() {
    return {{"llama2c", fs::path(KASCADE_SHARED_DIR) / "models/stories260K/tok512.bin", 1},
            {"smollm2", fs::path(KASCADE_SHARED_DIR) / "models/smollm2-135m-tokenizer/tokenizer.json", -1},
            {"llama-2", fs::path(KASCADE_SHARED_DIR) / "models/tokenizers/llama-2/tokenizer.json", 1}};
}

/// The text every task's asked needle starts with.
std::string needle_prefix(TaskKind kind) {
    switch (kind) {
        case TaskKind::Passkey:
            return "The pass key is ";
        case TaskKind::VariableTracking:
            return "VAR ";
        default:
            return "One of the special magic numbers for ";
    }
}

}  // namespace

TEST(TaskPrompt, ExactLengthAndDepthByRetokenising) {
    const std::vector<std::string> filler = haystack_sentences(kFillerHaystack, "filler");
    for (const NamedTokenizer& t : tokenizers()) {
        SCOPED_TRACE(t.name);
        const auto tokenizer = load_tokenizer(t.path);
        const int bos = t.start >= 0 ? 1 : 0;
        for (const std::string& name : mode_names<TaskKind>()) {
            const TaskKind kind = parse_mode<TaskKind>(name, "task");
            for (const int length : {700, 1000, 2048}) {
                for (const double depth : {0.0, 25.0, 50.0, 100.0}) {
                    SCOPED_TRACE(fmt::format("{} length {} depth {}", name, length, depth));
                    const TaskSample s = make_task_sample({kind, 7, length, depth, 3}, filler, *tokenizer, t.start);
                    // Tokenizing the prompt text again gives exactly the requested length and the stored ids.
                    const std::vector<int32_t> again = tokenizer->encode(s.prompt);
                    ASSERT_EQ(bos + static_cast<int>(again.size()), length);
                    EXPECT_EQ(std::vector<int32_t>(s.tokens.begin() + bos, s.tokens.end()), again);
                    // The asked needle: its first token where the sample says, at the requested depth of the
                    // haystack (the span between the instruction line and the question) within a sentence and the
                    // other needles' tokens.
                    const size_t question = s.prompt.rfind('\n');
                    const size_t intro_end = s.prompt.find('\n') + 1;
                    const int hay_begin =
                        bos + static_cast<int>(tokenizer->encode(s.prompt.substr(0, intro_end)).size());
                    const int hay_end = bos + static_cast<int>(tokenizer->encode(s.prompt.substr(0, question)).size());
                    ASSERT_NE(s.expected.size(), 0u);
                    // For niah tasks the asked needle is the one with the asked key (the question names it).
                    size_t at = std::string::npos;
                    if (kind == TaskKind::VariableTracking) {
                        at = s.prompt.find("VAR " + s.expected[0] + " = ");
                    } else if (kind == TaskKind::Passkey) {
                        at = s.prompt.find(needle_prefix(kind) + s.expected[0]);
                    } else {
                        at = s.prompt.find(fmt::format("is: {}.", s.expected[0]));
                        at = s.prompt.rfind(needle_prefix(kind), at);
                    }
                    ASSERT_NE(at, std::string::npos);
                    const int needle = bos + static_cast<int>(tokenizer->encode(s.prompt.substr(0, at)).size());
                    EXPECT_NEAR(needle, s.needle_token, 2);
                    const double measured = static_cast<double>(needle - hay_begin) / (hay_end - hay_begin);
                    const double slack = (30.0 * 5) / (hay_end - hay_begin);  // a sentence + 4 other needles
                    EXPECT_NEAR(measured, depth / 100.0, slack + 0.01);
                }
            }
        }
    }
}

TEST(TaskPrompt, SameSpecSamePromptOtherIndexOtherNeedle) {
    const auto tokenizer = load_tokenizer(tokenizers()[0].path);
    const std::vector<std::string> filler = haystack_sentences(kFillerHaystack, "filler");
    const TaskSample a = make_task_sample({TaskKind::NiahMultikey, 1, 600, 50, 0}, filler, *tokenizer, 1);
    const TaskSample b = make_task_sample({TaskKind::NiahMultikey, 1, 600, 50, 0}, filler, *tokenizer, 1);
    const TaskSample c = make_task_sample({TaskKind::NiahMultikey, 1, 600, 50, 1}, filler, *tokenizer, 1);
    const TaskSample d = make_task_sample({TaskKind::NiahMultikey, 2, 600, 50, 0}, filler, *tokenizer, 1);
    EXPECT_EQ(a.prompt, b.prompt);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NE(a.expected, c.expected);
    EXPECT_NE(a.expected, d.expected);
}

TEST(TaskPrompt, TemplatesAndAnswers) {
    const auto tokenizer = load_tokenizer(tokenizers()[0].path);
    const std::vector<std::string> filler = haystack_sentences(kFillerHaystack, "filler");
    const TaskSample p = make_task_sample({TaskKind::Passkey, 3, 500, 50, 0}, filler, *tokenizer, 1);
    ASSERT_EQ(p.expected.size(), 1u);
    EXPECT_TRUE(std::regex_match(p.expected[0], std::regex("[1-9][0-9]{4}")));
    EXPECT_NE(p.prompt.find(fmt::format("The pass key is {0}. Remember it. {0} is the pass key.", p.expected[0])),
              std::string::npos);
    EXPECT_TRUE(p.prompt.ends_with("\nWhat is the pass key? The pass key is"));
    EXPECT_TRUE(p.prompt.starts_with("There is an important info hidden inside a lot of irrelevant text."));

    // Multikey: four needles with four keys, one asked for (its value expected); multivalue: four values, all asked.
    const TaskSample mk = make_task_sample({TaskKind::NiahMultikey, 3, 800, 50, 0}, filler, *tokenizer, 1);
    const std::regex needle("One of the special magic numbers for ([a-z]+-[a-z]+) is: ([0-9]{7})\\.");
    std::vector<std::pair<std::string, std::string>> found;
    for (auto it = std::sregex_iterator(mk.prompt.begin(), mk.prompt.end(), needle); it != std::sregex_iterator(); ++it)
        found.emplace_back((*it)[1], (*it)[2]);
    ASSERT_EQ(found.size(), 4u);
    ASSERT_EQ(mk.expected.size(), 1u);
    const std::smatch asked = [&] {
        std::smatch m;
        std::regex_search(mk.prompt, m,
                          std::regex("special magic number for ([a-z]+-[a-z]+) mentioned in the provided "
                                     "text is$"));
        return m;
    }();
    ASSERT_FALSE(asked.empty());
    int matches = 0;
    for (const auto& [k, v] : found) matches += k == asked[1].str() && v == mk.expected[0];
    EXPECT_EQ(matches, 1);

    const TaskSample mv = make_task_sample({TaskKind::NiahMultivalue, 3, 800, 50, 0}, filler, *tokenizer, 1);
    EXPECT_EQ(mv.expected.size(), 4u);
    for (const std::string& v : mv.expected) EXPECT_NE(mv.prompt.find("is: " + v + "."), std::string::npos);

    // Variable tracking: a chain VAR A = value, VAR B = VAR A, ... in text order, every name expected.
    const TaskSample vt = make_task_sample({TaskKind::VariableTracking, 3, 900, 20, 0}, filler, *tokenizer, 1);
    ASSERT_EQ(vt.expected.size(), 5u);
    size_t last = vt.prompt.find("VAR " + vt.expected[0] + " = ");
    ASSERT_NE(last, std::string::npos);
    for (size_t i = 1; i < vt.expected.size(); ++i) {
        const size_t at = vt.prompt.find(fmt::format("VAR {} = VAR {}.", vt.expected[i], vt.expected[i - 1]));
        ASSERT_NE(at, std::string::npos) << i;
        EXPECT_GT(at, last);
        last = at;
    }
}

TEST(TaskPrompt, TooShortALengthIsRefused) {
    const auto tokenizer = load_tokenizer(tokenizers()[0].path);
    const std::vector<std::string> filler = haystack_sentences(kFillerHaystack, "filler");
    try {
        make_task_sample({TaskKind::NiahMultiquery, 1, 40, 50, 0}, filler, *tokenizer, 1);
        FAIL() << "no error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("length 40 is too short for task niah_multiquery"), std::string::npos)
            << e.what();
    }
}

TEST(TaskPrompt, HaystackSentencesOfAText) {
    const std::vector<std::string> s = haystack_sentences("Call me Ishmael.  Some years\nago - never mind. End", "t");
    EXPECT_EQ(s, (std::vector<std::string>{"Call me Ishmael.", "Some years ago - never mind.", "End"}));
    EXPECT_THROW(haystack_sentences(" \n\t ", "\"empty.txt\""), std::exception);
}

// Scores on constructed outputs, each derived by hand.
TEST(TaskScore, HandDerivedValues) {
    EXPECT_EQ(score_task_output(TaskMetric::NumberMatch, " 12345", {"12345"}), 1.0);
    EXPECT_EQ(score_task_output(TaskMetric::NumberMatch, " 12345. Remember", {"12345"}), 1.0);
    EXPECT_EQ(score_task_output(TaskMetric::NumberMatch, " 123456", {"12345"}), 0.0);  // the first integer differs
    EXPECT_EQ(score_task_output(TaskMetric::NumberMatch, " 54321 12345", {"12345"}), 0.0);
    EXPECT_EQ(score_task_output(TaskMetric::NumberMatch, " the key", {"12345"}), 0.0);
    EXPECT_DOUBLE_EQ(
        score_task_output(TaskMetric::StringMatchAll, " 1111111, 3333333", {"1111111", "2222222", "3333333"}),
        2.0 / 3.0);
    EXPECT_EQ(score_task_output(TaskMetric::StringMatchAll, "ABCDE fghij", {"abcde", "FGHIJ"}), 1.0);  // case
    EXPECT_EQ(score_task_output(TaskMetric::StringMatchAll, "", {"1"}), 0.0);
    EXPECT_EQ(score_task_output(TaskMetric::StringMatchPart, " 3333333", {"1111111", "3333333"}), 1.0);
    EXPECT_EQ(score_task_output(TaskMetric::StringMatchPart, " 4444444", {"1111111", "3333333"}), 0.0);
}

TEST(TaskKinds, NamesRoundTripAndMisspellingsSuggest) {
    for (const std::string& name : mode_names<TaskKind>())
        EXPECT_EQ(mode_name(parse_mode<TaskKind>(name, "--task")), name);
    try {
        parse_mode<TaskKind>("paskey", "--task");
        FAIL();
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("did you mean passkey?"), std::string::npos) << e.what();
    }
    for (const std::string& name : mode_names<TaskPrefill>())
        EXPECT_EQ(mode_name(parse_mode<TaskPrefill>(name, "--prefill")), name);
}
