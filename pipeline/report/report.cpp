#include "pipeline/report/report.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "build_info.h"
#include "io/file_util.h"
#include "io/store/results_db.h"
#include "pipeline/report/gnuplot.h"
#include "pipeline/report/report_figures.h"
#include "pipeline/report/report_rows.h"
#include "pipeline/report/report_task_figures.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

using report_rows::name_or_empty;

/// The page names its generator; a folder whose index.html does not is not a report and is never replaced.
constexpr std::string_view kGeneratorMeta = "<meta name=\"generator\" content=\"kascade report\">";

std::string html_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

struct SectionText {
    ReportSection section;
    const char* id;
    const char* heading;
    const char* intro;
};

constexpr SectionText kSections[] = {
    {ReportSection::Pareto, "pareto", "Accuracy vs attention kept",
     "Perplexity degradation against density for every run, per model, text and context length, with each "
     "method's Pareto front."},
    {ReportSection::TopK, "topk", "Perplexity vs top-k budget",
     "How perplexity approaches dense as the key budget grows, per method and schedule setting."},
    {ReportSection::Similarity, "similarity", "Layer similarity",
     "Per similarity artifact (one per capture and top-k): how well each earlier layer's top-k tiles serve each later "
     "layer, and the per-layer importance."},
    {ReportSection::Schedules, "schedules", "Schedules",
     "Per schedule: which layers are dense, anchors or reuse layers, the anchor each reuse layer follows, and "
     "which anchor KV head each KV head reads."},
    {ReportSection::Runs, "runs", "Per-layer density and error",
     "Per sparse run: how much each layer attends and how far its attention output is from dense."},
    {ReportSection::Kernels, "kernels", "Kernel speed",
     "From the kernel_bench table (all rows, whatever the run selection): speed-up of each layer type over dense "
     "attention against context length."},
    {ReportSection::TaskHeatmaps, "task-heatmaps", "Long-context tasks: needle heatmaps",
     "Per model, task and haystack: how often each method configuration answers correctly, by where the needle is "
     "and how long the prompt is."},
    {ReportSection::TaskDensity, "task-density", "Long-context tasks: score vs density",
     "Per model, task and haystack: what each method's answers keep of dense attention's, against the attention it "
     "keeps."},
    {ReportSection::DatasetDensity, "dataset-density", "Datasets: score vs density",
     "Per model and chat template, one panel per dataset: each method's score by the dataset's metric against the "
     "attention it keeps."},
};

std::string runs_table(const ReportData& data, const std::set<std::int64_t>& runs_with_figure) {
    std::string out =
        "<table>\n<tr><th>run</th><th>method</th><th>setting</th><th>top-k</th><th>tile</th><th>ctx</th>"
        "<th>ppl dense</th><th>ppl sparse</th><th>degradation %</th><th>density</th><th>tokens/s</th>"
        "<th>commit</th></tr>\n";
    for (const ReportRun& r : data.runs) {
        std::string setting;
        if (r.policy == SchedulePolicy::Threshold)
            setting = fmt::format("threshold {:g}, max dist {}", r.threshold.value_or(0), r.max_reuse_dist.value_or(0));
        else if (r.policy == SchedulePolicy::Dp)
            setting = fmt::format("dp K={}", r.n_anchors.value_or(0));
        else if (r.policy == SchedulePolicy::Fixed)
            setting = "fixed " + r.anchor_list;
        if (r.head_map && r.head_map != HeadMapMode::Argmax) setting += ", heads " + name_or_empty(r.head_map);
        if (r.matmul != MatmulPrecision::Exact) setting += fmt::format(", matmul {}", mode_name(r.matmul));
        if (r.kv_dtype != KvDType::F32) setting += fmt::format(", KV cache {}", mode_name(r.kv_dtype));
        if (!r.calib_text_path.empty() && r.calib_text_path != r.text_path)
            setting += ", calibrated on " + short_name(r.calib_text_path);
        if (r.metric && (r.metric != SimilarityMetric::Recall || r.aggregation != SimilarityAggregation::Mean))
            setting += ", " + name_or_empty(r.metric) + " " + name_or_empty(r.aggregation);
        const std::string topk = r.topk_tiles && r.page_size
                                     ? fmt::format("{} pages of {}", *r.topk_tiles, *r.page_size)
                                 : r.topk_tiles ? fmt::format("{} tiles", *r.topk_tiles)
                                 : r.topk_pct   ? fmt::format("{:g}% (k_min {})", *r.topk_pct, r.k_min.value_or(0))
                                                : "";
        const std::string id =
            runs_with_figure.count(r.id) ? fmt::format("<a href=\"#run-{0}\">{0}</a>", r.id) : std::to_string(r.id);
        out += fmt::format(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td>"
            "<td>{:+.3f}</td><td>{:.4f}</td><td>{}</td><td>{}</td></tr>\n",
            id, html_escape(mode_name(r.method)), html_escape(setting), html_escape(topk),
            r.tile && r.method != EvalMethod::Dense ? std::to_string(*r.tile) : "", r.ctx, r.ppl_dense, r.ppl_sparse,
            r.degradation_pct, r.density, r.tokens_per_s ? fmt::format("{:.0f}", *r.tokens_per_s) : "",
            html_escape(r.git_commit));
    }
    return out + "</table>\n";
}

