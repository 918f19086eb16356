#include "pipeline/sweep/sweep_spec.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>

#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "base/closest_match.h"
#include "base/error.h"
#include "io/file_util.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/stages/eval_stage.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

/// Reads one table of the sweep file, remembering which keys were used so unknown ones can be reported.
class TableReader {
  public:
    /// Rejects, before anything else is read, every key of the table that is not in `known`.
    TableReader(const fs::path& file, std::string where, const toml::table* table, std::set<std::string> known)
        : file_(file), where_(std::move(where)), table_(table), known_(std::move(known)) {
        reject_unknown_keys();
    }

    bool has(const std::string& key) {
        KASCADE_ASSERT(known_.count(key));
        return table_ != nullptr && table_->contains(key);
    }

    std::string string(const std::string& key, const std::string& fallback, bool required = false) {
        if (!has(key)) {
            KASCADE_CHECK(!required, "{}: missing {}.{} (a string)", file_.string(), where_, key);
            return fallback;
        }
        const auto v = (*table_)[key].value<std::string>();
        KASCADE_CHECK(v.has_value(), "{}: {}.{} must be a string", file_.string(), where_, key);
        // A required string names a file; "" would resolve to the sweep file's folder and fail only in a job.
        KASCADE_CHECK(!required || !v->empty(), "{}: {}.{} is empty (expected a path)", file_.string(), where_, key);
        return *v;
    }

    /// An integer; at most 2^40, so that sums of offsets and token counts cannot overflow.
    int64_t integer(const std::string& key, int64_t fallback, const ValueRange& range) {
        if (!has(key)) return fallback;
        // value_exact: value<int64_t>() would convert a float such as 5.5e21 with an out-of-range (undefined) cast.
        const auto v = (*table_)[key].value_exact<int64_t>();
        KASCADE_CHECK(v.has_value(), "{}: {}.{} must be an integer", file_.string(), where_, key);
        check_range(key, static_cast<double>(*v), range);
        constexpr int64_t kMax = int64_t{1} << 40;
        KASCADE_CHECK(*v <= kMax, "{}: {}.{} = {} is out of range (must be at most {})", file_.string(), where_, key,
                      *v, kMax);
        return *v;
    }

    /// integer() for a parameter held in an int: a value beyond it is refused, never cut to its low bits.
    int int_integer(const std::string& key, int fallback, const ValueRange& range) {
        const int64_t v = integer(key, fallback, range);
        KASCADE_CHECK(v <= std::numeric_limits<int>::max(), "{}: {}.{} = {} is out of range (must be at most {})",
                      file_.string(), where_, key, v, std::numeric_limits<int>::max());
        return static_cast<int>(v);
    }

    /// A number or a list of numbers; with `integers`, each an integer that fits an int.
    std::vector<double> numbers(const std::string& key, std::vector<double> fallback, const ValueRange& range,
                                bool integers) {
        if (!has(key)) return fallback;
        const toml::node& node = *table_->get(key);
        std::vector<double> out;
        auto take = [&](const toml::node& n) {
            std::optional<double> v;
            if (integers) {
                if (auto i = n.value_exact<int64_t>()) v = static_cast<double>(*i);
            } else {
                v = n.value<double>();
            }
            KASCADE_CHECK(v.has_value(), "{}: {}.{} must be {} or a list of them", file_.string(), where_, key,
                          integers ? "an integer" : "a number");
            check_range(key, *v, range);
            KASCADE_CHECK(!integers || *v <= std::numeric_limits<int>::max(),
                          "{}: {}.{} = {} is out of range (must be at most {})", file_.string(), where_, key, *v,
                          std::numeric_limits<int>::max());
            out.push_back(*v);
        };
        if (const toml::array* a = node.as_array()) {
            KASCADE_CHECK(!a->empty(), "{}: {}.{} is an empty list", file_.string(), where_, key);
            for (const toml::node& n : *a) take(n);
        } else {
            take(node);
        }
        return out;
    }

