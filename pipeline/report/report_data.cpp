#include "pipeline/report/report_data.h"

#include <cmath>
#include <limits>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/store/h5_file.h"
#include "io/store/results_db.h"
#include "io/store/table_format.h"
#include "pipeline/report/report_rows.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

// The similarity artifact format this report reads (pipeline/stages/similarity_stage.cpp writes version 1).
constexpr std::int64_t kSimilarityFormatVersion = 1;

using namespace report_rows;

void load_runs(QueryDb& db, ReportData& data) {
    const std::string sql =
        "SELECT id, method, policy, threshold, max_reuse_dist, n_anchors, anchor_list, metric, aggregation, "
        "head_map, tile, topk_tiles, topk_pct, k_min, key_granularity, k_rule, round_k, pooling, page_size, ctx, "
        "phase, matmul, kv_dtype, prompt_tokens, decode_tokens, token_offset, "
        "n_tokens, ppl_dense, ppl_sparse, "
        "degradation_pct, density, tokens_per_s, model_path, model_hash, text_path, text_hash, schedule_id, "
        "similarity_key, git_commit FROM runs_flat" +
        (data.where.empty() ? std::string() : " WHERE (" + data.where + ")") + " ORDER BY id";
    const QueryResult result = db.select(sql, fmt::format("--where \"{}\"", data.where));
    for (size_t i = 0; i < result.rows.size(); ++i) {
        const Row r(result, i);
        ReportRun run;
        run.id = *opt_int(r["id"]);
        run.method = r.mode<EvalMethod>("method");
        run.policy = r.opt_mode<SchedulePolicy>("policy");
        run.threshold = opt_real(r["threshold"]);
        run.max_reuse_dist = opt_int(r["max_reuse_dist"]);
        run.n_anchors = opt_int(r["n_anchors"]);
        run.anchor_list = text(r["anchor_list"]);
        run.metric = r.opt_mode<SimilarityMetric>("metric");
        run.aggregation = r.opt_mode<SimilarityAggregation>("aggregation");
        run.head_map = r.opt_mode<HeadMapMode>("head_map");
        run.tile = opt_int(r["tile"]);
        run.topk_tiles = opt_int(r["topk_tiles"]);
        run.topk_pct = opt_real(r["topk_pct"]);
        run.k_min = opt_int(r["k_min"]);
        run.key_granularity = r.opt_mode<KeyGranularity>("key_granularity");
        run.k_rule = r.opt_mode<KRule>("k_rule");
        run.round_k = opt_int(r["round_k"]);
        run.pooling = r.opt_mode<Pooling>("pooling");
        run.page_size = opt_int(r["page_size"]);
        run.ctx = opt_int(r["ctx"]).value_or(0);
        run.phase = r.mode<EvalPhase>("phase");
        run.matmul = r.mode<MatmulPrecision>("matmul");
        run.kv_dtype = r.mode<KvDType>("kv_dtype");
        run.prompt_tokens = opt_int(r["prompt_tokens"]);
        run.decode_tokens = opt_int(r["decode_tokens"]);
        run.token_offset = opt_int(r["token_offset"]).value_or(0);
        run.n_tokens = opt_int(r["n_tokens"]).value_or(0);
        run.ppl_dense = real_or_nan(r["ppl_dense"]);
        run.ppl_sparse = real_or_nan(r["ppl_sparse"]);
        run.degradation_pct = real_or_nan(r["degradation_pct"]);
        run.density = real_or_nan(r["density"]);
        run.tokens_per_s = opt_real(r["tokens_per_s"]);
        run.model_path = text(r["model_path"]);
        run.model_hash = text(r["model_hash"]);
        run.text_path = text(r["text_path"]);
        run.text_hash = text(r["text_hash"]);
        run.schedule_id = opt_int(r["schedule_id"]);
        run.similarity_key = text(r["similarity_key"]);
        run.git_commit = text(r["git_commit"]);
        data.runs.push_back(std::move(run));
    }
    if (data.runs.empty()) return;

    // The calibration text of each similarity: a schedule may be evaluated on another text than it was made on.
    const QueryResult calibration = db.select(
        "SELECT s.artifact_key AS key, t.path AS path FROM similarities s JOIN captures c ON c.artifact_key = "
        "s.capture_key JOIN texts t ON t.id = c.text_id");
    std::map<std::string, std::string> calib_text;
    for (size_t i = 0; i < calibration.rows.size(); ++i) {
        const Row r(calibration, i);
        calib_text[text(r["key"])] = text(r["path"]);
    }
    for (ReportRun& run : data.runs) {
        if (const auto it = calib_text.find(run.similarity_key); it != calib_text.end())
            run.calib_text_path = it->second;
    }

    std::map<std::int64_t, ReportRun*> by_id;
    for (ReportRun& run : data.runs) by_id[run.id] = &run;
    std::vector<std::int64_t> ids;
    for (const auto& [id, run] : by_id) ids.push_back(id);
    const QueryResult layers =
        db.select("SELECT run_id, layer, role, anchor_layer, density, out_rel_error FROM run_layers WHERE run_id IN (" +
                  id_list(ids) + ") ORDER BY run_id, layer");
    for (size_t i = 0; i < layers.rows.size(); ++i) {
        const Row r(layers, i);
        ReportRunLayer layer;
        layer.layer = static_cast<int>(*opt_int(r["layer"]));
        layer.role = r.mode<RunLayerRole>("role");
        if (auto a = opt_int(r["anchor_layer"])) layer.anchor_layer = static_cast<int>(*a);
        layer.density = real_or_nan(r["density"]);
        layer.out_rel_error = opt_real(r["out_rel_error"]);
        by_id.at(*opt_int(r["run_id"]))->layers.push_back(layer);
    }
}

