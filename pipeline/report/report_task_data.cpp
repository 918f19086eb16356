#include "pipeline/report/report_task_data.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "io/store/table_format.h"
#include "pipeline/report/report_data.h"
#include "pipeline/report/report_rows.h"

namespace kascade {

using namespace report_rows;

namespace {

/// Mean of `value` over the samples, per length (key) or all together (key 0).
template <class Value>
std::map<std::int64_t, double> sample_means(const std::vector<ReportTaskSample>& samples, bool by_length, Value value) {
    std::map<std::int64_t, std::pair<double, int>> sums;
    for (const ReportTaskSample& s : samples) {
        auto& [sum, n] = sums[by_length ? s.length : 0];
        sum += value(s);
        ++n;
    }
    std::map<std::int64_t, double> means;
    for (const auto& [key, sum_n] : sums) means[key] = sum_n.first / sum_n.second;
    return means;
}

/// The schedule settings of the Kascade task runs: task_samples_flat carries the policy, anchor count and list,
/// not the threshold policy's parameters.
void load_schedule_settings(QueryDb& db, std::vector<ReportTaskRun>& runs) {
    std::set<std::int64_t> ids;
    for (const ReportTaskRun& r : runs) {
        if (r.schedule_id) ids.insert(*r.schedule_id);
    }
    if (ids.empty()) return;
    const QueryResult rows =
        db.select("SELECT id, threshold, max_reuse_dist FROM schedules WHERE id IN (" + id_list(ids) + ")");
    for (size_t i = 0; i < rows.rows.size(); ++i) {
        const Row row(rows, i);
        for (ReportTaskRun& r : runs) {
            if (r.schedule_id != opt_int(row["id"])) continue;
            r.threshold = opt_real(row["threshold"]);
            r.max_reuse_dist = opt_int(row["max_reuse_dist"]);
        }
    }
}

}  // namespace

double ReportTaskRun::mean_score() const {
    return sample_means(samples, false, [](const ReportTaskSample& s) { return s.score; }).at(0);
}
double ReportTaskRun::mean_density() const {
    return sample_means(samples, false, [](const ReportTaskSample& s) { return s.density; }).at(0);
}
std::map<std::int64_t, double> ReportTaskRun::score_by_length() const {
    return sample_means(samples, true, [](const ReportTaskSample& s) { return s.score; });
}
std::map<std::int64_t, double> ReportTaskRun::density_by_length() const {
    return sample_means(samples, true, [](const ReportTaskSample& s) { return s.density; });
}

std::string task_method_text(const ReportTaskRun& r) {
    if (r.method != EvalMethod::Kascade || !r.policy) return std::string(mode_name(r.method));
    switch (*r.policy) {
        case SchedulePolicy::Dp:
            return fmt::format("kascade dp anchors={}", r.n_anchors.value_or(0));
        case SchedulePolicy::Threshold:
            return fmt::format("kascade threshold {:g} max dist {}", r.threshold.value_or(0),
                               r.max_reuse_dist.value_or(0));
        case SchedulePolicy::Fixed:
            return "kascade fixed anchors " + r.anchor_list;
    }
    return "kascade";
}

std::string task_budget_text(const ReportTaskRun& r) {
    if (r.topk_pct) return fmt::format("topk {:g}%", *r.topk_pct);
    if (r.topk_tiles && r.page_size) return fmt::format("topk {} pages of {}", *r.topk_tiles, *r.page_size);
    if (r.topk_tiles) return fmt::format("topk {} tiles of {}", *r.topk_tiles, r.tile.value_or(0));
    return {};
}

std::string task_run_label(const ReportTaskRun& r) {
    if (r.method == EvalMethod::Dense) return "dense";
    const std::string budget = task_budget_text(r);
    return fmt::format("{}{} ({} prefill)", task_method_text(r), budget.empty() ? "" : " " + budget,
                       mode_name(r.prefill));
}

std::string task_haystack_name(const ReportTaskRun& r) {
    return r.haystack_path.empty() ? std::string("filler") : short_name(r.haystack_path);
}

namespace {

/// The columns task_samples_flat and dataset_samples_flat share: a run's method configuration and its model.
constexpr const char* kRunColumns =
    "task_run_id, metric, max_new_tokens, prefill, method, schedule_id, policy, n_anchors, anchor_list, tile, "
    "topk_tiles, topk_pct, k_min, k_rule, round_k, key_granularity, pooling, page_size, score, density, model_path, "
    "model_hash, git_commit";

/// A new run from the shared columns of its first sample row.
ReportTaskRun run_of(const Row& r) {
    ReportTaskRun run;
    run.id = *opt_int(r["task_run_id"]);
    run.metric = text(r["metric"]);
    run.max_new_tokens = opt_int(r["max_new_tokens"]).value_or(0);
    run.prefill = r.mode<TaskPrefill>("prefill");
    run.method = r.mode<EvalMethod>("method");
    run.schedule_id = opt_int(r["schedule_id"]);
    run.policy = r.opt_mode<SchedulePolicy>("policy");
    run.n_anchors = opt_int(r["n_anchors"]);
    run.anchor_list = text(r["anchor_list"]);
    run.tile = opt_int(r["tile"]);
    run.topk_tiles = opt_int(r["topk_tiles"]);
    run.topk_pct = opt_real(r["topk_pct"]);
    run.k_min = opt_int(r["k_min"]);
    run.k_rule = r.opt_mode<KRule>("k_rule");
    run.round_k = opt_int(r["round_k"]);
    run.key_granularity = r.opt_mode<KeyGranularity>("key_granularity");
    run.pooling = r.opt_mode<Pooling>("pooling");
    run.page_size = opt_int(r["page_size"]);
    run.model_path = text(r["model_path"]);
    run.model_hash = text(r["model_hash"]);
    run.git_commit = text(r["git_commit"]);
    return run;
}

/// Rows of `view` matching `where`, one per sample, grouped into runs: `start` fills a run's own columns from its
/// first row, `sample` a sample's.
template <class StartRun, class ReadSample>
std::vector<ReportTaskRun> load_runs_of_view(QueryDb& db, const std::string& view, const std::string& columns,
                                             const std::string& where, const std::string& option,
                                             const std::string& order, StartRun start, ReadSample sample) {
    const std::string sql = fmt::format("SELECT {}, {} FROM {}{} ORDER BY task_run_id, {}", kRunColumns, columns, view,
                                        where.empty() ? std::string() : " WHERE (" + where + ")", order);
    const QueryResult result = db.select(sql, fmt::format("{} \"{}\"", option, where));
    std::vector<ReportTaskRun> runs;
    for (size_t i = 0; i < result.rows.size(); ++i) {
        const Row r(result, i);
        if (runs.empty() || runs.back().id != *opt_int(r["task_run_id"])) {
            runs.push_back(run_of(r));
            start(r, runs.back());
        }
        ReportTaskSample s;
        s.score = real_or_nan(r["score"]);
        s.density = real_or_nan(r["density"]);
        sample(r, s);
        runs.back().samples.push_back(s);
    }
    load_schedule_settings(db, runs);
    return runs;
}

}  // namespace

std::vector<ReportTaskRun> load_report_task_runs(QueryDb& db, const std::string& task_where) {
    return load_runs_of_view(
        db, "task_samples_flat", "task, seed, haystack_path, length, depth_pct, sample_index", task_where,
        "--task-where", "length, depth_pct, sample_index",
        [](const Row& r, ReportTaskRun& run) {
            run.task = text(r["task"]);
            run.seed = opt_int(r["seed"]).value_or(0);
            run.haystack_path = text(r["haystack_path"]);
        },
        [](const Row& r, ReportTaskSample& s) {
            s.length = opt_int(r["length"]).value_or(0);
            s.depth_pct = real_or_nan(r["depth_pct"]);
            s.sample_index = opt_int(r["sample_index"]).value_or(0);
        });
}

std::vector<ReportTaskRun> load_report_dataset_runs(QueryDb& db, const std::string& dataset_where) {
    return load_runs_of_view(
        db, "dataset_samples_flat",
        "dataset_name, max_length, chat_template, dataset_path, prompt_tokens, cut_at, sample_index", dataset_where,
        "--dataset-where", "sample_index",
        [](const Row& r, ReportTaskRun& run) {
            run.task = "dataset";
            run.dataset_name = text(r["dataset_name"]);
            run.max_length = opt_int(r["max_length"]);
            run.chat_template = text(r["chat_template"]);
            run.haystack_path = text(r["dataset_path"]);
        },
        [](const Row& r, ReportTaskSample& s) {
            s.length = opt_int(r["prompt_tokens"]).value_or(0);
            s.depth_pct = std::nan("");
            s.cut = opt_int(r["cut_at"]).has_value();
            s.sample_index = opt_int(r["sample_index"]).value_or(0);
        });
}

}  // namespace kascade