    /// A list of strings.
    std::vector<std::string> strings(const std::string& key) {
        if (!has(key)) return {};
        const toml::array* a = table_->get(key)->as_array();
        KASCADE_CHECK(a != nullptr, "{}: {}.{} must be a list of strings", file_.string(), where_, key);
        std::vector<std::string> out;
        for (const toml::node& n : *a) {
            const auto v = n.value<std::string>();
            KASCADE_CHECK(v.has_value(), "{}: {}.{} must be a list of strings", file_.string(), where_, key);
            out.push_back(*v);
        }
        return out;
    }

    /// One mode name (base/modes.h), read as parse_mode reads it ("" is an unknown name like any other).
    template <typename E>
    E mode(const std::string& key) {
        return parse_mode_of<E>(string(key, ""), key);
    }

    /// A mode name or a list of them (base/modes.h), each read by parse_mode: a misspelt one gets the "did you
    /// mean" the CLI and the results database give.
    template <typename E>
    std::vector<E> modes(const std::string& key, std::vector<E> fallback) {
        if (!has(key)) return fallback;
        std::vector<E> out;
        for (const std::string& v : string_or_strings(key)) out.push_back(parse_mode_of<E>(v, key));
        return out;
    }

  private:
    template <typename E>
    E parse_mode_of(const std::string& name, const std::string& key) {
        const std::optional<E> e = mode_from_name<E>(name);
        KASCADE_CHECK(e.has_value(), "{}: {}", file_.string(),
                      unknown_mode_message<E>(name, fmt::format("{}.{}", where_, key)));
        return *e;
    }

    std::vector<std::string> string_or_strings(const std::string& key) {
        const toml::node& node = *table_->get(key);
        std::vector<std::string> out;
        auto take = [&](const toml::node& n) {
            const auto v = n.value<std::string>();
            KASCADE_CHECK(v.has_value(), "{}: {}.{} must be a string or a list of strings", file_.string(), where_,
                          key);
            out.push_back(*v);
        };
        if (const toml::array* a = node.as_array()) {
            KASCADE_CHECK(!a->empty(), "{}: {}.{} is an empty list", file_.string(), where_, key);
            for (const toml::node& n : *a) take(n);
        } else {
            take(node);
        }
        return out;
    }

    void reject_unknown_keys() {
        if (table_ == nullptr) return;
        for (const auto& [k, v] : *table_) {
            const std::string key(k.str());
            if (known_.count(key)) continue;
            const std::string suggestion = closest_match(key, std::vector<std::string>(known_.begin(), known_.end()));
            KASCADE_FAIL("{}: unknown key {}.{}{}; known keys: {}", file_.string(), where_, key,
                         suggestion.empty() ? "" : fmt::format(" (did you mean {}?)", suggestion),
                         fmt::join(known_, ", "));
        }
    }

    /// The range the command-line option of the same parameter has (param_ranges.h).
    void check_range(const std::string& key, double v, const ValueRange& range) {
        KASCADE_CHECK(range.contains(v), "{}: {}.{} = {} is out of range (must be {})", file_.string(), where_, key, v,
                      range.text());
    }

    fs::path file_;
    std::string where_;
    const toml::table* table_;
    std::set<std::string> known_;
};

/// ${VAR} -> its value (an unset variable is an error), then relative paths -> relative to the sweep file.
std::string resolve_path(const fs::path& file, const std::string& where, const std::string& raw,
                         std::map<std::string, std::string>& environment) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '$' && i + 1 < raw.size() && raw[i + 1] == '{') {
            const size_t end = raw.find('}', i);
            KASCADE_CHECK(end != std::string::npos, "{}: {} has an unclosed ${{ in \"{}\"", file.string(), where, raw);
            const std::string name = raw.substr(i + 2, end - i - 2);
            const char* value = std::getenv(name.c_str());
            KASCADE_CHECK(value != nullptr && *value,
                          "{}: {} uses ${{{}}}, which is not set; export it (for KASCADE_ASSETS: the folder "
                          "with models/ and data/ that scripts/fetch_assets.sh prints)",
                          file.string(), where, name);
            out += value;
            environment[name] = value;
            i = end;
        } else {
            out += raw[i];
        }
    }
    if (out.empty()) return out;
    const fs::path p(out);
    return p.is_absolute() ? out : (file.parent_path() / p).lexically_normal().string();
}