/// One row per task run: its configuration, how many samples are selected, their mean score overall and per prompt
/// length (a column per length of the selection), and their mean density.
std::string task_runs_table(const ReportData& data) {
    std::set<std::int64_t> lengths;
    for (const ReportTaskRun& r : data.task_runs) {
        for (const ReportTaskSample& s : r.samples) lengths.insert(s.length);
    }
    std::string out =
        "<table id=\"task-runs\">\n<tr><th>task run</th><th>task</th><th>method</th><th>budget</th><th>prefill</th>"
        "<th>model</th><th>haystack</th><th>samples</th><th>mean score</th>";
    for (std::int64_t length : lengths) out += fmt::format("<th>score at {} tokens</th>", length);
    out += "<th>density</th><th>commit</th></tr>\n";
    for (const ReportTaskRun& r : data.task_runs) {
        std::string budget = task_budget_text(r);
        if (r.topk_pct && r.k_min) budget += fmt::format(" (k_min {})", *r.k_min);
        out += fmt::format(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{:.4f}</td>",
            r.id, html_escape(r.task), html_escape(task_method_text(r)), html_escape(budget),
            html_escape(mode_name(r.prefill)), html_escape(short_name(r.model_path)),
            html_escape(task_haystack_name(r)), r.samples.size(), r.mean_score());
        const std::map<std::int64_t, double> by_length = r.score_by_length();
        for (std::int64_t length : lengths) {
            const auto it = by_length.find(length);
            out += it == by_length.end() ? "<td></td>" : fmt::format("<td>{:.4f}</td>", it->second);
        }
        out += fmt::format("<td>{:.4f}</td><td>{}</td></tr>\n", r.mean_density(), html_escape(r.git_commit));
    }
    return out + "</table>\n";
}

/// The cell of a mean score or density: 4 decimals, as `kascade query` rounds them.
std::string mean_cell(double value) {
    return fmt::format("<td>{:.4f}</td>", value);
}

/// One row per method configuration, one column per dataset: the mean score of the configuration's run on it (the
/// layout of LongBench's tables), and the mean over the datasets when the configuration ran every one of them. Runs
/// of one configuration on the same dataset (e.g. another max_new_tokens) get a row of their own.
std::string dataset_scores_table(const ReportData& data) {
    struct ScoreRow {
        std::string model, method, budget, prefill, max_length;
        std::map<std::string, double> score;  ///< dataset name -> mean score
    };
    std::set<std::string> datasets;
    std::vector<ScoreRow> rows;
    for (const ReportTaskRun& r : data.dataset_runs) {
        datasets.insert(r.dataset_name);
        ScoreRow key{short_name(r.model_path),
                     task_method_text(r),
                     task_budget_text(r),
                     r.method == EvalMethod::Dense ? "" : std::string(mode_name(r.prefill)),
                     r.max_length ? std::to_string(*r.max_length) : "",
                     {}};
        auto row = std::find_if(rows.begin(), rows.end(), [&](const ScoreRow& o) {
            return std::tie(o.model, o.method, o.budget, o.prefill, o.max_length) ==
                       std::tie(key.model, key.method, key.budget, key.prefill, key.max_length) &&
                   !o.score.count(r.dataset_name);
        });
        if (row == rows.end()) row = rows.insert(rows.end(), key);
        row->score[r.dataset_name] = r.mean_score();
    }
    std::string out =
        "<table id=\"dataset-scores\">\n<tr><th>model</th><th>method</th><th>budget</th><th>prefill</th>"
        "<th>max length</th>";
    for (const std::string& d : datasets) out += "<th>" + html_escape(d) + "</th>";
    out += "<th>average</th></tr>\n";
    for (const ScoreRow& row : rows) {
        out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>", html_escape(row.model),
                           html_escape(row.method), html_escape(row.budget), html_escape(row.prefill), row.max_length);
        double sum = 0;
        for (const std::string& d : datasets) {
            const auto it = row.score.find(d);
            out += it == row.score.end() ? "<td></td>" : mean_cell(it->second);
            if (it != row.score.end()) sum += it->second;
        }
        out +=
            row.score.size() == datasets.size() ? mean_cell(sum / static_cast<double>(datasets.size())) : "<td></td>";
        out += "</tr>\n";
    }
    return out + "</table>\n";
}