void load_schedules(QueryDb& db, ReportData& data) {
    std::set<std::int64_t> ids;
    for (const ReportRun& run : data.runs) {
        if (run.schedule_id) ids.insert(*run.schedule_id);
    }
    if (ids.empty()) return;
    const QueryResult schedules = db.select(
        "SELECT id, key, similarity_key, policy, threshold, max_reuse_dist, n_anchors, anchor_list, metric, "
        "aggregation, head_map, n_layers, n_anchor_layers, n_reuse_layers FROM schedules WHERE id IN (" +
        id_list(ids) + ")");
    for (size_t i = 0; i < schedules.rows.size(); ++i) {
        const Row r(schedules, i);
        ReportSchedule s;
        s.id = *opt_int(r["id"]);
        s.key = text(r["key"]);
        s.similarity_key = text(r["similarity_key"]);
        s.policy = r.mode<SchedulePolicy>("policy");
        s.threshold = opt_real(r["threshold"]);
        s.max_reuse_dist = opt_int(r["max_reuse_dist"]);
        s.n_anchors = opt_int(r["n_anchors"]);
        s.anchor_list = text(r["anchor_list"]);
        s.metric = r.opt_mode<SimilarityMetric>("metric");
        s.aggregation = r.opt_mode<SimilarityAggregation>("aggregation");
        s.head_map = r.mode<HeadMapMode>("head_map");
        s.n_layers = static_cast<int>(opt_int(r["n_layers"]).value_or(0));
        s.n_anchor_layers = static_cast<int>(opt_int(r["n_anchor_layers"]).value_or(0));
        s.n_reuse_layers = static_cast<int>(opt_int(r["n_reuse_layers"]).value_or(0));
        data.schedules[s.id] = std::move(s);
    }
    const QueryResult layers = db.select(
        "SELECT schedule_id, layer, role, anchor_layer, head_map_json, similarity FROM schedule_layers "
        "WHERE schedule_id IN (" +
        id_list(ids) + ") ORDER BY schedule_id, layer");
    for (size_t i = 0; i < layers.rows.size(); ++i) {
        const Row r(layers, i);
        ReportScheduleLayer layer;
        layer.layer = static_cast<int>(*opt_int(r["layer"]));
        layer.role = r.mode<LayerRole>("role");
        if (auto a = opt_int(r["anchor_layer"])) layer.anchor_layer = static_cast<int>(*a);
        const std::string head_map = text(r["head_map_json"]);
        if (!head_map.empty()) layer.head_map = nlohmann::json::parse(head_map).get<std::vector<int>>();
        layer.similarity = opt_real(r["similarity"]);
        data.schedules.at(*opt_int(r["schedule_id"])).layers.push_back(std::move(layer));
    }
}

