#include "pipeline/stages/similarity_stage.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "io/store/h5_file.h"
#include "kernels/tile_mass.h"
#include "kernels/tile_similarity.h"
#include "kernels/topk_tiles.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/stages/artifact_provenance.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/topk_rule_params.h"

namespace kascade {

namespace {

nlohmann::json similarity_params(const TopKRule& topk, KeyGranularity granularity) {
    nlohmann::json params = topk_rule_json(topk);
    params["key_granularity"] = std::string(mode_name(granularity));
    return params;
}

}  // namespace

std::string similarity_key(const std::string& capture_key, const TopKRule& topk, KeyGranularity granularity) {
    return content_key("similarity", kSimilarityFormatVersion, {{"capture", capture_key}},
                       similarity_params(topk, granularity));
}

namespace {

/// The measures an artifact holds, in the order of the sums below.
constexpr std::pair<SimilarityMetric, SimilarityAggregation> kMeasures[] = {
    {SimilarityMetric::Recall, SimilarityAggregation::Mean},
    {SimilarityMetric::Recall, SimilarityAggregation::Min},
    {SimilarityMetric::Jaccard, SimilarityAggregation::Mean},
    {SimilarityMetric::Jaccard, SimilarityAggregation::Min}};
constexpr int kMeasureCount = 4;

/// The capture's row of the results database; a missing one is an error that says how to make it.
ArtifactRecord find_capture_record(Workspace& ws, const std::string& capture_key) {
    const std::optional<ArtifactRecord> capture_record = ws.db().find_artifact(capture_key);
    KASCADE_CHECK(capture_record && capture_record->stage == "capture",
                  "no capture with key '{}' in {} (run `kascade capture` first, or see `kascade status`)", capture_key,
                  ws.db().db_file().string());
    return *capture_record;
}

/// What the similarity reads of a capture artifact: its shape and, per layer, the datasets of its windows, its
/// importance and its attention window.
struct CaptureInputs {
    ArtifactHeader header;
    int n_layers = 0;
    int n_heads = 0;  ///< KV heads
    int64_t n_windows = 0;
    int tile = 0;
    int ctx = 0;
    int n_tiles = 0;
    int n_q_heads = 0;
    int head_dim = 0;
    std::vector<H5Dataset> mass_sets;  ///< per layer: tile mass, one row per window
    std::vector<H5Dataset> q_sets;     ///< per layer, token granularity only: post-RoPE queries
    std::vector<H5Dataset> k_sets;     ///< per layer, token granularity only: post-RoPE keys
    std::vector<float> importance;     ///< per layer
    std::vector<int> windows;          ///< per layer: its attention window
};

/// Opens the capture's datasets; token granularity needs its queries and keys (a capture made with --save-qk).
CaptureInputs open_capture_inputs(const H5Group& in, bool token, const std::string& capture_key,
                                  const ArtifactRecord& capture_record) {
    CaptureInputs c;
    c.header = read_artifact_header(in);
    c.n_layers = static_cast<int>(in.attr_int("n_layers"));
    c.n_heads = static_cast<int>(in.attr_int("n_kv_heads"));
    c.n_windows = in.attr_int("n_windows");
    KASCADE_CHECK(!token || in.open_group("layer_00").has("q"),
                  "similarity with key granularity token needs the queries and keys of capture {} ({}), which was "
                  "made without them: capture again with --save-qk",
                  capture_key, capture_record.path);
    c.tile = static_cast<int>(in.attr_int("tile"));
    c.ctx = static_cast<int>(in.attr_int("ctx"));
    c.n_tiles = tile_count(c.ctx, c.tile);
    c.importance.resize(c.n_layers);
    c.windows.resize(c.n_layers);
    for (int l = 0; l < c.n_layers; ++l) {
        const H5Group g = in.open_group(fmt::format("layer_{:02}", l));
        c.mass_sets.push_back(g.open_dataset("tile_mass"));
        if (token) {
            c.q_sets.push_back(g.open_dataset("q"));
            c.k_sets.push_back(g.open_dataset("k"));
        }
        c.importance[l] = static_cast<float>(g.attr_double("importance"));
        c.windows[l] = static_cast<int>(g.attr_int("window"));
    }
    c.n_q_heads = static_cast<int>(in.attr_int("n_heads"));
    c.head_dim = static_cast<int>(in.attr_int("head_dim"));
    return c;
}

/// Per measure of kMeasures, a [n_layers, n_layers, n_kv_heads, n_kv_heads] table (b, a, head of b, head of a).
using MeasureTables = std::vector<std::vector<double>>;

size_t pair_index(int b, int a, int hb, int ha, int n_layers, int n_heads) {
    return ((static_cast<size_t>(b) * n_layers + a) * n_heads + hb) * n_heads + ha;
}

/// Sums one window's head-pair measures of every layer pair (a < b) into `sums`.
template <class Mass, class Selection>
void accumulate_window(const std::vector<Mass>& mass, const std::vector<Selection>& selection, int n_heads,
                       MeasureTables& sums) {
    const int n_layers = static_cast<int>(mass.size());
#pragma omp parallel for schedule(dynamic)
    for (int b = 1; b < n_layers; ++b) {
        for (int a = 0; a < b; ++a) {
            for (int hb = 0; hb < n_heads; ++hb) {
                for (int ha = 0; ha < n_heads; ++ha) {
                    const HeadPairSimilarity s = head_pair_similarity(mass[b], selection[b], hb, selection[a], ha);
                    const size_t i = pair_index(b, a, hb, ha, n_layers, n_heads);
                    sums[0][i] += s.recall_mean;
                    sums[1][i] += s.recall_min;
                    sums[2][i] += s.jaccard_mean;
                    sums[3][i] += s.jaccard_min;
                }
            }
        }
    }
}

/// Window w's per-key mass of layer l, recomputed from the captured post-RoPE queries and keys, scaled as the
/// runtime does.
void token_mass_of_window(const CaptureInputs& c, int l, int64_t w, TokenMass& mass) {
    const std::vector<float> q = c.q_sets[l].read_rows<float>(w, 1);
    const std::vector<float> k = c.k_sets[l].read_rows<float>(w, 1);
    AttnShape shape;
    shape.n_q_heads = c.n_q_heads;
    shape.n_kv_heads = c.n_heads;
    shape.head_dim = c.head_dim;
    shape.n_q = shape.n_k = shape.kv_stride = c.ctx;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    shape.window = c.windows[l];
    attn_token_mass(shape, c.tile, q.data(), k.data(), &mass);
}

/// The four measures of every layer and head pair, summed over the capture's windows.
MeasureTables sum_over_windows(const CaptureInputs& c, const TopKRule& topk, bool token) {
    const size_t table_size = static_cast<size_t>(c.n_layers) * c.n_layers * c.n_heads * c.n_heads;
    MeasureTables sums(kMeasureCount, std::vector<double>(table_size, 0.0));
    ProgressLine progress("similarity", c.n_windows, "windows");
    std::vector<TileMass> mass(c.n_layers);
    std::vector<TileSelection> selection(c.n_layers);
    std::vector<TokenMass> token_mass(token ? c.n_layers : 0);
    std::vector<TokenSelection> token_selection(token ? c.n_layers : 0);
    for (int64_t w = 0; w < c.n_windows; ++w) {
        if (token) {
            for (int l = 0; l < c.n_layers; ++l) {
                token_mass_of_window(c, l, w, token_mass[l]);
                token_selection[l] = select_topk_tokens(token_mass[l], topk);
            }
            accumulate_window(token_mass, token_selection, c.n_heads, sums);
        } else {
            for (int l = 0; l < c.n_layers; ++l) {
                mass[l] = TileMass{c.n_heads,    c.n_tiles, c.n_tiles, c.tile, c.mass_sets[l].read_rows<float>(w, 1),
                                   c.windows[l], c.ctx};
                selection[l] = select_topk_tiles(mass[l], topk);
            }
            accumulate_window(mass, selection, c.n_heads, sums);
        }
        progress.update(w + 1);
    }
    progress.finish();
    return sums;
}

/// A measure's sums divided by the window count; NaN where a >= b (no such layer pair).
std::vector<float> mean_over_windows(const std::vector<double>& sums, const CaptureInputs& c) {
    std::vector<float> table(sums.size(), std::numeric_limits<float>::quiet_NaN());
    for (int b = 1; b < c.n_layers; ++b)
        for (int a = 0; a < b; ++a)
            for (int hb = 0; hb < c.n_heads; ++hb)
                for (int ha = 0; ha < c.n_heads; ++ha) {
                    const size_t i = pair_index(b, a, hb, ha, c.n_layers, c.n_heads);
                    table[i] = static_cast<float>(sums[i] / c.n_windows);
                }
    return table;
}

/// The similarity's root attributes besides its header: the top-k rule, the key granularity and the shape.
void write_similarity_attributes(H5Group& root, const TopKRule& topk, KeyGranularity granularity,
                                 const CaptureInputs& c) {
    if (topk.tiles > 0) {
        root.set_attr("topk_tiles", static_cast<int64_t>(topk.tiles));
    } else {
        root.set_attr("topk_pct", static_cast<double>(topk.pct));
        root.set_attr("k_min", static_cast<int64_t>(topk.k_min_tokens));
        root.set_attr("k_rule", std::string(mode_name(topk.k_rule)));
    }
    root.set_attr("round_k", static_cast<int64_t>(topk.round_k));
    root.set_attr("key_granularity", std::string(mode_name(granularity)));
    root.set_attr("n_layers", c.n_layers);
    root.set_attr("n_kv_heads", c.n_heads);
    root.set_attr("n_windows", c.n_windows);
}

/// Writes and commits artifacts/similarity/<key>.h5: the header, the attributes, one dataset per measure (the
/// mean over windows) and the layer importance. Returns its header.
ArtifactHeader write_similarity_artifact(Workspace& ws, const std::string& key, const std::string& capture_key,
                                         const TopKRule& topk, KeyGranularity granularity, const CaptureInputs& c,
                                         const MeasureTables& sums) {
    H5ArtifactWriter writer(ws.new_artifact_path("similarity", key), kSimilarityFormatVersion);
    const ArtifactHeader header =
        make_artifact_header("similarity", key, {{"capture", capture_key}}, similarity_params(topk, granularity),
                             c.header.model_hash, c.header.text_hash, c.header.tokenizer_hash);
    write_artifact_header(writer.root(), header);
    write_similarity_attributes(writer.root(), topk, granularity, c);
    const std::vector<int64_t> shape{c.n_layers, c.n_layers, c.n_heads, c.n_heads};
    for (int m = 0; m < kMeasureCount; ++m) {
        writer.root().write_dataset<float>(similarity_measure_name(kMeasures[m].first, kMeasures[m].second),
                                           mean_over_windows(sums[m], c), shape);
    }
    writer.root().write_dataset<float>("importance", c.importance, {c.n_layers});
    writer.commit();
    return header;
}

/// The artifact's rows in the results database: its artifact row and its similarity details.
void record_similarity(Workspace& ws, const ArtifactHeader& header, const std::string& capture_key,
                       const TopKRule& topk, int64_t model_id) {
    SimilarityRecord detail;
    detail.artifact_key = header.key;
    detail.capture_key = capture_key;
    if (topk.tiles > 0) {
        detail.topk_tiles = topk.tiles;
    } else {
        detail.topk_pct = topk.pct;
        detail.k_min = topk.k_min_tokens;
    }
    std::vector<std::string> measure_names;
    for (const auto& [metric, aggregation] : kMeasures)
        measure_names.push_back(similarity_measure_name(metric, aggregation));
    detail.metrics_json = nlohmann::json(measure_names).dump();
    ws.db().insert_artifact(make_artifact_record(ws, header, model_id, kSimilarityFormatVersion), detail);
}

}  // namespace

StageResult run_similarity(Workspace& ws, const std::string& capture_key, const TopKRule& topk,
                           KeyGranularity granularity, bool force) {
    check_topk_rule(topk);
    const ArtifactRecord capture_record = find_capture_record(ws, capture_key);
    const std::string key = similarity_key(capture_key, topk, granularity);
    if (!force && ws.has_artifact(key)) return {key, true};

    const bool token = granularity == KeyGranularity::Token;
    H5ArtifactReader capture(ws.results_dir(), capture_record, kCaptureFormatVersion, kCaptureFormatVersion);
    const CaptureInputs inputs = open_capture_inputs(capture.root(), token, capture_key, capture_record);
    const MeasureTables sums = sum_over_windows(inputs, topk, token);
    const ArtifactHeader header = write_similarity_artifact(ws, key, capture_key, topk, granularity, inputs, sums);
    record_similarity(ws, header, capture_key, topk, capture_record.model_id);
    return {key, false};
}

LayerSimilarity load_layer_similarity(Workspace& ws, const std::string& similarity_key, SimilarityMetric metric,
                                      SimilarityAggregation aggregation) {
    const std::optional<ArtifactRecord> record = ws.db().find_artifact(similarity_key);
    KASCADE_CHECK(
        record && record->stage == "similarity",
        "no similarity artifact with key '{}' in {} (run `kascade similarity` first, or see `kascade status`)",
        similarity_key, ws.db().db_file().string());
    H5ArtifactReader reader(ws.results_dir(), *record, kSimilarityFormatVersion, kSimilarityFormatVersion);
    LayerSimilarity sim;
    sim.n_layers = static_cast<int>(reader.root().attr_int("n_layers"));
    sim.n_kv_heads = static_cast<int>(reader.root().attr_int("n_kv_heads"));
    sim.head = reader.root().open_dataset(similarity_measure_name(metric, aggregation)).read<float>();
    sim.importance = reader.root().open_dataset("importance").read<float>();
    return sim;
}

}  // namespace kascade