/// One row per dataset run: its dataset, metric and configuration, how many samples are selected and how many of
/// them were cut in the middle, their mean score and density.
std::string dataset_runs_table(const ReportData& data) {
    std::string out =
        "<table id=\"dataset-runs\">\n<tr><th>task run</th><th>dataset</th><th>metric</th><th>method</th>"
        "<th>budget</th><th>prefill</th><th>model</th><th>file</th><th>max length</th><th>chat template</th>"
        "<th>samples</th><th>cut</th><th>mean score</th><th>density</th><th>commit</th></tr>\n";
    for (const ReportTaskRun& r : data.dataset_runs) {
        const auto cut =
            std::count_if(r.samples.begin(), r.samples.end(), [](const ReportTaskSample& s) { return s.cut; });
        out += fmt::format(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td><td>{}</td><td>{}</td>{}{}<td>{}</td></tr>\n",
            r.id, html_escape(r.dataset_name), html_escape(r.metric), html_escape(task_method_text(r)),
            html_escape(task_budget_text(r)), html_escape(mode_name(r.prefill)), html_escape(short_name(r.model_path)),
            html_escape(task_haystack_name(r)), r.max_length ? std::to_string(*r.max_length) : "",
            html_escape(r.chat_template), r.samples.size(), cut, mean_cell(r.mean_score()), mean_cell(r.mean_density()),
            html_escape(r.git_commit));
    }
    return out + "</table>\n";
}

/// "N task runs (S samples) of MODELS on WHATS, selected by <code>WHERE</code>": `what` names what each run ran (its
/// task, its dataset); `commits` collects the runs' commits.
template <class What>
std::string task_runs_selection(const std::vector<ReportTaskRun>& runs, const char* kind, const std::string& where,
                                const char* everything, std::set<std::string>& commits, What what) {
    std::set<std::string> models, whats;
    std::size_t samples = 0;
    for (const ReportTaskRun& r : runs) {
        commits.insert(r.git_commit);
        models.insert(short_name(r.model_path));
        whats.insert(what(r));
        samples += r.samples.size();
    }
    return fmt::format("{} {} ({} samples) of {} on {}, selected by <code>{}</code>", runs.size(), kind, samples,
                       html_escape(fmt::format("{}", fmt::join(models, ", "))),
                       html_escape(fmt::format("{}", fmt::join(whats, ", "))),
                       html_escape(where.empty() ? everything : where));
}

/// "N runs of M on T, selected by <code>...</code>" and the same for task and dataset runs: what the page shows.
std::string selection_text(const ReportData& data, std::set<std::string>& commits) {
    std::vector<std::string> parts;
    if (!data.runs.empty()) {
        std::set<std::string> models, texts;
        for (const ReportRun& r : data.runs) {
            commits.insert(r.git_commit);
            models.insert(short_name(r.model_path));
            texts.insert(short_name(r.text_path));
        }
        parts.push_back(fmt::format("{} runs of {} on {}, selected by <code>{}</code>", data.runs.size(),
                                    html_escape(fmt::format("{}", fmt::join(models, ", "))),
                                    html_escape(fmt::format("{}", fmt::join(texts, ", "))),
                                    html_escape(data.where.empty() ? "every run" : data.where)));
    }
    if (!data.task_runs.empty())
        parts.push_back(task_runs_selection(data.task_runs, "task runs", data.task_where, "every task sample", commits,
                                            [](const ReportTaskRun& r) { return r.task; }));
    if (!data.dataset_runs.empty())
        parts.push_back(task_runs_selection(data.dataset_runs, "dataset runs", data.dataset_where,
                                            "every dataset sample", commits,
                                            [](const ReportTaskRun& r) { return r.dataset_name; }));
    return fmt::format("{}", fmt::join(parts, "; "));
}