const toml::table* subtable(const toml::table& root, const fs::path& file, const char* name, bool required) {
    const toml::node* node = root.get(name);
    if (node == nullptr) {
        KASCADE_CHECK(!required, "{}: missing table [{}]", file.string(), name);
        return nullptr;
    }
    KASCADE_CHECK(node->is_table(), "{}: {} must be a table ([{}])", file.string(), name, name);
    return node->as_table();
}

SweepTaskSpec read_task_table(const fs::path& file, const toml::table* table,
                              std::map<std::string, std::string>& environment) {
    TableReader t(file, "task", table,
                  {"tasks", "lengths", "depths", "depth_pcts", "samples", "seed", "haystack", "max_new_tokens",
                   "prefill", "batch"});
    SweepTaskSpec task;
    KASCADE_CHECK(t.has("tasks"), "{}: missing task.tasks (one or more of: {})", file.string(),
                  fmt::join(mode_names<TaskKind>(), ", "));
    task.tasks = t.modes<TaskKind>("tasks", {});
    KASCADE_CHECK(t.has("lengths"), "{}: missing task.lengths (prompt lengths in tokens, e.g. [1024, 2048])",
                  file.string());
    for (double v : t.numbers("lengths", {}, param_range::kTaskLength, true))
        task.lengths.push_back(static_cast<int>(v));
    KASCADE_CHECK(!(t.has("depths") && t.has("depth_pcts")),
                  "{}: task.depths (a count) and task.depth_pcts (a list) exclude each other", file.string());
    if (t.has("depth_pcts")) {
        task.depths_pct = t.numbers("depth_pcts", {}, param_range::kDepthPct, false);
    } else {
        task.depths_pct = evenly_spaced_depths(t.int_integer("depths", 1, param_range::kDepthCount));
    }
    task.samples = t.int_integer("samples", TaskParams{}.samples, param_range::kTaskSamples);
    task.seed =
        static_cast<uint64_t>(t.integer("seed", static_cast<int64_t>(TaskParams{}.seed), param_range::kTaskSeed));
    const std::string haystack = t.string("haystack", "");
    if (!haystack.empty()) task.haystack = resolve_path(file, "task.haystack", haystack, environment);
    if (t.has("max_new_tokens")) task.max_new_tokens = t.int_integer("max_new_tokens", 0, param_range::kMaxNewTokens);
    task.prefills = t.modes<TaskPrefill>("prefill", {TaskParams{}.prefill});
    task.batch = t.int_integer("batch", TaskParams{}.batch, param_range::kBatch);
    return task;
}

SweepDatasetSpec read_datasets_table(const fs::path& file, const toml::table* table,
                                     std::map<std::string, std::string>& environment) {
    TableReader t(file, "datasets", table,
                  {"dir", "names", "prompt_file", "maxlen_file", "max_new_tokens", "max_length", "metric",
                   "chat_template", "limit", "prefill", "batch"});
    SweepDatasetSpec d;
    d.dir = resolve_path(file, "datasets.dir", t.string("dir", "", true), environment);
    d.names = t.strings("names");
    KASCADE_CHECK(!d.names.empty(), "{}: missing datasets.names (dataset names, each a <dir>/<name>.jsonl file)",
                  file.string());
    for (const std::string& name : d.names) {
        const fs::path jsonl = fs::path(d.dir) / (name + ".jsonl");
        KASCADE_CHECK(fs::exists(jsonl), "{}: datasets.names = \"{}\": no file {}", file.string(), name,
                      jsonl.string());
    }
    const std::string prompt_file = t.string("prompt_file", "");
    if (!prompt_file.empty()) d.prompt_file = resolve_path(file, "datasets.prompt_file", prompt_file, environment);
    const std::string maxlen_file = t.string("maxlen_file", "");
    if (!maxlen_file.empty()) d.maxlen_file = resolve_path(file, "datasets.maxlen_file", maxlen_file, environment);
    if (t.has("max_new_tokens")) d.max_new_tokens = t.int_integer("max_new_tokens", 0, param_range::kMaxNewTokens);
    KASCADE_CHECK(t.has("max_length"),
                  "{}: missing datasets.max_length (prompt tokens at most; longer prompts are cut in the middle)",
                  file.string());
    d.max_length = t.int_integer("max_length", 0, param_range::kTaskLength);
    if (t.has("metric")) d.metric = t.mode<LongBenchMetric>("metric");
    if (t.has("chat_template")) d.chat_template = t.mode<ChatTemplate>("chat_template");
    if (t.has("limit")) d.limit = t.int_integer("limit", 0, ValueRange{1, 1 << 30});
    d.prefills = t.modes<TaskPrefill>("prefill", {DatasetTaskParams{}.prefill});
    d.batch = t.int_integer("batch", DatasetTaskParams{}.batch, param_range::kBatch);
    return d;
}

