// pipeline/stages/eval_method.h: what an evaluation runs (method) and in which phase, each with its one string
// mapping. The names are those of the CLI, the sweep files, the results database (runs.method, runs.phase) and the
// content keys alike.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

enum class EvalMethod {
    Dense,       ///< exact attention: the baseline every sparse run is compared with
    Kascade,     ///< a stored schedule: anchor layers select their top-k keys, reuse layers take their anchor's
    Oracle,      ///< every layer but 0 selects its own top-k (the ceiling of a reuse schedule)
    Streaming,   ///< sink tokens + the most recent keys, same budget
    Quest,       ///< pages of keys ranked by an upper bound from per-page min/max keys (decode only)
    OmniKv,      ///< filter layers pick one key set for all heads, used until the next filter layer (decode only)
    LessIsMore,  ///< selection layers unite every head's top keys with sinks and a recent window (decode only)
};

/// Whether a method selects keys only for generated tokens (its prefill is dense attention).
bool is_decode_only_method(EvalMethod method);

enum class EvalPhase {
    Prefill,  ///< perplexity over windows, every position attending in one causal pass
    Decode,   ///< a dense prefill of a prompt, then one token at a time through the method's decode policy
};

std::string_view eval_method_name(EvalMethod method);
std::optional<EvalMethod> eval_method_from_name(std::string_view name);
/// All names, in declaration order.
const std::vector<std::string>& eval_method_names();
/// Name -> method, else an error naming `option`, the value, the choices and the closest one.
EvalMethod parse_eval_method(std::string_view name, std::string_view option);

std::string_view eval_phase_name(EvalPhase phase);
std::optional<EvalPhase> eval_phase_from_name(std::string_view name);
const std::vector<std::string>& eval_phase_names();
EvalPhase parse_eval_phase(std::string_view name, std::string_view option);

}  // namespace kascade
