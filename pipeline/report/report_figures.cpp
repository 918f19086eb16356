#include "pipeline/report/report_figures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "pipeline/report/report_rows.h"
#include "pipeline/report/report_style.h"

namespace kascade {

using report_rows::name_or_empty;

namespace {

/// A plot series: the method, and for Kascade the schedule policy (the curves a reader compares).
std::string method_series(const ReportRun& run) {
    if (run.method != EvalMethod::Kascade || !run.policy) return std::string(mode_name(run.method));
    // A schedule calibrated on another text than it is tested on (calibration transfer) is a series of its own.
    if (!run.calib_text_path.empty() && run.calib_text_path != run.text_path)
        return fmt::format("kascade ({}), calibrated on {}", mode_name(*run.policy), short_name(run.calib_text_path));
    return fmt::format("kascade ({})", mode_name(*run.policy));
}

/// Colours by layer role (run and schedule figures).
std::string role_color(RunLayerRole role) {
    switch (role) {
        case RunLayerRole::Dense:
            return "0x7f7f7f";
        // OmniKV's filter and LessIsMore's selection layers pick the keys later layers reuse, as anchors do.
        case RunLayerRole::Anchor:
        case RunLayerRole::Filter:
        case RunLayerRole::Selection:
            return "0xff7f0e";
        case RunLayerRole::Reuse:
            return "0x1f77b4";
        case RunLayerRole::Streaming:
            return "0xd62728";
        case RunLayerRole::Quest:
            break;
    }
    return "0x9467bd";
}

std::string text_name(const std::string& path) {
    return short_name(path);
}

std::string topk_text(const std::optional<std::int64_t>& tiles, const std::optional<double>& pct,
                      const std::optional<std::int64_t>& k_min, const std::optional<std::int64_t>& page_size = {}) {
    if (tiles && page_size) return fmt::format("top-k {} pages of {}", *tiles, *page_size);
    if (tiles) return fmt::format("top-k {} tiles", *tiles);
    if (pct) return fmt::format("top-k {}% (k_min {})", report_num(*pct), k_min.value_or(0));
    return "no top-k";
}

/// The schedule-setting parameters of a kascade run or schedule, e.g. "threshold 0.65, max dist 4".
std::string policy_text(SchedulePolicy policy, const std::optional<double>& threshold,
                        const std::optional<std::int64_t>& max_dist, const std::optional<std::int64_t>& n_anchors,
                        const std::string& anchor_list) {
    switch (policy) {
        case SchedulePolicy::Threshold:
            return fmt::format("threshold {}, max dist {}", report_num(threshold.value_or(NAN)), max_dist.value_or(0));
        case SchedulePolicy::Dp:
            return fmt::format("dp, K = {}", n_anchors.value_or(0));
        case SchedulePolicy::Fixed:
            break;
    }
    return fmt::format("fixed anchors {}", anchor_list);
}

/// "a, b, c" of the distinct values, in order.
template <class T>
std::string distinct_list(const std::set<T>& values) {
    std::vector<std::string> out;
    for (const T& v : values) {
        if constexpr (std::is_same_v<T, std::string>)
            out.push_back(v);
        else
            out.push_back(report_num(static_cast<double>(v)));
    }
    return fmt::format("{}", fmt::join(out, ", "));
}

/// The parameters that make a run what it is besides its top-k budget, as (name, value) parts; a figure's curve
/// labels show only the parts that differ between its runs.
std::vector<std::pair<std::string, std::string>> setting_parts(const ReportRun& r) {
    std::vector<std::pair<std::string, std::string>> parts = {{"method", method_series(r)}};
    auto add = [&](const char* name, std::string value) { parts.emplace_back(name, std::move(value)); };
    add("threshold", r.threshold ? "threshold " + report_num(*r.threshold) : "");
    add("max_reuse_dist", r.max_reuse_dist ? fmt::format("max dist {}", *r.max_reuse_dist) : "");
    add("n_anchors", r.n_anchors ? fmt::format("K={}", *r.n_anchors) : "");
    add("anchor_list", r.anchor_list.empty() ? "" : "anchors " + r.anchor_list);
    add("metric", name_or_empty(r.metric));
    add("aggregation", r.aggregation ? "agg " + name_or_empty(r.aggregation) : "");
    add("head_map", r.head_map ? "heads " + name_or_empty(r.head_map) : "");
    add("tile", r.tile ? fmt::format("tile {}", *r.tile) : "");
    add("k_min", r.topk_pct && r.k_min ? fmt::format("k_min {}", *r.k_min) : "");
    add("key_granularity", r.key_granularity ? name_or_empty(r.key_granularity) + " keys" : "");
    add("k_rule", r.k_rule ? "k " + name_or_empty(r.k_rule) : "");
    add("round_k", r.round_k && *r.round_k > 0 ? fmt::format("round k {}", *r.round_k) : "");
    add("pooling", !r.pooling ? "" : r.pooling == Pooling::PreSoftmax ? "pre-softmax" : "post-softmax");
    return parts;
}

std::map<std::string, std::string> curve_labels(const std::vector<const ReportRun*>& runs) {
    std::map<std::string, std::set<std::string>> values;
    for (const ReportRun* r : runs) {
        for (const auto& [name, value] : setting_parts(*r)) {
            if (!value.empty()) values[name].insert(value);
        }
    }
    std::map<std::string, std::string> labels;  // by the full setting, to the shown label
    for (const ReportRun* r : runs) {
        std::string full, shown;
        for (const auto& [name, value] : setting_parts(*r)) {
            full += value + "|";
            if (value.empty() || (name != "method" && values[name].size() < 2)) continue;
            shown += (shown.empty() ? "" : ", ") + value;
        }
        labels[full] = shown;
    }
    return labels;
}

std::string setting_key(const ReportRun& r) {
    std::string full;
    for (const auto& [name, value] : setting_parts(r)) full += value + "|";
    return full;
}

/// "top-k 4, 8, 12 tiles" / "top-k 2.5, 5 % (k_min 128)" / "quest 2, 4 pages of 16" over the sparse runs of a
/// figure: Quest's pages are never counted as tiles.
std::string budget_summary(const std::vector<const ReportRun*>& runs) {
    std::set<std::int64_t> tiles, pages, page_sizes, k_mins;
    std::set<double> pcts;
    for (const ReportRun* r : runs) {
        if (r->method == EvalMethod::Dense) continue;
        if (r->topk_tiles) (r->page_size ? pages : tiles).insert(*r->topk_tiles);
        if (r->topk_tiles && r->page_size) page_sizes.insert(*r->page_size);
        if (r->topk_pct) pcts.insert(*r->topk_pct);
        if (r->topk_pct && r->k_min) k_mins.insert(*r->k_min);
    }
    std::vector<std::string> parts;
    if (!tiles.empty()) parts.push_back(fmt::format("top-k {} tiles", distinct_list(tiles)));
    if (!pages.empty())
        parts.push_back(fmt::format("quest {} pages of {}", distinct_list(pages), distinct_list(page_sizes)));
    if (!pcts.empty())
        parts.push_back(fmt::format("top-k {} % (k_min {})", distinct_list(pcts), distinct_list(k_mins)));
    return parts.empty() ? "dense only" : fmt::format("{}", fmt::join(parts, "; "));
}

/// How a run's test windows were scored: "ctx 512" (prefill) or "decode, prompt 256 + 256" (a dense prefill of the
/// prompt, then one token at a time). Runs of different phases never share a panel.
std::string context_label(const ReportRun& r) {
    if (r.phase == EvalPhase::Decode)
        return fmt::format("decode, prompt {} + {}", r.prompt_tokens.value_or(0), r.decode_tokens.value_or(0));
    return fmt::format("ctx {}", r.ctx);
}

}  // namespace

std::vector<ReportFigure> pareto_figures(const ReportData& data) {
    // Panels: model x text x ctx.
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<const ReportRun*>> panels;
    for (const ReportRun& r : data.runs) {
        if (std::isfinite(r.density) && std::isfinite(r.degradation_pct))
            panels[{r.model_hash, r.text_hash, context_label(r)}].push_back(&r);
    }
    std::vector<ReportFigure> figures;
    for (const auto& [panel, runs] : panels) {
        std::map<std::string, std::vector<const ReportRun*>> series;
        std::set<std::string> commits;
        std::set<std::int64_t> tiles, page_sizes;
        for (const ReportRun* r : runs) {
            series[method_series(*r)].push_back(r);
            commits.insert(r->git_commit);
            if (r->tile && r->method != EvalMethod::Dense) tiles.insert(*r->tile);
            if (r->page_size) page_sizes.insert(*r->page_size);
        }
        std::string points, front, plot;
        size_t index = 0;
        for (const auto& [name, members] : series) {
            std::vector<const ReportRun*> sorted = members;
            std::sort(sorted.begin(), sorted.end(), [](const ReportRun* a, const ReportRun* b) {
                return std::tie(a->density, a->degradation_pct) < std::tie(b->density, b->degradation_pct);
            });
            double best = INFINITY;
            for (const ReportRun* r : sorted) {
                points += fmt::format("{} {} {}\n", report_num(r->density), report_num(r->degradation_pct), r->id);
                // Pareto front (both lower is better): a run is on it if no run of lower density degrades less.
                if (r->degradation_pct < best) {
                    front += fmt::format("{} {}\n", report_num(r->density), report_num(r->degradation_pct));
                    best = r->degradation_pct;
                }
            }
            points += "\n\n";
            front += "\n\n";
            const SeriesStyle style = report_series_style(name, index);
            plot += fmt::format(
                "{}$points index {} using 1:2 with points pt {} ps 1.4 lc rgb \"{}\" title {}, \\\n"
                "  $front index {} using 1:2 with steps lw 1.5 dt 2 lc rgb \"{}\" notitle",
                index == 0 ? "plot " : ", \\\n  ", index, style.point, style.color, gnuplot_string(name), index,
                style.color);
            ++index;
        }
        const ReportRun& first = *runs.front();
        const std::string model = short_name(first.model_path), text = text_name(first.text_path);
        std::string blocks = tiles.empty() ? "" : "tile " + distinct_list(tiles);
        if (!page_sizes.empty()) blocks += (blocks.empty() ? "" : ", ") + ("page " + distinct_list(page_sizes));
        const std::string title =
            fmt::format("Perplexity cost vs attention kept: {} on {}, {}\n{} runs; {}; {}; test tokens [{}, {})", model,
                        text, context_label(first), runs.size(), budget_summary(runs),
                        blocks.empty() ? "tile -" : blocks, first.token_offset, first.token_offset + first.n_tokens);
        ReportFigure f;
        f.section = ReportSection::Pareto;
        f.heading = fmt::format("{} on {}, {}", model, text, context_label(first));
        f.caption =
            "One marker per run; the dashed staircase is each method's Pareto front (no run of that method has both "
            "lower density and lower degradation). Lower left is better.";
        f.plot.name = fmt::format("pareto-{}", figures.size() + 1);
        f.plot.width = 960;
        f.plot.height = 580;
        f.plot.datablocks = gnuplot_datablock("points", points) + gnuplot_datablock("front", front);
        f.plot.body = kReportPlotHeader + report_commit_label(commits) +
                      fmt::format("set title {}\n", gnuplot_string(title)) +
                      "set xlabel \"density: attended / causal query-key pairs, all layers (fraction)\"\n"
                      "set ylabel \"perplexity degradation vs dense (%)\"\n"
                      "set xzeroaxis lt -1 lc rgb \"#888888\"\n"
                      "set offsets graph 0.05, graph 0.05, graph 0.08, graph 0.08\n" +
                      plot + "\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

std::vector<ReportFigure> topk_figures(const ReportData& data) {
    // Panels: model x text x ctx x test range x budget kind (tiles: keys per query tile; pct: % of causal keys).
    using PanelKey = std::tuple<std::string, std::string, std::string, std::int64_t, std::int64_t, bool>;
    std::map<PanelKey, std::vector<const ReportRun*>> panels;
    std::map<std::tuple<std::string, std::string, std::string, std::int64_t, std::int64_t>, double> dense_ppl;
    for (const ReportRun& r : data.runs) {
        const auto range = std::make_tuple(r.model_hash, r.text_hash, context_label(r), r.token_offset, r.n_tokens);
        if (std::isfinite(r.ppl_dense)) dense_ppl[range] = r.ppl_dense;
        if (r.method == EvalMethod::Dense || !std::isfinite(r.ppl_sparse)) continue;
        if (!r.topk_pct && !report_budget_keys(r.topk_tiles, r.tile, r.page_size)) continue;
        panels[{r.model_hash, r.text_hash, context_label(r), r.token_offset, r.n_tokens, r.topk_pct.has_value()}]
            .push_back(&r);
    }
    std::vector<ReportFigure> figures;
    for (const auto& [panel, runs] : panels) {
        const bool pct = std::get<5>(panel);
        const std::map<std::string, std::string> labels = curve_labels(runs);
        std::map<std::string, std::vector<std::pair<double, const ReportRun*>>> curves;
        std::set<std::string> commits;
        for (const ReportRun* r : runs) {
            // One unit for every method: % of the keys, or keys (tiles x tile size, Quest's pages x page size).
            const double x =
                pct ? *r->topk_pct
                    : static_cast<double>(report_budget_keys(r->topk_tiles, r->tile, r->page_size).value_or(0));
            curves[setting_key(*r)].emplace_back(x, r);
            commits.insert(r->git_commit);
        }
        std::string rows, plot;
        size_t index = 0;
        for (auto& [key, points] : curves) {
            std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
            for (const auto& [x, r] : points)
                rows += fmt::format("{} {} {}\n", report_num(x), report_num(r->ppl_sparse), r->id);
            rows += "\n\n";
            const SeriesStyle style = report_series_style(method_series(*points.front().second), index);
            plot += fmt::format(
                "{}$curves index {} using 1:2 with linespoints pt {} ps 1.2 lw 1.5 lc rgb \"{}\" "
                "dt {} title {}",
                index == 0 ? "plot " : ", \\\n  ", index, style.point, style.color, 1 + index % 4,
                gnuplot_string(labels.at(key)));
            ++index;
        }
        const ReportRun& first = *runs.front();
        const auto range = std::make_tuple(first.model_hash, first.text_hash, context_label(first), first.token_offset,
                                           first.n_tokens);
        if (const auto it = dense_ppl.find(range); it != dense_ppl.end()) {
            plot += fmt::format(", \\\n  {} with lines lw 2 lc rgb \"#000000\" title {}", report_num(it->second),
                                gnuplot_string(fmt::format("dense (ppl {:.4f})", it->second)));
        }
        const std::string model = short_name(first.model_path), text = text_name(first.text_path);
        const std::string title =
            fmt::format("Perplexity vs top-k budget: {} on {}, {}\ntest tokens [{}, {}); {} runs; {}", model, text,
                        context_label(first), first.token_offset, first.token_offset + first.n_tokens, runs.size(),
                        budget_summary(runs));
        ReportFigure f;
        f.section = ReportSection::TopK;
        f.heading = fmt::format("{} on {}, {}, budget in {}", model, text, context_label(first),
                                pct                                ? "% of the causal keys"
                                : first.phase == EvalPhase::Decode ? "keys per decode step"
                                                                   : "keys per query tile");
        f.caption =
            "Test perplexity of each method and schedule setting as its top-k budget grows; the black line "
            "is dense attention on the same tokens.";
        f.plot.name = fmt::format("topk-{}", figures.size() + 1);
        f.plot.width = 960;
        f.plot.height = 580;
        f.plot.datablocks = gnuplot_datablock("curves", rows);
        f.plot.body = kReportPlotHeader + report_commit_label(commits) +
                      fmt::format("set title {}\n", gnuplot_string(title)) +
                      fmt::format("set xlabel {}\n",
                                  gnuplot_string(pct ? "top-k budget (% of the keys a query tile's last query sees)"
                                                     : "top-k budget (keys per query tile or decode step: tiles x "
                                                       "tile size, Quest pages x page size)")) +
                      "set ylabel \"perplexity on the test tokens (exp nats/token)\"\n"
                      "set key inside right top opaque box lc rgb \"#cccccc\"\n"
                      "set offsets graph 0.03, graph 0.03, graph 0.08, graph 0.08\n" +
                      plot + "\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

namespace {

/// Rows b = 0..L-1 (reuse layer), columns a (anchor layer) of the layer-pair score; NaN where a >= b.
std::string layer_matrix(const ReportSimilarity& sim, const std::string& measure, double& lo) {
    std::string rows;
    for (int b = 0; b < sim.n_layers; ++b) {
        for (int a = 0; a < sim.n_layers; ++a) {
            const double v = sim.layer_pair(measure, b, a);
            if (std::isfinite(v)) lo = std::min(lo, v);
            if (a > 0) rows += ' ';
            rows += report_num(v);
        }
        rows += "\n";
    }
    return rows;
}

std::string similarity_title(const ReportSimilarity& sim) {
    return fmt::format("{} on {}: calibration tokens [{}, {}) in {} windows, ctx {}, tile {}, {}",
                       short_name(sim.model_path), text_name(sim.text_path), sim.calib_offset,
                       sim.calib_offset + sim.calib_tokens, sim.n_windows, sim.ctx, sim.tile,
                       topk_text(sim.topk_tiles, sim.topk_pct, sim.k_min));
}

}  // namespace

std::vector<ReportFigure> similarity_figures(const ReportData& data) {
    std::vector<ReportFigure> figures;
    for (const auto& [key, sim] : data.similarities) {
        if (!sim.measures.count("recall_mean") || !sim.measures.count("recall_min") || sim.n_layers < 2) continue;
        double lo = 1;
        const std::string mean = layer_matrix(sim, "recall_mean", lo), min = layer_matrix(sim, "recall_min", lo);
        lo = std::min(std::floor(lo * 20) / 20, 0.95);
        std::string importance;
        for (size_t l = 0; l < sim.importance.size(); ++l)
            importance += fmt::format("{} {}\n", l, report_num(sim.importance[l]));
        const int L = sim.n_layers;
        const bool cell_labels = L <= 16;
        auto heatmap = [&](const char* block, const char* what) {
            std::string s = fmt::format(
                "set title {}\n"
                "set xlabel \"anchor layer a (earlier)\"\nset ylabel \"reuse layer b\"\n"
                "set xrange [-0.5:{}]\nset yrange [-0.5:{}]\nset xtics 1\nset ytics 1\nunset grid\n"
                "set cbrange [{}:1]\nset cblabel \"mass recall (fraction)\"\nset size ratio -1\n",
                gnuplot_string(what), L - 0.5, L - 0.5, report_num(lo));
            s += fmt::format("plot ${} matrix with image notitle", block);
            if (cell_labels)
                s += fmt::format(
                    ", ${} matrix using 1:2:($3 == $3 ? sprintf(\"%.2f\", $3) : \"\") with labels font \",7\" "
                    "notitle",
                    block);
            return s + "\n";
        };
        ReportFigure f;
        f.section = ReportSection::Similarity;
        f.heading = similarity_title(sim);
        f.caption =
            "How much of layer b's top-k attention mass the tiles chosen by the earlier layer a recover "
            "(Σ P_b[topk(a)] / Σ P_b[topk(b)]), for the best-matching anchor KV head, averaged over b's KV "
            "heads; left aggregated over query tiles by mean, middle by min (the worst tile). Right: the "
            "layer importance 1 − mean cos(x, x + attn_out) that weights layers in the DP.";
        f.plot.name = "similarity-" + key.substr(0, 12);
        f.plot.width = 1380;
        f.plot.height = 500;
        f.plot.datablocks = gnuplot_datablock("mean", mean) + gnuplot_datablock("min", min) +
                            gnuplot_datablock("importance", importance);
        f.plot.body = report_commit_label({sim.git_commit}) + kReportHeatPalette +
                      fmt::format("set multiplot layout 1,3 title {}\n", gnuplot_string(similarity_title(sim))) +
                      heatmap("mean", "recall, mean over query tiles") + "unset colorbox\n" +
                      heatmap("min", "recall, min over query tiles") +
                      "set size noratio\nset xtics autofreq\nset ytics autofreq\nset grid lc rgb \"#dddddd\"\nset "
                      "title \"layer importance\"\n"
                      "set xlabel \"layer\"\nset ylabel \"importance: 1 - mean cos(x, x + attn) (unitless)\"\n"
                      "set autoscale\nset xrange [-0.6:" +
                      report_num(L - 0.4) +
                      "]\nset yrange [0:*]\nset style fill solid 0.7\nset boxwidth 0.7\n"
                      "plot $importance using 1:2 with boxes lc rgb \"#4c72b0\" notitle\n"
                      "unset multiplot\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

namespace {

std::string schedule_title(const ReportSchedule& s, const ReportSimilarity* sim) {
    std::string line1 = fmt::format("schedule {}: {}; {} anchor + {} reuse of {} layers; {} {}, heads {}", s.id,
                                    policy_text(s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list),
                                    s.n_anchor_layers, s.n_reuse_layers, s.n_layers, name_or_empty(s.metric),
                                    name_or_empty(s.aggregation), mode_name(s.head_map));
    return sim ? line1 + "\nfrom " + similarity_title(*sim) : line1;
}

std::set<std::string> schedule_commits(const ReportData& data, std::int64_t schedule_id) {
    std::set<std::string> commits;
    for (const ReportRun& r : data.runs) {
        if (r.schedule_id == schedule_id) commits.insert(r.git_commit);
    }
    return commits;
}

/// The datablocks of a layer diagram: a square per layer, and an arc from each anchor to each layer reusing it with
/// the similarity the policy compared above it.
struct LayerDiagramData {
    std::string layers, arcs, arc_labels;
    double top = 0.6;  ///< the height of the highest arc
};

LayerDiagramData layer_diagram_data(const ReportSchedule& s) {
    LayerDiagramData d;
    for (const ReportScheduleLayer& l : s.layers) {
        d.layers += fmt::format("{} 0 {} {}\n", l.layer, role_color(run_layer_role(l.role)), mode_name(l.role));
        if (l.role != LayerRole::Reuse || !l.anchor_layer) continue;
        const int a = *l.anchor_layer, b = l.layer;
        const double height = 0.35 + 0.18 * (b - a);
        d.top = std::max(d.top, height);
        constexpr int kSteps = 24;
        for (int i = 0; i <= kSteps; ++i) {
            const double t = M_PI * i / kSteps;
            d.arcs += fmt::format("{} {}\n", report_num(a + (b - a) * (1 - std::cos(t)) / 2),
                                  report_num(height * std::sin(t)));
        }
        d.arcs += "\n";
        if (l.similarity)
            d.arc_labels +=
                fmt::format("{} {} \"{:.3f}\"\n", report_num((a + b) / 2.0), report_num(height + 0.07), *l.similarity);
    }
    return d;
}

/// The layer diagram of a schedule: one square per layer coloured by role; an arc from each anchor to the layers
/// reusing it.
ReportFigure schedule_layer_figure(std::int64_t id, const ReportSchedule& s, const std::set<std::string>& commits,
                                   const std::string& title) {
    const LayerDiagramData data = layer_diagram_data(s);
    ReportFigure d;
    d.section = ReportSection::Schedules;
    d.heading = fmt::format("schedule {}: {}", id,
                            policy_text(s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list));
    d.caption =
        "Layers left to right: grey = dense (layer 0, also the first anchor), orange = anchor (selects "
        "its own top-k tiles), blue = reuse (attends to the tiles of the anchor its arc comes from); the "
        "number on an arc is the similarity the policy compared.";
    d.plot.name = fmt::format("schedule-{}", id);
    d.plot.width = std::max(960, 56 * s.n_layers + 260);
    d.plot.height = 340;
    // Only the datablocks that have rows: gnuplot 5.4 crashes on a labels plot whose every row is undefined.
    d.plot.datablocks = gnuplot_datablock("layers", data.layers);
    std::string arc_plots;
    if (!data.arcs.empty()) {
        d.plot.datablocks += gnuplot_datablock("arcs", data.arcs);
        arc_plots += "$arcs using 1:2 with lines lw 1.6 lc rgb \"#1f77b4\" notitle, \\\n  ";
    }
    if (!data.arc_labels.empty()) {
        d.plot.datablocks += gnuplot_datablock("arclabels", data.arc_labels);
        arc_plots += "$arclabels using 1:2:3 with labels font \",8\" notitle, \\\n  ";
    }
    d.plot.body = report_commit_label(commits) + fmt::format("set title {}\n", gnuplot_string(title)) +
                  fmt::format("set xrange [-0.7:{}]\nset yrange [-0.45:{}]\n", report_num(s.n_layers - 0.3),
                              report_num(data.top + 0.25)) +
                  "unset ytics\nset xtics 1 nomirror\nset border 1\nset xlabel \"layer\"\n"
                  "set key outside right top\n"
                  "plot " +
                  arc_plots +
                  "$layers using 1:2:3 with points pt 5 ps 3.2 lc rgb variable notitle, \\\n"
                  "  NaN with points pt 5 ps 2 lc rgb \"#7f7f7f\" title \"dense\", \\\n"
                  "  NaN with points pt 5 ps 2 lc rgb \"#ff7f0e\" title \"anchor\", \\\n"
                  "  NaN with points pt 5 ps 2 lc rgb \"#1f77b4\" title \"reuse\"\n";
    return d;
}

/// The head maps of a schedule's reuse layers, as datablocks: per reuse layer i, "m<i>" the KV-head pair matrix
/// (the similarity measure the schedule used where its similarity artifact has it, else 1 at the head read) and
/// "c<i>" the anchor head each head reads.
struct HeadMapData {
    std::string blocks;
    double lo = 1;  ///< the colour range's lower end
};

HeadMapData head_map_data(const std::vector<const ReportScheduleLayer*>& reuse, const ReportSimilarity* sim,
                          const std::string& measure, bool with_similarity) {
    HeadMapData d;
    const int H = static_cast<int>(reuse.front()->head_map.size());
    for (size_t i = 0; i < reuse.size(); ++i) {
        const ReportScheduleLayer& l = *reuse[i];
        std::string matrix, chosen;
        for (int hb = 0; hb < H; ++hb) {
            for (int ha = 0; ha < H; ++ha) {
                const double v = with_similarity ? sim->at(measure, l.layer, *l.anchor_layer, hb, ha)
                                                 : (l.head_map[hb] == ha ? 1.0 : 0.0);
                if (std::isfinite(v)) d.lo = std::min(d.lo, v);
                if (ha > 0) matrix += ' ';
                matrix += report_num(v);
            }
            matrix += "\n";
            chosen += fmt::format("{} {}\n", l.head_map[hb], hb);
        }
        d.blocks += gnuplot_datablock(fmt::format("m{}", i), matrix) + gnuplot_datablock(fmt::format("c{}", i), chosen);
    }
    d.lo = std::min(std::floor(d.lo * 20) / 20, 0.95);
    return d;
}

/// The head maps of a schedule: per reuse layer, the KV-head pair similarity to its anchor and the anchor head each
/// head uses. None when no reuse layer has a head map.
std::optional<ReportFigure> schedule_head_map_figure(std::int64_t id, const ReportSchedule& s,
                                                     const ReportSimilarity* sim,
                                                     const std::set<std::string>& commits) {
    std::vector<const ReportScheduleLayer*> reuse;
    for (const ReportScheduleLayer& l : s.layers) {
        if (l.role == LayerRole::Reuse && l.anchor_layer && !l.head_map.empty()) reuse.push_back(&l);
    }
    if (reuse.empty()) return std::nullopt;
    const std::string measure =
        s.metric && s.aggregation ? similarity_measure_name(*s.metric, *s.aggregation) : std::string();
    const bool with_similarity = sim != nullptr && sim->measures.count(measure) > 0;
    const int H = static_cast<int>(reuse.front()->head_map.size());
    const HeadMapData data = head_map_data(reuse, sim, measure, with_similarity);
    const int cols = std::min<int>(static_cast<int>(reuse.size()), 6);
    const int rows = (static_cast<int>(reuse.size()) + cols - 1) / cols;
    std::string body;
    for (size_t i = 0; i < reuse.size(); ++i) {
        const ReportScheduleLayer& l = *reuse[i];
        body += fmt::format(
            "set title \"layer {} <- anchor {}\"\n{}"
            "plot $m{} matrix with image notitle, $c{} using 1:2 with points pt 6 ps 2.2 lw 2 lc rgb \"#d62728\" "
            "notitle\n",
            l.layer, *l.anchor_layer, i + 1 == reuse.size() ? "set colorbox\n" : "unset colorbox\n", i, i);
    }
    ReportFigure h;
    h.section = ReportSection::Schedules;
    h.heading = fmt::format("schedule {}: head maps ({})", id, mode_name(s.head_map));
    h.caption = with_similarity
                    ? fmt::format(
                          "One matrix per reuse layer: row = its KV head, column = the anchor layer's KV "
                          "head, colour = their {} ({} over query tiles); the red ring marks the anchor "
                          "head each KV head reads (for 'pooled', every head reads one pooled set).",
                          name_or_empty(s.metric), name_or_empty(s.aggregation))
                    : "One matrix per reuse layer: row = its KV head, column = the anchor KV head it reads (1).";
    h.plot.name = fmt::format("headmap-{}", id);
    h.plot.width = cols * 230 + 90;
    h.plot.height = rows * 230 + 80;
    h.plot.datablocks = data.blocks;
    h.plot.body =
        report_commit_label(commits) + kReportHeatPalette +
        fmt::format("set multiplot layout {},{} title {}\n", rows, cols,
                    gnuplot_string(fmt::format("schedule {} head maps: {}", id,
                                               with_similarity ? measure + " of KV-head pairs" : "anchor head used"))) +
        fmt::format(
            "set xrange [-0.5:{0}]\nset yrange [-0.5:{0}]\nset xtics 1\nset ytics 1\n"
            "set size ratio -1\nset cbrange [{1}:1]\nset xlabel \"anchor KV head\"\n"
            "set ylabel \"KV head\"\n",
            report_num(H - 0.5), with_similarity ? report_num(data.lo) : "0") +
        body + "unset multiplot\n";
    return h;
}

}  // namespace

std::vector<ReportFigure> schedule_figures(const ReportData& data) {
    std::vector<ReportFigure> figures;
    for (const auto& [id, s] : data.schedules) {
        const auto sim_it = data.similarities.find(s.similarity_key);
        const ReportSimilarity* sim = sim_it == data.similarities.end() ? nullptr : &sim_it->second;
        const std::set<std::string> commits = schedule_commits(data, id);
        figures.push_back(schedule_layer_figure(id, s, commits, schedule_title(s, sim)));
        if (std::optional<ReportFigure> head_maps = schedule_head_map_figure(id, s, sim, commits))
            figures.push_back(std::move(*head_maps));
    }
    return figures;
}

std::vector<ReportFigure> run_figures(const ReportData& data) {
    std::vector<ReportFigure> figures;
    for (const ReportRun& r : data.runs) {
        if (r.method == EvalMethod::Dense || r.layers.empty()) continue;
        std::string rows;
        bool has_error = false;
        for (const ReportRunLayer& l : r.layers) {
            rows += fmt::format("{} {} {} {}\n", l.layer, report_num(l.density),
                                report_num(l.out_rel_error.value_or(NAN)), role_color(l.role));
            has_error = has_error || l.out_rel_error.has_value();
        }
        std::string setting = method_series(r);
        if (r.method == EvalMethod::Kascade && r.policy)
            setting = "kascade " + policy_text(*r.policy, r.threshold, r.max_reuse_dist, r.n_anchors, r.anchor_list);
        const std::string budget = topk_text(r.topk_tiles, r.topk_pct, r.k_min, r.page_size);
        // Quest has pages (named in its budget), no tile.
        const std::string tile = r.tile ? fmt::format(", tile {}", *r.tile) : "";
        const std::string title = fmt::format(
            "run {}: {}, {}{}; ppl {:.4f} vs dense {:.4f} ({:+.2f}%), density {:.3f}\n{} on {}, ctx {}, test "
            "tokens [{}, {})",
            r.id, setting, budget, tile, r.ppl_sparse, r.ppl_dense, r.degradation_pct, r.density,
            short_name(r.model_path), text_name(r.text_path), r.ctx, r.token_offset, r.token_offset + r.n_tokens);
        ReportFigure f;
        f.section = ReportSection::Runs;
        f.heading = fmt::format("run {}: {}, {}", r.id, setting, budget);
        f.caption =
            "Top: attended / causal query-key pairs per layer, coloured by role (grey dense, orange anchor or "
            "OmniKV / LessIsMore selecting layer, blue reuse, red streaming, purple Quest). Bottom: relative error of "
            "the layer's attention output against "
            "dense attention on the same layer input (first window).";
        f.plot.name = fmt::format("run-{}", r.id);
        f.plot.width = 900;
        f.plot.height = 620;
        f.plot.datablocks = gnuplot_datablock("layers", rows);
        const int L = static_cast<int>(r.layers.size());
        f.plot.body = report_commit_label({r.git_commit}) +
                      fmt::format("set multiplot layout 2,1 title {}\n", gnuplot_string(title)) +
                      fmt::format("set xrange [-0.6:{}]\nset xtics 1\n", report_num(L - 0.4)) +
                      "set grid ytics lc rgb \"#dddddd\"\nset style fill solid 0.75\nset boxwidth 0.7\n"
                      "set xlabel \"layer\"\nset ylabel \"density (fraction of causal pairs)\"\nset yrange [0:1.05]\n"
                      "plot $layers using 1:2:4 with boxes lc rgb variable notitle\n"
                      "set ylabel \"attention output error vs dense (relative L2)\"\nset yrange [0:*]\n" +
                      (has_error ? std::string("plot $layers using 1:3:4 with boxes lc rgb variable notitle\n")
                                 : std::string("set label 2 \"no output error stored\" at graph 0.5, graph 0.5 center\n"
                                               "set yrange [0:1]\nplot $layers using 1:(0) with points ps 0 "
                                               "notitle\n")) +
                      "unset multiplot\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

std::vector<ReportFigure> kernel_figures(const ReportData& data) {
    // Benchmark names are "<kind>/<model shape>/T:<tokens>/<variant>[/min_time:...][/real_time]" (bench/): the
    // context length is the T: (or ctx:) part, the layer type the last plain part.
    std::map<std::string, std::map<std::string, std::map<double, double>>> groups;  // group -> variant -> T -> x
    std::set<std::string> commits, machines;
    for (const ReportKernelBench& b : data.kernel_bench) {
        if (!b.speedup || !(*b.speedup > 0)) continue;
        std::vector<std::string> plain;
        double context = 0;
        size_t start = 0;
        while (start <= b.name.size()) {
            const size_t slash = std::min(b.name.find('/', start), b.name.size());
            const std::string part = b.name.substr(start, slash - start);
            start = slash + 1;
            if (part.starts_with("T:") || part.starts_with("ctx:")) {
                context = std::atof(part.substr(part.find(':') + 1).c_str());
            } else if (!part.empty() && part.find(':') == std::string::npos && part != "real_time") {
                plain.push_back(part);
            }
        }
        if (context <= 0 || plain.size() < 2) continue;
        const std::string variant = plain.back();
        plain.pop_back();
        groups[fmt::format("{}", fmt::join(plain, " / "))][variant][context] = *b.speedup;  // the latest row wins
        commits.insert(b.git_commit);
        machines.insert(b.machine);
    }
    std::vector<ReportFigure> figures;
    for (const auto& [group, variants] : groups) {
        std::string rows, plot;
        size_t index = 0;
        for (const auto& [variant, points] : variants) {
            for (const auto& [context, speedup] : points)
                rows += fmt::format("{} {}\n", report_num(context), report_num(speedup));
            rows += "\n\n";
            const SeriesStyle style = report_series_style(variant, index);
            plot += fmt::format(
                "{}$speedup index {} using 1:2 with linespoints pt {} ps 1.3 lw 1.8 lc rgb \"{}\" "
                "title {}",
                index == 0 ? "plot " : ", \\\n  ", index, style.point, style.color, gnuplot_string(variant));
            ++index;
        }
        plot += ", \\\n  1 with lines lw 1.5 dt 2 lc rgb \"#000000\" title \"dense (1x)\"";
        ReportFigure f;
        f.section = ReportSection::Kernels;
        f.heading = "kernel speed-up: " + group;
        f.caption =
            "Dense attention time / this kernel's time at the same shape, measured in the same benchmark "
            "run (kernel_bench.speedup), against the context length; one curve per layer type and density.";
        f.plot.name = fmt::format("kernels-{}", figures.size() + 1);
        f.plot.width = 900;
        f.plot.height = 560;
        f.plot.datablocks = gnuplot_datablock("speedup", rows);
        f.plot.body = kReportPlotHeader + report_commit_label(commits) +
                      fmt::format("set title {}\n", gnuplot_string(fmt::format("Kernel speed-up vs context: {}\n{}",
                                                                               group, fmt::join(machines, "; ")))) +
                      "set logscale x 2\nset xlabel \"context length T (tokens)\"\n"
                      "set ylabel \"speed-up vs dense attention (x)\"\nset yrange [0:*]\n"
                      "set offsets graph 0.05, graph 0.05, graph 0.05, 0\n" +
                      plot + "\n";
        figures.push_back(std::move(f));
    }
    return figures;
}

}  // namespace kascade