/// The file parsed as TOML: a missing file or a syntax error is named with its line and column.
toml::table parse_sweep_file(const fs::path& file) {
    KASCADE_CHECK(fs::exists(file), "sweep file \"{}\" does not exist", file.string());
    const std::string contents = read_file(file);  // refuses a FIFO or a device, which parse_file would read forever
    try {
        return toml::parse(contents, file.string());
    } catch (const toml::parse_error& e) {
        KASCADE_FAIL("{}:{}:{}: invalid TOML: {}", file.string(), e.source().begin.line, e.source().begin.column,
                     e.description());
    }
}

/// [model]: the model's path and, optionally, its tokenizer's and the numerics of its matrix products and KV cache.
void read_model_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader model(file, "model", subtable(root, file, "model", true), {"path", "tokenizer", "matmul", "kv_dtype"});
    spec.model = resolve_path(file, "model.path", model.string("path", "", true), spec.environment);
    const std::string tokenizer = model.string("tokenizer", "");
    spec.tokenizer = tokenizer.empty() ? "" : resolve_path(file, "model.tokenizer", tokenizer, spec.environment);
    const std::vector<MatmulPrecision> matmul = model.modes<MatmulPrecision>("matmul", {spec.matmul});
    KASCADE_CHECK(matmul.size() == 1, "{}: model.matmul must be one string, found a list of {}", file.string(),
                  matmul.size());
    spec.matmul = matmul.front();
    const std::vector<KvDType> kv_dtype = model.modes<KvDType>("kv_dtype", {spec.kv_dtype});
    KASCADE_CHECK(kv_dtype.size() == 1, "{}: model.kv_dtype must be one string, found a list of {}", file.string(),
                  kv_dtype.size());
    spec.kv_dtype = kv_dtype.front();
}

/// [text]: the text the calibration and test tokens are taken from.
void read_text_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader text(file, "text", subtable(root, file, "text", true), {"path"});
    spec.text = resolve_path(file, "text.path", text.string("path", "", true), spec.environment);
}

/// [calibration]: the token range the captures read.
void read_calibration_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader calib(file, "calibration", subtable(root, file, "calibration", false), {"offset", "tokens"});
    spec.calib_offset = calib.integer("offset", CaptureParams{}.token_offset, param_range::kTokenOffset);
    spec.calib_tokens = calib.integer("tokens", CaptureParams{}.n_tokens, param_range::kTokenCount);
}

/// [test]: the token range the evals read, the phase, and a decode run's window.
void read_test_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader test(file, "test", subtable(root, file, "test", false),
                     {"offset", "tokens", "phase", "prompt_tokens", "decode_tokens"});
    spec.test_offset_given = test.has("offset");
    spec.test_offset = test.integer("offset", -1, param_range::kTokenOffset);
    spec.test_tokens = test.integer("tokens", EvalParams{}.n_tokens, param_range::kTokenCount);
    const std::vector<EvalPhase> phases = test.modes<EvalPhase>("phase", {EvalParams{}.phase});
    KASCADE_CHECK(phases.size() == 1, "{}: test.phase must be one string, found a list of {}", file.string(),
                  phases.size());
    spec.phase = phases.front();
    KASCADE_CHECK(spec.phase == EvalPhase::Decode || (!test.has("prompt_tokens") && !test.has("decode_tokens")),
                  "{}: test.prompt_tokens and test.decode_tokens apply to phase = \"decode\" only", file.string());
    spec.prompt_tokens = test.int_integer("prompt_tokens", EvalParams{}.prompt_tokens, param_range::kPromptTokens);
    spec.decode_tokens = test.int_integer("decode_tokens", EvalParams{}.decode_tokens, param_range::kDecodeTokens);
}

