#include "pipeline/report/report_task_figures.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "pipeline/report/report_rows.h"
#include "pipeline/report/report_style.h"

namespace kascade {

using report_rows::name_or_empty;

namespace {

/// Red (missed) through yellow to green (found), the needle-in-a-haystack convention; black cell text reads on all.
const std::string kScorePalette = "set palette defined (0 \"#d73027\", 0.5 \"#fee08b\", 1 \"#1a9850\")\n";

/// Room under each panel's x label, so that the bottom-right commit label does not cover the last panel's.
const std::string kCommitLabelRoom = "set bmargin 4.5\n";

/// Beyond this many cells per panel the score printed in each cell would not fit.
constexpr int kMaxLabelledCells = 120;
/// Panels per row of a heatmap figure.
constexpr int kHeatmapColumns = 4;

/// Dense first, then by method, schedule setting, budget and prefill mode (sparse before dense).
bool panel_order(const ReportTaskRun* a, const ReportTaskRun* b) {
    const auto key = [](const ReportTaskRun* r) {
        return std::make_tuple(r->method != EvalMethod::Dense, mode_name(r->method), name_or_empty(r->policy),
                               r->n_anchors.value_or(0), r->threshold.value_or(0), r->anchor_list,
                               r->topk_pct.value_or(0),
                               report_budget_keys(r->topk_tiles, r->tile, r->page_size).value_or(0),
                               r->prefill != TaskPrefill::Sparse, r->id);
    };
    return key(a) < key(b);
}

/// A figure compares methods on the same prompts: one per model x task x haystack.
std::vector<std::vector<const ReportTaskRun*>> task_groups(const ReportData& data) {
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<const ReportTaskRun*>> groups;
    for (const ReportTaskRun& r : data.task_runs) groups[{r.model_hash, r.task, r.haystack_path}].push_back(&r);
    std::vector<std::vector<const ReportTaskRun*>> out;
    for (auto& [key, runs] : groups) {
        std::sort(runs.begin(), runs.end(), panel_order);
        out.push_back(std::move(runs));
    }
    return out;
}

/// task_run_label, with the task run id where two runs of a figure share a configuration (other seeds, or
/// schedules of the same setting calibrated elsewhere), so that no two panels or points read the same.
std::map<std::int64_t, std::string> unique_labels(const std::vector<const ReportTaskRun*>& runs) {
    std::map<std::string, int> count;
    for (const ReportTaskRun* r : runs) ++count[task_run_label(*r)];
    std::map<std::int64_t, std::string> labels;
    for (const ReportTaskRun* r : runs) {
        const std::string label = task_run_label(*r);
        labels[r->id] = count[label] > 1 ? fmt::format("{} [task run {}]", label, r->id) : label;
    }
    return labels;
}

/// "passkey (number_match) on stories260K, filler haystack; seed 0; 3 task runs, 18 samples": a title's first line.
std::string group_title(const std::vector<const ReportTaskRun*>& runs) {
    const ReportTaskRun& first = *runs.front();
    std::set<std::int64_t> seeds;
    std::size_t samples = 0;
    for (const ReportTaskRun* r : runs) {
        seeds.insert(r->seed);
        samples += r->samples.size();
    }
    return fmt::format("{} ({}) on {}, {} haystack; seed {}; {} task runs, {} samples", first.task, first.metric,
                       short_name(first.model_path), task_haystack_name(first), fmt::join(seeds, ", "), runs.size(),
                       samples);
}

std::string group_heading(const ReportTaskRun& first) {
    return fmt::format("{} on {}, {} haystack", first.task, short_name(first.model_path), task_haystack_name(first));
}

std::set<std::string> group_commits(const std::vector<const ReportTaskRun*>& runs) {
    std::set<std::string> commits;
    for (const ReportTaskRun* r : runs) commits.insert(r->git_commit);
    return commits;
}

/// gnuplot tics placing each distinct value at its index: ("64" 0, "128" 1).
template <class T>
std::string index_tics(const std::map<T, int>& index) {
    std::vector<std::string> tics;
    for (const auto& [value, i] : index) tics.push_back(fmt::format("\"{}\" {}", report_num(value), i));
    return fmt::format("({})", fmt::join(tics, ", "));
}

/// The score-vs-density series: the method, Kascade by schedule policy (as in the perplexity figures' legends).
std::string task_series(const ReportTaskRun& r) {
    if (r.method == EvalMethod::Kascade && r.policy) return "kascade (" + name_or_empty(r.policy) + ")";
    return std::string(mode_name(r.method));
}

/// A point's own label beside it: what distinguishes it within its series ("K=2 10%", "128 keys"). Count budgets are
/// in keys for every method (Quest's pages x page size, the others' tiles x tile), so labels side by side compare.
std::string point_label(const ReportTaskRun& r) {
    std::string budget;
    if (r.topk_pct)
        budget = fmt::format("{:g}%", *r.topk_pct);
    else if (const auto keys = report_budget_keys(r.topk_tiles, r.tile, r.page_size))
        budget = fmt::format("{} keys", *keys);
    std::string setting;
    if (r.method == EvalMethod::Kascade && r.policy == SchedulePolicy::Dp)
        setting = fmt::format("K={}", r.n_anchors.value_or(0));
    if (r.method == EvalMethod::Kascade && r.policy == SchedulePolicy::Threshold)
        setting = fmt::format("t={:g}", r.threshold.value_or(0));
    if (r.method == EvalMethod::Kascade && r.policy == SchedulePolicy::Fixed) setting = r.anchor_list;
    return setting.empty() || budget.empty() ? setting + budget : setting + " " + budget;
}

/// Filled markers for a prompt prefilled through the method, open ones for a dense prefill (gnuplot's point types
/// come in open/filled pairs: 4/5, 6/7, ..., 14/15).
int prefill_point(int point, bool dense_prefill) {
    const int filled = point % 2 == 1 ? point : point + 1;
    return dense_prefill ? filled - 1 : filled;
}

}  // namespace

std::vector<ReportFigure> needle_heatmap_figures(const ReportData& data) {
    std::vector<ReportFigure> figures;
    for (const std::vector<const ReportTaskRun*>& runs : task_groups(data)) {
        // Every panel of a figure on the same axes: the lengths and depths of all its runs.
        std::map<std::int64_t, int> length_index;
        std::map<double, int> depth_index;
        for (const ReportTaskRun* r : runs) {
            for (const ReportTaskSample& s : r->samples) {
                length_index[s.length];
                depth_index[s.depth_pct];
            }
        }
        int i = 0;
        for (auto& [length, index] : length_index) index = i++;
        i = 0;
        for (auto& [depth, index] : depth_index) index = i++;
        const int n_lengths = static_cast<int>(length_index.size()), n_depths = static_cast<int>(depth_index.size());
        const bool cell_labels = n_lengths * n_depths <= kMaxLabelledCells;
        const std::map<std::int64_t, std::string> labels = unique_labels(runs);

        std::string blocks, panels;
        for (size_t p = 0; p < runs.size(); ++p) {
            const ReportTaskRun& r = *runs[p];
            std::map<std::pair<int, int>, std::pair<double, int>> cells;  // (x, y) -> (score sum, samples)
            for (const ReportTaskSample& s : r.samples) {
                auto& [sum, n] = cells[{length_index.at(s.length), depth_index.at(s.depth_pct)}];
                sum += s.score;
                ++n;
            }
            std::string rows;
            for (const auto& [xy, sum_n] : cells)
                rows += fmt::format("{} {} {} {}\n", xy.first, xy.second, report_num(sum_n.first / sum_n.second),
                                    sum_n.second);
            blocks += gnuplot_datablock(fmt::format("p{}", p), rows);
            // Two title lines: the method and budget, then the prefill mode and the panel's mean.
            const std::string& label = labels.at(r.id);
            const size_t paren = r.method == EvalMethod::Dense ? std::string::npos : label.find(" (");
            const std::string title = paren == std::string::npos
                                          ? fmt::format("{}\nmean score {:.3f}", label, r.mean_score())
                                          : fmt::format("{}\n{}, mean score {:.3f}", label.substr(0, paren),
                                                        label.substr(paren + 1), r.mean_score());
            panels += fmt::format("set title {} font \",9\"\n{}", gnuplot_string(title),
                                  p + 1 == runs.size() ? "set colorbox\n" : "unset colorbox\n");
            panels += fmt::format(
                "plot $p{0} using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette notitle", p);
            if (cell_labels)
                panels += fmt::format(", $p{} using 1:2:(sprintf(\"%.2f\", $3)) with labels font \",7\" notitle", p);
            panels += "\n";
        }
        const int cols = std::min<int>(static_cast<int>(runs.size()), kHeatmapColumns);
        const int rows = (static_cast<int>(runs.size()) + cols - 1) / cols;
        const int panel_width = std::max(320, 130 + 56 * n_lengths);
        const int panel_height = std::max(280, 130 + 16 * n_depths);
        const ReportTaskRun& first = *runs.front();
        ReportFigure f;
        f.section = ReportSection::TaskHeatmaps;
        f.heading = group_heading(first) + ": needle heatmaps";
        f.caption =
            "Mean score of the samples in each cell (needle depth in % of the haystack, 0 = its start, at the top; "
            "prompt length in tokens, BOS included), one panel per method configuration, all on one scale: green = "
            "found (1), red = missed (0); a white cell has no selected sample.";
        f.plot.name = fmt::format("needle-{}", figures.size() + 1);
        f.plot.width = cols * panel_width + 90;
        f.plot.height = rows * panel_height + 70;
        f.plot.datablocks = blocks;
        f.plot.body =
            report_commit_label(group_commits(runs)) + kScorePalette +
            fmt::format("set multiplot layout {},{} title {}\n", rows, cols,
                        gnuplot_string(group_title(runs) + "\nmean score per needle depth and prompt length")) +
            fmt::format(
                "set xrange [-0.5:{}]\nset yrange [{}:-0.5]\nset xtics {} nomirror\nset ytics {} nomirror\n"
                "set cbrange [0:1]\nset cbtics 0.25\nset xlabel \"prompt length (tokens)\"\n"
                "set ylabel \"needle depth (% of haystack)\"\nunset key\n",
                report_num(n_lengths - 0.5), report_num(n_depths - 0.5), index_tics(length_index),
                index_tics(depth_index)) +
            kCommitLabelRoom + panels + "unset multiplot\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

namespace {

/// One panel of a score-vs-density figure: its title, and the (density, score) point of a run in it (none: the run
/// has no samples in the panel).
struct DensityPanel {
    std::string title;
    std::function<std::optional<std::pair<double, double>>(const ReportTaskRun&)> point;
};

/// A score-vs-density figure over `runs`: one panel each, series per method and prefill mode (dense, always densely
/// prefilled, is one series), each point labelled with its budget, dense's score as a dotted line. The first panel
/// holds the legend.
ReportFigure density_figure(const std::vector<const ReportTaskRun*>& runs, const std::vector<DensityPanel>& panels,
                            const std::string& title) {
    std::map<std::pair<std::string, std::optional<TaskPrefill>>, std::vector<const ReportTaskRun*>> series;
    for (const ReportTaskRun* r : runs)
        series[{task_series(*r), r->method == EvalMethod::Dense ? std::nullopt : std::optional(r->prefill)}].push_back(
            r);
    std::map<std::string, SeriesStyle> styles;
    for (const auto& [key, members] : series) {
        if (!styles.count(key.first)) styles[key.first] = report_series_style(key.first, styles.size());
    }

    std::string blocks, body;
    for (size_t p = 0; p < panels.size(); ++p) {
        std::string points, point_labels, plot;
        int index = 0;
        std::optional<double> dense_score;
        for (const auto& [key, members] : series) {
            std::vector<std::tuple<double, double, std::string>> xy;  // density, score, label
            for (const ReportTaskRun* r : members) {
                const auto point = panels[p].point(*r);
                if (!point) continue;
                xy.emplace_back(point->first, point->second, point_label(*r));
                if (r->method == EvalMethod::Dense && !dense_score) dense_score = point->second;
            }
            if (xy.empty()) continue;  // gnuplot stops on an index with no points
            std::sort(xy.begin(), xy.end());
            for (const auto& [x, y, label] : xy) {
                points += fmt::format("{} {}\n", report_num(x), report_num(y));
                if (!label.empty())
                    point_labels += fmt::format("{} {} {}\n", report_num(x), report_num(y), gnuplot_string(label));
            }
            points += "\n\n";
            const bool dense_prefill = key.second == TaskPrefill::Dense;
            const SeriesStyle& style = styles.at(key.first);
            const std::string series_title =
                key.second ? key.first + ", " + name_or_empty(key.second) + " prefill" : key.first;
            plot += fmt::format("{}$d{} index {} using 1:2 with linespoints pt {} ps 1.5 lw 1.3 dt {} lc rgb \"{}\" {}",
                                index == 0 ? "plot " : ", \\\n  ", p, index, prefill_point(style.point, dense_prefill),
                                dense_prefill ? 2 : 1, style.color,
                                p == 0 ? "title " + gnuplot_string(series_title) : "notitle");
            ++index;
        }
        // Each panel is made from some run's samples, so every panel has a series.
        KASCADE_ASSERT(index > 0);
        blocks += gnuplot_datablock(fmt::format("d{}", p), points);
        if (!point_labels.empty()) {
            blocks += gnuplot_datablock(fmt::format("l{}", p), point_labels);
            plot += fmt::format(
                ", \\\n  $l{} using 1:2:3 with labels left offset char 0.7,0.5 font \",7\" tc rgb \"#333333\" notitle",
                p);
        }
        if (dense_score)
            plot += fmt::format(", \\\n  {} with lines dt 3 lw 1 lc rgb \"#000000\" {}", report_num(*dense_score),
                                p == 0 ? "title \"dense score\"" : "notitle");
        body += fmt::format(
            "set title {}\n{}{}\n", gnuplot_string(panels[p].title),
            p == 0 ? "set key inside right bottom opaque box lc rgb \"#cccccc\" font \",8\"\n" : "unset key\n", plot);
    }
    const int n_panels = static_cast<int>(panels.size());
    const int cols = std::min(n_panels, 3);
    const int rows = (n_panels + cols - 1) / cols;
    ReportFigure f;
    f.plot.width = cols * (n_panels == 1 ? 820 : 520) + 40;
    f.plot.height = rows * 420 + 60;
    f.plot.datablocks = blocks;
    f.plot.body = kReportPlotHeader + report_commit_label(group_commits(runs)) +
                  fmt::format("set multiplot layout {},{} title {}\n", rows, cols,
                              gnuplot_string(title + "\nscore vs attention kept")) +
                  "set xlabel \"density: attended / causal query-key pairs (fraction)\"\n"
                  "set ylabel \"mean score\"\nset xrange [0:1.08]\nset yrange [-0.05:1.08]\n" +
                  kCommitLabelRoom + body + "unset multiplot\n";
    return f;
}

/// What every score-vs-density caption says about the markers.
const std::string kDensityMarkers =
    "One colour per method; filled markers and solid lines: the prompt prefilled through the method; open markers and "
    "dashed lines: prefilled densely (decode-only ablation); each point is labelled with its budget.";

}  // namespace

std::vector<ReportFigure> task_density_figures(const ReportData& data) {
    std::vector<ReportFigure> figures;
    for (const std::vector<const ReportTaskRun*>& runs : task_groups(data)) {
        std::set<std::int64_t> lengths;
        for (const ReportTaskRun* r : runs) {
            for (const ReportTaskSample& s : r->samples) lengths.insert(s.length);
        }
        // The first panel averages over every length; a panel per length shows where a method starts to miss.
        std::vector<DensityPanel> panels = {
            {fmt::format("all lengths ({} tokens)", fmt::join(lengths, ", ")),
             [](const ReportTaskRun& r) { return std::optional(std::pair(r.mean_density(), r.mean_score())); }}};
        if (lengths.size() > 1) {
            for (const std::int64_t length : lengths) {
                panels.push_back({fmt::format("prompt length {} tokens", length),
                                  [length](const ReportTaskRun& r) -> std::optional<std::pair<double, double>> {
                                      const std::map<std::int64_t, double> by_length = r.score_by_length();
                                      if (!by_length.count(length)) return std::nullopt;
                                      return std::pair(r.density_by_length().at(length), by_length.at(length));
                                  }});
            }
        }
        ReportFigure f = density_figure(runs, panels, group_title(runs));
        f.section = ReportSection::TaskDensity;
        f.heading = group_heading(*runs.front()) + ": score vs density";
        f.caption =
            "Mean score of each task run's selected samples against their mean density (attended / causal "
            "query-key pairs over the method's passes, all layers; dense = 1). " +
            kDensityMarkers + " First panel: all lengths; then one panel per prompt length.";
        f.plot.name = fmt::format("task-density-{}", figures.size() + 1);
        figures.push_back(std::move(f));
    }
    return figures;
}

std::vector<ReportFigure> dataset_density_figures(const ReportData& data) {
    // A figure compares methods on the same prompts: one per model x chat template, a panel per dataset.
    std::map<std::pair<std::string, std::string>, std::vector<const ReportTaskRun*>> groups;
    for (const ReportTaskRun& r : data.dataset_runs) groups[{r.model_hash, r.chat_template}].push_back(&r);
    std::vector<ReportFigure> figures;
    for (auto& [key, runs] : groups) {
        std::sort(runs.begin(), runs.end(), panel_order);
        std::map<std::string, std::string> metric_of;  // dataset name -> its metric
        std::size_t samples = 0;
        for (const ReportTaskRun* r : runs) {
            metric_of.emplace(r->dataset_name, r->metric);
            samples += r->samples.size();
        }
        std::vector<DensityPanel> panels;
        for (const auto& [name, metric] : metric_of) {
            // An init-capture (a copy): clang 14 cannot capture a structured binding by name.
            panels.push_back({fmt::format("{} ({})", name, metric),
                              [name = name](const ReportTaskRun& r) -> std::optional<std::pair<double, double>> {
                                  if (r.dataset_name != name) return std::nullopt;
                                  return std::pair(r.mean_density(), r.mean_score());
                              }});
        }
        const ReportTaskRun& first = *runs.front();
        const std::string title = fmt::format("datasets on {}, chat template {}; {} dataset runs, {} samples",
                                              short_name(first.model_path), first.chat_template, runs.size(), samples);
        ReportFigure f = density_figure(runs, panels, title);
        f.section = ReportSection::DatasetDensity;
        f.heading = fmt::format("Datasets on {} (chat template {}): score vs density", short_name(first.model_path),
                                first.chat_template);
        f.caption =
            "Mean score of each dataset run's selected samples (by the dataset's metric, 0 to 1) against their mean "
            "density (attended / causal query-key pairs over the method's passes, all layers; dense = 1), one panel "
            "per dataset. " +
            kDensityMarkers;
        f.plot.name = fmt::format("dataset-density-{}", figures.size() + 1);
        figures.push_back(std::move(f));
    }
    return figures;
}

}  // namespace kascade