void load_similarities(QueryDb& db, ReportData& data) {
    std::set<std::string> keys;
    for (const auto& [id, s] : data.schedules) {
        if (!s.similarity_key.empty()) keys.insert(s.similarity_key);
    }
    for (const std::string& key : keys) {
        const QueryResult rows = db.select(
            "SELECT a.path AS path, s.topk_tiles AS topk_tiles, s.topk_pct AS topk_pct, s.k_min AS k_min, "
            "c.ctx AS ctx, c.tile AS tile, c.token_offset AS token_offset, c.n_tokens AS n_tokens, "
            "m.path AS model_path, t.path AS text_path FROM similarities s "
            "JOIN artifacts a ON a.key = s.artifact_key JOIN captures c ON c.artifact_key = s.capture_key "
            "JOIN models m ON m.id = c.model_id JOIN texts t ON t.id = c.text_id WHERE s.artifact_key = " +
            sql_quote(key));
        if (rows.rows.empty()) {
            data.notes.push_back(fmt::format("similarity {}: not in the database (no heatmap)", key));
            continue;
        }
        const Row r(rows, 0);
        ReportSimilarity sim;
        sim.key = key;
        sim.path = text(r["path"]);
        sim.topk_tiles = opt_int(r["topk_tiles"]);
        sim.topk_pct = opt_real(r["topk_pct"]);
        sim.k_min = opt_int(r["k_min"]);
        sim.ctx = opt_int(r["ctx"]).value_or(0);
        sim.tile = opt_int(r["tile"]).value_or(0);
        sim.calib_offset = opt_int(r["token_offset"]).value_or(0);
        sim.calib_tokens = opt_int(r["n_tokens"]).value_or(0);
        sim.model_path = text(r["model_path"]);
        sim.text_path = text(r["text_path"]);
        const fs::path file = data.results_dir / sim.path;
        if (!fs::exists(file)) {
            data.notes.push_back(
                fmt::format("similarity {}: file {} is gone (no heatmap; a sweep recomputes it)", key, file.string()));
            continue;
        }
        const H5ArtifactReader reader(file, kSimilarityFormatVersion, kSimilarityFormatVersion, "similarity");
        const H5Group& root = reader.root();
        sim.git_commit = root.attr_string("git_commit");
        sim.n_layers = static_cast<int>(root.attr_int("n_layers"));
        sim.n_kv_heads = static_cast<int>(root.attr_int("n_kv_heads"));
        sim.n_windows = root.attr_int("n_windows");
        const size_t expected = static_cast<size_t>(sim.n_layers) * sim.n_layers * sim.n_kv_heads * sim.n_kv_heads;
        for (const char* measure : {"recall_mean", "recall_min", "jaccard_mean", "jaccard_min"}) {
            if (!root.has(measure)) continue;
            std::vector<float> values = root.open_dataset(measure).read<float>();
            KASCADE_CHECK(values.size() == expected, "{}: /{} has {} values, expected L*L*Hkv*Hkv = {}", file.string(),
                          measure, values.size(), expected);
            sim.measures[measure] = std::move(values);
        }
        if (root.has("importance")) sim.importance = root.open_dataset("importance").read<float>();
        data.similarities[key] = std::move(sim);
    }
}