/// The top-k rules of [grid]: topk_tiles x round_k, or topk_pct x k_min x k_rule x round_k.
std::vector<TopKRule> read_topk_rules(TableReader& grid, const fs::path& file) {
    const bool has_tiles = grid.has("topk_tiles"), has_pct = grid.has("topk_pct");
    KASCADE_CHECK(has_tiles != has_pct, "{}: [grid] needs exactly one of topk_tiles and topk_pct", file.string());
    const std::vector<double> round_ks =
        grid.numbers("round_k", {double(TopKRule{}.round_k)}, param_range::kRoundK, true);
    const std::vector<KRule> k_rules = grid.modes<KRule>("k_rule", {TopKRule{}.k_rule});
    std::vector<TopKRule> rules;
    if (has_tiles) {
        KASCADE_CHECK(!grid.has("k_rule"), "{}: grid.k_rule applies to topk_pct only, not to topk_tiles",
                      file.string());
        for (double v : grid.numbers("topk_tiles", {}, param_range::kTopKTiles, true))
            for (double r : round_ks)
                rules.push_back({static_cast<int>(v), 0, 0, TopKRule{}.k_rule, static_cast<int>(r)});
        return rules;
    }
    const std::vector<double> k_mins =
        grid.numbers("k_min", {double(TopKRule{}.k_min_tokens)}, param_range::kKMin, true);
    for (double p : grid.numbers("topk_pct", {}, param_range::kTopKPct, false))
        for (double k : k_mins)
            for (KRule rule : k_rules)
                for (double r : round_ks)
                    rules.push_back({0, static_cast<float>(p), static_cast<int>(k), rule, static_cast<int>(r)});
    return rules;
}

/// The similarity measures and head maps [grid] gives every [[schedules]] table that does not set its own.
struct ScheduleMeasures {
    std::vector<SimilarityMetric> metrics;
    std::vector<SimilarityAggregation> aggregations;
    std::vector<HeadMapMode> head_maps;
};

/// [grid]: the capture, similarity and method settings every job combination is taken from.
ScheduleMeasures read_grid_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader grid(file, "grid", subtable(root, file, "grid", true),
                     {"ctx", "tile", "topk_tiles", "topk_pct", "k_min", "k_rule", "round_k", "key_granularity",
                      "pooling", "metric", "aggregation", "head_map"});
    for (double v : grid.numbers("ctx", {double(CaptureParams{}.ctx)}, param_range::kCtx, true))
        spec.ctx.push_back(static_cast<int>(v));
    for (double v : grid.numbers("tile", {double(CaptureParams{}.tile)}, param_range::kTile, true))
        spec.tile.push_back(static_cast<int>(v));
    spec.topk = read_topk_rules(grid, file);
    spec.granularity = grid.modes<KeyGranularity>("key_granularity", {SparseAttentionOptions{}.granularity});
    spec.pooling = grid.modes<Pooling>("pooling", {SparseAttentionOptions{}.pooling});
    const ScheduleParams schedule_defaults;
    ScheduleMeasures measures;
    measures.metrics = grid.modes<SimilarityMetric>("metric", {schedule_defaults.metric});
    measures.aggregations = grid.modes<SimilarityAggregation>("aggregation", {schedule_defaults.aggregation});
    measures.head_maps = grid.modes<HeadMapMode>("head_map", {schedule_defaults.head_map});
    return measures;
}