std::string page(const ReportOptions& options, const ReportData& data, const std::vector<ReportFigure>& figures) {
    std::set<std::string> commits;
    const std::string selection = selection_text(data, commits);
    std::set<std::int64_t> runs_with_figure;
    for (const ReportFigure& f : figures) {
        if (f.section == ReportSection::Runs) runs_with_figure.insert(std::stoll(f.plot.name.substr(4)));
    }
    const std::string title = options.title.empty() ? "kascade report" : "kascade report: " + options.title;
    std::string html = fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n{}\n<title>{}</title>\n<style>\n"
        "body {{ font-family: sans-serif; margin: 1.5em auto; max-width: 1440px; padding: 0 1em; color: #222; }}\n"
        "h1 {{ font-size: 1.5em; }} h2 {{ border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }}\n"
        "table {{ border-collapse: collapse; font-size: 0.85em; }}\n"
        "td, th {{ border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; }}\n"
        "th {{ background: #f3f3f3; }} td:nth-child(2), td:nth-child(3), td:nth-child(4) {{ text-align: left; }}\n"
        "figure {{ margin: 1.2em 0; }} img {{ max-width: 100%; height: auto; border: 1px solid #eee; }}\n"
        "figcaption {{ font-size: 0.9em; max-width: 960px; }} .meta {{ font-size: 0.9em; color: #444; }}\n"
        "</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        kGeneratorMeta, html_escape(title), html_escape(title));
    html += fmt::format(
        "<p class=\"meta\">{} from <code>{}</code>. Results made by kascade {}; report by kascade {} ({}) at "
        "{}.</p>\n",
        selection, html_escape(fs::absolute(data.results_dir / ResultsDb::kFileName).lexically_normal().string()),
        html_escape(fmt::format("{}", fmt::join(commits, ", "))), KASCADE_VERSION, KASCADE_GIT_COMMIT, utc_now());
    html +=
        "<p>Each figure links to its SVG; <code>gnuplot/NAME.gp</code> redraws it (run gnuplot in this "
        "folder).</p>\n<ul>\n";
    for (const SectionText& s : kSections) {
        size_t n = 0;
        for (const ReportFigure& f : figures) n += f.section == s.section ? 1 : 0;
        if (n > 0) html += fmt::format("<li><a href=\"#{}\">{}</a> ({} figures)</li>\n", s.id, s.heading, n);
    }
    if (!data.runs.empty()) html += "<li><a href=\"#table\">Runs</a></li>\n";
    if (!data.task_runs.empty()) html += "<li><a href=\"#task-table\">Task runs</a></li>\n";
    if (!data.dataset_runs.empty()) html += "<li><a href=\"#dataset-table\">Dataset runs</a></li>\n";
    html += "</ul>\n";
    if (!data.notes.empty()) {
        html += "<p>Not shown:</p>\n<ul>\n";
        for (const std::string& note : data.notes) html += "<li>" + html_escape(note) + "</li>\n";
        html += "</ul>\n";
    }
    for (const SectionText& s : kSections) {
        bool opened = false;
        for (const ReportFigure& f : figures) {
            if (f.section != s.section) continue;
            if (!opened) {
                html += fmt::format("<h2 id=\"{}\">{}</h2>\n<p>{}</p>\n", s.id, s.heading, html_escape(s.intro));
                opened = true;
            }
            const std::string& n = f.plot.name;
            html += fmt::format(
                "<figure id=\"{0}\"><a href=\"{0}.svg\"><img src=\"{0}.png\" width=\"{1}\" height=\"{2}\" "
                "alt=\"{3}\"></a>\n<figcaption><b>{3}.</b> {4} <a href=\"{0}.svg\">SVG</a> · "
                "<a href=\"gnuplot/{0}.gp\">gnuplot script</a></figcaption></figure>\n",
                n, f.plot.width, f.plot.height, html_escape(f.heading), html_escape(f.caption));
        }
    }
    if (!data.runs.empty()) html += "<h2 id=\"table\">Runs</h2>\n" + runs_table(data, runs_with_figure);
    if (!data.task_runs.empty()) {
        html +=
            "<h2 id=\"task-table\">Task runs</h2>\n<p>Per task run, the mean over its selected samples: score (by the "
            "task's metric, 1 = every expected string found), score per prompt length, and density.</p>\n" +
            task_runs_table(data);
    }
    if (!data.dataset_runs.empty()) {
        html +=
            "<h2 id=\"dataset-table\">Dataset runs</h2>\n<p>Per method configuration and dataset, the mean score of "
            "the selected samples by the dataset's metric (0 to 1; LongBench's tables print it times 100), and the "
            "average over the datasets where the configuration ran every one of them.</p>\n" +
            dataset_scores_table(data) +
            "<p>Per dataset run: the samples selected, how many prompts were cut in the middle to the max length, "
            "their mean score and mean density.</p>\n" +
            dataset_runs_table(data);
    }
    html += "</body>\n</html>\n";
    return html;
}