void load_kernel_bench(QueryDb& db, ReportData& data) {
    const QueryResult rows = db.select(
        "SELECT name, shape_json, threads, time_ms, speedup, git_commit, machine FROM kernel_bench "
        "ORDER BY id");
    for (size_t i = 0; i < rows.rows.size(); ++i) {
        const Row r(rows, i);
        ReportKernelBench b;
        b.name = text(r["name"]);
        b.shape_json = text(r["shape_json"]);
        b.threads = opt_int(r["threads"]).value_or(0);
        b.time_ms = real_or_nan(r["time_ms"]);
        b.speedup = opt_real(r["speedup"]);
        b.git_commit = text(r["git_commit"]);
        b.machine = text(r["machine"]);
        data.kernel_bench.push_back(std::move(b));
    }
}

}  // namespace

float ReportSimilarity::at(const std::string& measure, int b, int a, int hb, int ha) const {
    const std::vector<float>& v = measures.at(measure);
    const size_t h = static_cast<size_t>(n_kv_heads);
    return v[((static_cast<size_t>(b) * n_layers + a) * h + hb) * h + ha];
}

double ReportSimilarity::layer_pair(const std::string& measure, int b, int a) const {
    if (a >= b) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (int hb = 0; hb < n_kv_heads; ++hb) {
        double best = -std::numeric_limits<double>::infinity();
        for (int ha = 0; ha < n_kv_heads; ++ha) {
            const float v = at(measure, b, a, hb, ha);
            if (!std::isnan(v)) best = std::max(best, static_cast<double>(v));
        }
        sum += best;
    }
    return sum / n_kv_heads;
}

ReportData load_report_data(const fs::path& results_dir, const ReportSelection& selection) {
    const fs::path db_file = results_dir / ResultsDb::kFileName;
    KASCADE_CHECK(fs::exists(db_file), "no results database {} (run `kascade sweep FILE --results {}` first)",
                  db_file.string(), results_dir.string());
    QueryDb db(db_file);
    ReportData data;
    data.results_dir = results_dir;
    data.where = selection.where;
    data.task_where = selection.task_where;
    data.dataset_where = selection.dataset_where;
    // A condition names what the reader asked for: the kinds without one are left out; with none, the report shows
    // everything the folder holds.
    const bool none_given = selection.where.empty() && selection.task_where.empty() && selection.dataset_where.empty();
    if (none_given || !selection.where.empty()) load_runs(db, data);
    if (none_given || !selection.task_where.empty()) data.task_runs = load_report_task_runs(db, selection.task_where);
    if (none_given || !selection.dataset_where.empty())
        data.dataset_runs = load_report_dataset_runs(db, selection.dataset_where);
    // A condition that matches nothing is most likely a mistake in it: say which one, and write nothing.
    KASCADE_CHECK(selection.where.empty() || !data.runs.empty(),
                  "--where \"{}\" matches no run in {}; no report written (`kascade query runs --where ...` lists "
                  "what there is)",
                  selection.where, db_file.string());
    KASCADE_CHECK(selection.task_where.empty() || !data.task_runs.empty(),
                  "--task-where \"{}\" matches no task sample in {}; no report written (`kascade query tasks "
                  "--where ...` lists what there is)",
                  selection.task_where, db_file.string());
    KASCADE_CHECK(selection.dataset_where.empty() || !data.dataset_runs.empty(),
                  "--dataset-where \"{}\" matches no dataset sample in {}; no report written (`kascade query "
                  "datasets --where ...` lists what there is)",
                  selection.dataset_where, db_file.string());
    KASCADE_CHECK(!data.runs.empty() || !data.task_runs.empty() || !data.dataset_runs.empty(),
                  "{} holds no run and no task run; no report written (`kascade sweep`, `kascade eval` and `kascade "
                  "task` store them)",
                  db_file.string());
    load_schedules(db, data);
    load_similarities(db, data);
    // Kernel speed-ups go with the perplexity runs' figures (as before task runs existed), not with a task report.
    if (!data.runs.empty()) load_kernel_bench(db, data);
    return data;
}

std::string short_name(const std::string& path) {
    fs::path p(path);
    if (!p.has_filename()) p = p.parent_path();
    // llama2.c checkpoints are named by their file; Hugging Face models by their folder; texts keep their suffix.
    const std::string name = p.extension() == ".bin" ? p.stem().string() : p.filename().string();
    return name.empty() ? path : name;
}

}  // namespace kascade