/// The policy settings of schedules[i], before its measures and head maps: threshold x max_reuse_dist, anchors,
/// or one anchor_list.
std::vector<ScheduleParams> read_policy_settings(TableReader& s, const fs::path& file, size_t i,
                                                 SchedulePolicy policy) {
    const ScheduleParams schedule_defaults;
    std::vector<ScheduleParams> expanded;
    if (policy == SchedulePolicy::Threshold) {
        for (double th : s.numbers("threshold", {schedule_defaults.threshold}, param_range::kThreshold, false))
            for (double d : s.numbers("max_reuse_dist", {double(schedule_defaults.max_reuse_dist)},
                                      param_range::kMaxReuseDist, true)) {
                ScheduleParams p;
                p.policy = policy;
                p.threshold = th;
                p.max_reuse_dist = static_cast<int>(d);
                expanded.push_back(p);
            }
    } else if (policy == SchedulePolicy::Dp) {
        for (double k : s.numbers("anchors", {double(schedule_defaults.n_anchors)}, param_range::kAnchors, true)) {
            ScheduleParams p;
            p.policy = policy;
            p.n_anchors = static_cast<int>(k);
            expanded.push_back(p);
        }
    } else {
        ScheduleParams p;
        p.policy = policy;
        for (double l : s.numbers("anchor_list", {}, param_range::kLayer, true))
            p.anchor_list.push_back(static_cast<int>(l));
        KASCADE_CHECK(!p.anchor_list.empty(), "{}: schedules[{}] (fixed) needs anchor_list = [0, ...]", file.string(),
                      i);
        expanded.push_back(p);
    }
    return expanded;
}

/// schedules[i]: its policy settings x metric x aggregation x head_map, appended to spec.schedules.
void read_schedule_table(const fs::path& file, size_t i, const toml::table* table, const ScheduleMeasures& measures,
                         SweepSpec& spec) {
    TableReader s(
        file, fmt::format("schedules[{}]", i), table,
        {"policy", "threshold", "max_reuse_dist", "anchors", "anchor_list", "metric", "aggregation", "head_map"});
    KASCADE_CHECK(s.has("policy"), "{}: missing schedules[{}].policy (threshold, dp or fixed)", file.string(), i);
    const std::vector<SchedulePolicy> policies = s.modes<SchedulePolicy>("policy", {});
    KASCADE_CHECK(policies.size() == 1, "{}: schedules[{}].policy must be one string, found a list of {}",
                  file.string(), i, policies.size());
    const std::vector<ScheduleParams> expanded = read_policy_settings(s, file, i, policies.front());
    const auto metrics = s.modes<SimilarityMetric>("metric", measures.metrics);
    const auto aggregations = s.modes<SimilarityAggregation>("aggregation", measures.aggregations);
    const auto head_maps = s.modes<HeadMapMode>("head_map", measures.head_maps);
    for (ScheduleParams p : expanded)
        for (SimilarityMetric m : metrics)
            for (SimilarityAggregation a : aggregations)
                for (HeadMapMode h : head_maps) {
                    p.metric = m;
                    p.aggregation = a;
                    p.head_map = h;
                    spec.schedules.push_back(p);
                    spec.schedule_tables.push_back(static_cast<int>(i));
                }
}

/// [[schedules]]: Kascade's schedule settings, fully expanded, in table order.
void read_schedule_tables(const toml::table& root, const fs::path& file, const ScheduleMeasures& measures,
                          SweepSpec& spec) {
    const toml::node* node = root.get("schedules");
    if (node == nullptr) return;
    const toml::array* list = node->as_array();
    KASCADE_CHECK(list != nullptr, "{}: schedules must be an array of tables ([[schedules]])", file.string());
    for (size_t i = 0; i < list->size(); ++i) {
        const toml::table* t = (*list)[i].as_table();
        KASCADE_CHECK(t != nullptr, "{}: schedules[{}] must be a table", file.string(), i);
        read_schedule_table(file, i, t, measures, spec);
    }
}

/// [task] and [datasets], and whether the sweep runs perplexity evals besides them.
void read_task_tables(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    const toml::table* task_table = subtable(root, file, "task", false);
    const toml::table* datasets_table = subtable(root, file, "datasets", false);
    spec.perplexity = (task_table == nullptr && datasets_table == nullptr) || root.contains("test");
    if (task_table != nullptr) spec.task = read_task_table(file, task_table, spec.environment);
    if (datasets_table != nullptr) spec.datasets = read_datasets_table(file, datasets_table, spec.environment);
}

