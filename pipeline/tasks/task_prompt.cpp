// pipeline/tasks/task_prompt.cpp: the prompt templates (Landmark attention's passkey, RULER's needles and variable
// chains, in kascade's wording) and the fitting of a haystack to an exact token length.
#include "pipeline/tasks/task_prompt.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "io/file_util.h"

namespace kascade {

namespace {

constexpr std::string_view kPasskeyIntro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.\n";
constexpr std::string_view kNiahIntro =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about "
    "the numbers afterwards.\n";
constexpr std::string_view kVariableIntro =
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n";

/// How many needles of each kind a sample has (RULER's defaults for its multi-needle tasks).
constexpr int kMultiNeedles = 4;
constexpr int kVariableHops = 4;

/// splitmix64: small, fast, and the same sequence everywhere (std:: distributions are not).
class SampleRng {
  public:
    explicit SampleRng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    /// Uniform in [lo, hi] (the modulo bias is below 1e-12 for these ranges).
    int64_t range(int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
    }
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  private:
    uint64_t state_;
};

std::string random_word(SampleRng& rng) {
    constexpr std::string_view consonants = "bcdfghjklmnprstvwz", vowels = "aeiou";
    std::string w;
    for (int64_t i = 0, n = rng.range(2, 4); i < n; ++i) {
        w += consonants[rng.range(0, consonants.size() - 1)];
        w += vowels[rng.range(0, vowels.size() - 1)];
    }
    return w;
}

std::string random_key(SampleRng& rng) {
    std::string a = random_word(rng);
    return a + "-" + random_word(rng);
}

std::string random_variable(SampleRng& rng) {
    std::string v;
    for (int i = 0; i < 5; ++i) v += static_cast<char>('A' + rng.range(0, 25));
    return v;
}

struct Needle {
    std::string text;
    double position = 0;  ///< fraction of the haystack's sentences before it
    bool asked = false;   ///< the needle whose depth is requested and reported
};

/// A task's instruction, needles, question and expected answer, before the haystack is fitted.
struct TaskContent {
    std::string_view intro;
    std::vector<Needle> needles;  ///< in position order (ties: in this order)
    std::string question;
    std::vector<std::string> expected;
};

std::string niah_needle(const std::string& key, int64_t value) {
    return fmt::format("One of the special magic numbers for {} is: {}.", key, value);
}

TaskContent make_content(TaskKind kind, double depth, SampleRng& rng) {
    TaskContent c;
    switch (kind) {
        case TaskKind::Passkey: {
            const int64_t n = rng.range(10000, 99999);
            c.intro = kPasskeyIntro;
            c.needles.push_back(
                {fmt::format("The pass key is {0}. Remember it. {0} is the pass key.", n), depth, true});
            c.question = "What is the pass key? The pass key is";
            c.expected = {std::to_string(n)};
            break;
        }
        case TaskKind::NiahSingle:
        case TaskKind::NiahMultikey:
        case TaskKind::NiahMultivalue:
        case TaskKind::NiahMultiquery: {
            c.intro = kNiahIntro;
            const int n_keys = kind == TaskKind::NiahMultikey || kind == TaskKind::NiahMultiquery ? kMultiNeedles : 1;
            const int n_values = kind == TaskKind::NiahMultivalue ? kMultiNeedles : 1;
            std::vector<std::string> keys;
            while (static_cast<int>(keys.size()) < n_keys) {
                std::string k = random_key(rng);
                if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
            }
            for (int k = 0; k < n_keys; ++k) {
                for (int v = 0; v < n_values; ++v) {
                    const int64_t value = rng.range(1000000, 9999999);
                    const bool first = k == 0 && v == 0;
                    c.needles.push_back({niah_needle(keys[k], value), first ? depth : rng.unit(), first});
                    // Every value of the asked key(s): multikey asks the first key only.
                    if (kind != TaskKind::NiahMultikey || k == 0) c.expected.push_back(std::to_string(value));
                }
            }
            if (kind == TaskKind::NiahMultiquery) {
                std::string query;
                for (int k = 0; k < n_keys; ++k)
                    query += k == 0 ? keys[k] : (k + 1 == n_keys ? ", and " : ", ") + keys[k];
                c.question = fmt::format(
                    "What are all the special magic numbers for {0} mentioned in the provided text? The special magic "
                    "numbers for {0} mentioned in the provided text are",
                    query);
            } else if (kind == TaskKind::NiahMultivalue) {
                c.question = fmt::format(
                    "What are all the special magic numbers for {0} mentioned in the provided text? The special magic "
                    "numbers for {0} mentioned in the provided text are",
                    keys[0]);
            } else {
                c.question = fmt::format(
                    "What is the special magic number for {0} mentioned in the provided text? The special magic number "
                    "for {0} mentioned in the provided text is",
                    keys[0]);
            }
            break;
        }
        case TaskKind::VariableTracking: {
            c.intro = kVariableIntro;
            const int64_t value = rng.range(10000, 99999);
            std::vector<std::string> names;
            while (static_cast<int>(names.size()) < kVariableHops + 1) {
                std::string v = random_variable(rng);
                if (std::find(names.begin(), names.end(), v) == names.end()) names.push_back(std::move(v));
            }
            // The chain in order: the first assignment at the depth, each hop after the one before.
            std::vector<double> positions{depth};
            for (int h = 0; h < kVariableHops; ++h) positions.push_back(depth + (1 - depth) * rng.unit());
            std::sort(positions.begin() + 1, positions.end());
            c.needles.push_back({fmt::format("VAR {} = {}.", names[0], value), positions[0], true});
            for (int h = 1; h <= kVariableHops; ++h)
                c.needles.push_back({fmt::format("VAR {} = VAR {}.", names[h], names[h - 1]), positions[h], false});
            c.question = fmt::format(
                "Question: Find all variables that are assigned the value {0} in the text above. Answer: According to "
                "the chain(s) of variables assignment in the text above, {1} variables are assigned the value {0}, "
                "they are:",
                value, kVariableHops + 1);
            c.expected = names;
            break;
        }
    }
    std::stable_sort(c.needles.begin(), c.needles.end(),
                     [](const Needle& a, const Needle& b) { return a.position < b.position; });
    return c;
}

/// The prompt with n_full whole haystack sentences and `partial` bytes of the next one; asked_offset gets the byte
/// offset of the asked needle, haystack_end the offset where the question's "\n" starts.
std::string compose(const TaskContent& c, const std::vector<std::string>& haystack, int n_full, size_t partial,
                    size_t* asked_offset, size_t* haystack_end) {
    std::string text(c.intro);
    size_t next_needle = 0;
    for (int i = 0; i <= n_full; ++i) {
        while (next_needle < c.needles.size() &&
               static_cast<int>(std::lround(c.needles[next_needle].position * n_full)) == i) {
            if (c.needles[next_needle].asked && asked_offset) *asked_offset = text.size();
            text += c.needles[next_needle].text;
            text += ' ';
            ++next_needle;
        }
        if (i < n_full) {
            text += haystack[i % haystack.size()];
            text += ' ';
        }
    }
    text += haystack[n_full % haystack.size()].substr(0, partial);
    if (haystack_end) *haystack_end = text.size();
    text += '\n';
    text += c.question;
    return text;
}

uint64_t sample_seed(const TaskSampleSpec& s) {
    const std::string id = fmt::format("{}|{}|{}|{:.4f}|{}", mode_name(s.kind), s.seed, s.length, s.depth_pct, s.index);
    return std::stoull(hash_hex(id), nullptr, 16);
}

}  // namespace

std::vector<std::string> haystack_sentences(std::string_view text, std::string_view source) {
    std::string flat;
    for (const char ch : text) {
        const bool space = ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v';
        if (space) {
            if (!flat.empty() && flat.back() != ' ') flat += ' ';
        } else {
            flat += ch;
        }
    }
    std::vector<std::string> sentences;
    size_t begin = 0;
    while (begin < flat.size()) {
        size_t end = flat.find(". ", begin);
        end = end == std::string::npos ? flat.size() : end + 1;
        std::string s = flat.substr(begin, end - begin);
        while (!s.empty() && s.back() == ' ') s.pop_back();
        if (!s.empty()) sentences.push_back(std::move(s));
        begin = end + 1;
    }
    KASCADE_CHECK(!sentences.empty(), "haystack {} has no text (expected sentences to hide the needles in)", source);
    return sentences;
}

TaskSample make_task_sample(const TaskSampleSpec& spec, const std::vector<std::string>& haystack,
                            const Tokenizer& tokenizer, int32_t start_token) {
    KASCADE_ASSERT(!haystack.empty());
    KASCADE_CHECK(spec.depth_pct >= 0 && spec.depth_pct <= 100, "invalid depth {}% (must be in [0, 100])",
                  spec.depth_pct);
    SampleRng rng(sample_seed(spec));
    const TaskContent content = make_content(spec.kind, spec.depth_pct / 100.0, rng);
    const int bos = start_token >= 0 ? 1 : 0;
    const auto count = [&](const std::string& text) { return bos + static_cast<int>(tokenizer.encode(text).size()); };
    const auto count_with = [&](int n_full, size_t partial) {
        return count(compose(content, haystack, n_full, partial, nullptr, nullptr));
    };

    const int bare = count_with(0, 0);
    KASCADE_CHECK(bare <= spec.length,
                  "length {} is too short for task {}: its instruction, needles and question alone take {} tokens",
                  spec.length, mode_name(spec.kind), bare);
    // Whole sentences: the most that fit (exponential, then binary search).
    int lo = 0, hi = 1;
    while (count_with(hi, 0) <= spec.length) {
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        (count_with(mid, 0) <= spec.length ? lo : hi) = mid;
    }
    // Then the next sentence cut at a character: the longest cut that fits, which is exact unless the tokenizer
    // merges across the cut; then one sentence fewer is tried.
    for (int n_full = lo; n_full >= std::max(0, lo - 2); --n_full) {
        const std::string& next = haystack[n_full % haystack.size()];
        std::vector<size_t> cuts;
        for (size_t i = 0; i <= next.size(); ++i)
            if (i == next.size() || (static_cast<unsigned char>(next[i]) & 0xC0) != 0x80) cuts.push_back(i);
        size_t a = 0, b = cuts.size();  // cuts[a] fits (n_full whole sentences fit); find the last that fits
        while (b - a > 1) {
            const size_t mid = a + (b - a) / 2;
            (count_with(n_full, cuts[mid]) <= spec.length ? a : b) = mid;
        }
        for (size_t i = a; i < cuts.size() && i <= a + 8; ++i) {
            size_t asked = 0, hay_end = 0;
            std::string text = compose(content, haystack, n_full, cuts[i], &asked, &hay_end);
            std::vector<int32_t> ids = tokenizer.encode(text);
            if (bos + static_cast<int>(ids.size()) != spec.length) continue;
            TaskSample s;
            // The start token put in front of ids, not ids appended to an empty vector: GCC 12 warned (-Warray-bounds)
            // about the copy into the empty vector's storage, a false positive of its inlined insert.
            if (bos) ids.insert(ids.begin(), start_token);
            s.tokens = std::move(ids);
            const int hay_begin = count(std::string(content.intro));
            const int hay_stop = count(text.substr(0, hay_end));
            s.needle_token = count(text.substr(0, asked));
            s.needle_depth =
                hay_stop > hay_begin ? static_cast<double>(s.needle_token - hay_begin) / (hay_stop - hay_begin) : 0.0;
            s.prompt = std::move(text);
            s.expected = content.expected;
            return s;
        }
    }
    KASCADE_FAIL(
        "cannot fit task {} to exactly {} tokens with this tokenizer and haystack (the tokenizer merges "
        "across every cut tried); try another length",
        mode_name(spec.kind), spec.length);
}

}  // namespace kascade
