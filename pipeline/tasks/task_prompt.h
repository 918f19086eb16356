// pipeline/tasks/task_prompt.h: generating a task's prompts at exact token lengths, reproducibly.
//
// A prompt is: the task's instruction line, a haystack (filler sentences or the sentences of a text file) with the
// needle(s) at sentence boundaries, then "\n" and the question, whose answer the model continues with. The
// haystack is fitted so that BOS (where the model reads one) + the tokenized prompt is exactly the requested length,
// as RULER fits it: whole sentences by bisection, then the next sentence cut at a character. The asked needle sits
// at the sentence boundary nearest the requested depth (0 % = first in the haystack, 100 % = last); other needles
// (distractors, further values or hops) at boundaries drawn at random. Everything random comes from one generator
// seeded by (task, seed, length, depth, index), so a sample is the same in every process and on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer/tokenizer.h"
#include "pipeline/tasks/task_kind.h"

namespace kascade {

/// The classic filler of the passkey test (Landmark attention): the default haystack.
inline constexpr std::string_view kFillerHaystack =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// The sentences a haystack is made of: the filler's, or a text's (whitespace runs made one space, split after
/// ". "). An error names `source` if the text has no sentence.
std::vector<std::string> haystack_sentences(std::string_view text, std::string_view source);

struct TaskSample {
    std::string prompt;                 ///< the text after BOS
    std::vector<int32_t> tokens;        ///< BOS (if the model reads one) + the prompt's tokens: exactly the length
    std::vector<std::string> expected;  ///< what the answer must contain (see TaskMetric)
    double needle_depth = 0;            ///< where the asked needle starts, as a fraction of the haystack's tokens
    int needle_token = 0;               ///< index in `tokens` of the asked needle's first token
};

/// What a sample is drawn from.
struct TaskSampleSpec {
    TaskKind kind = TaskKind::Passkey;
    uint64_t seed = 0;
    int length = 0;         ///< tokens, BOS included
    double depth_pct = 50;  ///< where the asked needle goes, % of the haystack
    int index = 0;          ///< which sample of this (length, depth)
};

/// Makes one sample. start_token: the model's sequence start (-1: none). An error says why a length cannot be met
/// (too short for the instruction, needles and question).
TaskSample make_task_sample(const TaskSampleSpec& spec, const std::vector<std::string>& haystack,
                            const Tokenizer& tokenizer, int32_t start_token);

}  // namespace kascade