/// Refuses a baselines.methods entry that the sweep cannot run: kascade (it comes from [[schedules]]), or a decode
/// method in a sweep whose perplexity evals are prefill.
void check_baseline_methods(const fs::path& file, const SweepSpec& spec) {
    KASCADE_CHECK(std::find(spec.baselines.begin(), spec.baselines.end(), EvalMethod::Kascade) == spec.baselines.end(),
                  "{}: baselines.methods = \"kascade\" is not a baseline (Kascade's runs come from [[schedules]])",
                  file.string());
    for (EvalMethod m : spec.baselines) {
        KASCADE_CHECK(!is_decode_only_method(m) || spec.phase == EvalPhase::Decode || !spec.perplexity,
                      "{}: baselines.methods = \"{}\" is a decode method: it needs test.phase = \"decode\" (or a "
                      "[task] table without [test]: task answers are decoded)",
                      file.string(), mode_name(m));
    }
}

/// Each method's own keys of [baselines]: refused without the method, required (the layer lists) with it.
void check_method_keys(TableReader& baselines, const fs::path& file, const SweepSpec& spec) {
    const auto has_method = [&](EvalMethod m) {
        return std::find(spec.baselines.begin(), spec.baselines.end(), m) != spec.baselines.end();
    };
    const auto method_key = [&](const std::string& key, EvalMethod m, bool required) {
        KASCADE_CHECK(has_method(m) || !baselines.has(key), "{}: baselines.{} applies to the {} method only",
                      file.string(), key, mode_name(m));
        KASCADE_CHECK(!required || !has_method(m) || baselines.has(key),
                      "{}: baselines.methods has \"{}\": it needs baselines.{} (a list of layers)", file.string(),
                      mode_name(m), key);
    };
    method_key("quest_page", EvalMethod::Quest, false);
    method_key("omnikv_filter_layers", EvalMethod::OmniKv, true);
    method_key("lessismore_selection_layers", EvalMethod::LessIsMore, true);
    method_key("lessismore_window_ratio", EvalMethod::LessIsMore, false);
}

/// [baselines]: the methods compared with Kascade and their own settings. Reads spec.phase and spec.perplexity.
void read_baselines_table(const toml::table& root, const fs::path& file, SweepSpec& spec) {
    TableReader baselines(
        file, "baselines", subtable(root, file, "baselines", false),
        {"methods", "quest_page", "omnikv_filter_layers", "lessismore_selection_layers", "lessismore_window_ratio"});
    spec.baselines = baselines.modes<EvalMethod>("methods", {EvalMethod::Dense});
    check_baseline_methods(file, spec);
    check_method_keys(baselines, file, spec);
    spec.quest_page = baselines.int_integer("quest_page", EvalParams{}.quest_page, param_range::kQuestPage);
    for (double l : baselines.numbers("omnikv_filter_layers", {}, param_range::kLayer, true))
        spec.omnikv_filter_layers.push_back(static_cast<int>(l));
    for (double l : baselines.numbers("lessismore_selection_layers", {}, param_range::kLayer, true))
        spec.lessismore_selection_layers.push_back(static_cast<int>(l));
    const std::vector<double> ratio =
        baselines.numbers("lessismore_window_ratio", {EvalParams{}.window_ratio}, param_range::kWindowRatio, false);
    KASCADE_CHECK(ratio.size() == 1, "{}: baselines.lessismore_window_ratio must be one number, found a list of {}",
                  file.string(), ratio.size());
    spec.lessismore_window_ratio = ratio.front();
}

/// [slurm]: the resources `kascade sweep --slurm` asks for.
SlurmSettings read_slurm_table(const toml::table& root, const fs::path& file) {
    TableReader slurm(file, "slurm", subtable(root, file, "slurm", false),
                      {"partition", "time", "cpus_per_task", "mem", "array_throttle", "sbatch_args"});
    SlurmSettings settings;
    settings.partition = slurm.string("partition", "");
    settings.time = slurm.string("time", "");
    settings.cpus_per_task = slurm.int_integer("cpus_per_task", 0, kCpusPerTaskRange);
    settings.mem = slurm.string("mem", "");
    settings.array_throttle = slurm.int_integer("array_throttle", 0, kArrayThrottleRange);
    settings.sbatch_args = slurm.strings("sbatch_args");
    return settings;
}