/// Removes the folder being written unless the report was completed.
class PartialDir {
  public:
    explicit PartialDir(fs::path path) : path_(std::move(path)) {
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~PartialDir() {
        std::error_code ignored;
        if (!done_) fs::remove_all(path_, ignored);
    }
    PartialDir(const PartialDir&) = delete;
    PartialDir& operator=(const PartialDir&) = delete;
    const fs::path& path() const { return path_; }
    void done() { done_ = true; }

  private:
    fs::path path_;
    bool done_ = false;
};

}  // namespace

fs::path default_report_dir(const fs::path& results_dir, const std::string& name) {
    return name.empty() ? results_dir / "report" : results_dir / "reports" / name;
}

ReportSummary write_report(const ReportOptions& options) {
    const fs::path gnuplot = find_gnuplot();
    const fs::path out =
        (options.out_dir.empty() ? default_report_dir(options.results_dir, "") : options.out_dir).lexically_normal();
    KASCADE_CHECK(out.has_filename() || out.parent_path().has_filename(), "--out \"{}\" is not a folder name",
                  out.string());
    const fs::path target = out.has_filename() ? out : out.parent_path();
    if (fs::exists(target)) {
        const bool is_report = fs::exists(target / "index.html") &&
                               read_file(target / "index.html").find(kGeneratorMeta) != std::string::npos;
        KASCADE_CHECK(is_report || (fs::is_directory(target) && fs::is_empty(target)),
                      "--out \"{}\" exists and is not a kascade report (no index.html written by kascade report); "
                      "choose a new or empty folder",
                      target.string());
    }
    const ReportData data = load_report_data(options.results_dir, options.selection);

    std::vector<ReportFigure> figures;
    for (auto* make : {pareto_figures, topk_figures, similarity_figures, schedule_figures, run_figures, kernel_figures,
                       needle_heatmap_figures, task_density_figures, dataset_density_figures}) {
        for (ReportFigure& f : make(data)) figures.push_back(std::move(f));
    }
    if (!target.parent_path().empty()) fs::create_directories(target.parent_path());
    PartialDir partial(target.parent_path() / fmt::format("{}.partial-{}", target.filename().string(), ::getpid()));
    std::vector<GnuplotFigure> plots;
    for (const ReportFigure& f : figures) plots.push_back(f.plot);
    render_figures(gnuplot, partial.path(), plots);
    for (const GnuplotFigure& p : plots) {
        for (const char* ext : {".png", ".svg"}) {
            KASCADE_CHECK(fs::exists(partial.path() / (p.name + ext)), "gnuplot did not write {}{} (script {})", p.name,
                          ext, (partial.path() / "gnuplot" / (p.name + ".gp")).string());
        }
    }
    std::ofstream(partial.path() / "index.html") << page(options, data, figures);

    // Swap in: the previous report (if any) is moved aside first, since a folder cannot be renamed onto another.
    if (fs::exists(target)) {
        const fs::path old = target.parent_path() / fmt::format("{}.old-{}", target.filename().string(), ::getpid());
        fs::rename(target, old);
        fs::rename(partial.path(), target);
        fs::remove_all(old);
    } else {
        fs::rename(partial.path(), target);
    }
    partial.done();
    return {target,
            target / "index.html",
            static_cast<int>(data.runs.size()),
            static_cast<int>(data.task_runs.size()),
            static_cast<int>(data.dataset_runs.size()),
            static_cast<int>(figures.size())};
}

}  // namespace kascade