/// The checks that span tables: the test range after (or clear of) the calibration range, every tile within every
/// ctx, and a decode window that holds the test tokens' tiles and Quest's pages. Places the test range where the
/// file leaves it out.
void check_across_tables(const fs::path& file, SweepSpec& spec) {
    const int64_t calib_end = spec.calib_offset + spec.calib_tokens;
    if (spec.test_offset < 0) spec.test_offset = calib_end;
    KASCADE_CHECK(
        !spec.perplexity || spec.test_offset + spec.test_tokens <= spec.calib_offset || spec.test_offset >= calib_end,
        "{}: test tokens [{}, {}) overlap the calibration tokens [{}, {})", file.string(), spec.test_offset,
        spec.test_offset + spec.test_tokens, spec.calib_offset, calib_end);
    for (int t : spec.tile)
        for (int c : spec.ctx)
            KASCADE_CHECK(t <= c, "{}: grid.tile = {} is larger than grid.ctx = {}", file.string(), t, c);
    if (spec.phase != EvalPhase::Decode) return;
    const int64_t window = static_cast<int64_t>(spec.prompt_tokens) + spec.decode_tokens;
    KASCADE_CHECK(spec.test_tokens >= window,
                  "{}: test.tokens = {} holds no decode window of test.prompt_tokens + test.decode_tokens = {} "
                  "tokens",
                  file.string(), spec.test_tokens, window);
    for (int t : spec.tile)
        KASCADE_CHECK(t <= window, "{}: grid.tile = {} is larger than test.prompt_tokens + test.decode_tokens = {}",
                      file.string(), t, window);
    KASCADE_CHECK(spec.quest_page <= window,
                  "{}: baselines.quest_page = {} is larger than test.prompt_tokens + test.decode_tokens = {}",
                  file.string(), spec.quest_page, window);
}

}  // namespace

SweepSpec load_sweep_spec(const fs::path& file) {
    const toml::table root = parse_sweep_file(file);
    SweepSpec spec;
    spec.file = file;
    // Unknown top-level keys are refused before any table is read.
    const TableReader top(
        file, "(top level)", &root,
        {"model", "text", "calibration", "test", "grid", "schedules", "baselines", "task", "datasets", "slurm"});
    // The order of the tables is the order their errors are reported in; [baselines] reads the phase of [test] and
    // whether [task] or [datasets] leave perplexity evals.
    read_model_table(root, file, spec);
    read_text_table(root, file, spec);
    read_calibration_table(root, file, spec);
    read_test_table(root, file, spec);
    const ScheduleMeasures measures = read_grid_table(root, file, spec);
    read_schedule_tables(root, file, measures, spec);
    read_task_tables(root, file, spec);
    read_baselines_table(root, file, spec);
    spec.slurm = read_slurm_table(root, file);
    check_across_tables(file, spec);
    return spec;
}

TaskParams SweepTaskSpec::params(TaskKind kind) const {
    TaskParams p;
    p.task = kind;
    p.seed = seed;
    p.lengths = lengths;
    p.depths_pct = depths_pct;
    p.samples = samples;
    p.haystack = haystack;
    p.max_new_tokens = max_new_tokens;
    p.batch = batch;
    p.method.method = EvalMethod::Dense;  // EvalParams's default is kascade
    return p;
}

DatasetTaskParams SweepDatasetSpec::params(const std::string& name) const {
    DatasetTaskParams p;
    p.dataset = fs::path(dir) / (name + ".jsonl");
    p.dataset_name = name;
    p.prompt_file = prompt_file;
    p.maxlen_file = maxlen_file;
    p.max_new_tokens = max_new_tokens;
    p.max_length = max_length;
    p.metric = metric;
    p.chat_template = chat_template;
    p.limit = limit;
    p.batch = batch;
    p.method.method = EvalMethod::Dense;  // EvalParams's default is kascade
    return p;
}

}  // namespace kascade
