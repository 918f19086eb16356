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

namespace kascade {

void check_topk_rule(const TopKRule& rule) {
    KASCADE_CHECK((rule.tiles > 0) != (rule.pct > 0),
                  "give exactly one of topk-tiles (> 0) and topk-pct (in (0, 100]); got topk-tiles={} topk-pct={}",
                  rule.tiles, rule.pct);
    KASCADE_CHECK(rule.pct >= 0 && rule.pct <= 100, "invalid topk-pct={} (must be in (0, 100])", rule.pct);
    KASCADE_CHECK(rule.tiles >= 0, "invalid topk-tiles={} (must be > 0)", rule.tiles);
    KASCADE_CHECK(rule.k_min_tokens >= 0, "invalid k-min={} (must be >= 0 tokens)", rule.k_min_tokens);
    KASCADE_CHECK(rule.round_k >= 0, "invalid round-k={} (must be >= 0 tokens; 0 = no rounding)", rule.round_k);
}

nlohmann::json topk_rule_json(const TopKRule& rule) {
    nlohmann::json j = rule.tiles > 0 ? nlohmann::json{{"topk_tiles", rule.tiles}}
                                      : nlohmann::json{{"topk_pct", rule.pct},
                                                       {"k_min", rule.k_min_tokens},
                                                       {"k_rule", std::string(mode_name(rule.k_rule))}};
    j["round_k"] = rule.round_k;
    return j;
}

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
}  // namespace

StageResult run_similarity(Workspace& ws, const std::string& capture_key, const TopKRule& topk,
                           KeyGranularity granularity, bool force) {
    check_topk_rule(topk);
    const std::optional<ArtifactRecord> capture_record = ws.db().find_artifact(capture_key);
    KASCADE_CHECK(capture_record && capture_record->stage == "capture",
                  "no capture with key '{}' in {} (run `kascade capture` first, or see `kascade status`)", capture_key,
                  ws.db().db_file().string());
    const std::string key = similarity_key(capture_key, topk, granularity);
    if (!force && ws.has_artifact(key)) return {key, true};

    H5ArtifactReader capture(ws.results_dir(), *capture_record, kCaptureFormatVersion, kCaptureFormatVersion);
    const H5Group& in = capture.root();
    const ArtifactHeader capture_header = read_artifact_header(in);
    const int n_layers = static_cast<int>(in.attr_int("n_layers"));
    const int n_heads = static_cast<int>(in.attr_int("n_kv_heads"));
    const int64_t n_windows = in.attr_int("n_windows");
    const bool token = granularity == KeyGranularity::Token;
    KASCADE_CHECK(!token || in.open_group("layer_00").has("q"),
                  "similarity with key granularity token needs the queries and keys of capture {} ({}), which was "
                  "made without them: capture again with --save-qk",
                  capture_key, capture_record->path);
    const int tile = static_cast<int>(in.attr_int("tile"));
    const int ctx = static_cast<int>(in.attr_int("ctx"));
    const int n_tiles = tile_count(ctx, tile);

    const size_t table_size = static_cast<size_t>(n_layers) * n_layers * n_heads * n_heads;
    std::vector<std::vector<double>> sums(4, std::vector<double>(table_size, 0.0));
    std::vector<H5Dataset> mass_sets, q_sets, k_sets;
    std::vector<float> importance(n_layers);
    std::vector<int> windows(n_layers);
    for (int l = 0; l < n_layers; ++l) {
        const H5Group g = in.open_group(fmt::format("layer_{:02}", l));
        mass_sets.push_back(g.open_dataset("tile_mass"));
        if (token) {
            q_sets.push_back(g.open_dataset("q"));
            k_sets.push_back(g.open_dataset("k"));
        }
        importance[l] = static_cast<float>(g.attr_double("importance"));
        windows[l] = static_cast<int>(g.attr_int("window"));
    }

    const int n_q_heads = static_cast<int>(in.attr_int("n_heads"));
    const int head_dim = static_cast<int>(in.attr_int("head_dim"));
    // Sums one window's head-pair measures of every layer pair (a < b) into `sums`.
    const auto accumulate = [&](const auto& mass, const auto& selection) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 1; b < n_layers; ++b) {
            for (int a = 0; a < b; ++a) {
                for (int hb = 0; hb < n_heads; ++hb) {
                    for (int ha = 0; ha < n_heads; ++ha) {
                        const HeadPairSimilarity s = head_pair_similarity(mass[b], selection[b], hb, selection[a], ha);
                        const size_t i = ((static_cast<size_t>(b) * n_layers + a) * n_heads + hb) * n_heads + ha;
                        sums[0][i] += s.recall_mean;
                        sums[1][i] += s.recall_min;
                        sums[2][i] += s.jaccard_mean;
                        sums[3][i] += s.jaccard_min;
                    }
                }
            }
        }
    };

    ProgressLine progress("similarity", n_windows, "windows");
    std::vector<TileMass> mass(n_layers);
    std::vector<TileSelection> selection(n_layers);
    std::vector<TokenMass> token_mass(token ? n_layers : 0);
    std::vector<TokenSelection> token_selection(token ? n_layers : 0);
    for (int64_t w = 0; w < n_windows; ++w) {
        if (token) {
            for (int l = 0; l < n_layers; ++l) {
                // The per-key mass recomputed from the captured post-RoPE queries and keys, scaled as the runtime does.
                const std::vector<float> q = q_sets[l].read_rows<float>(w, 1);
                const std::vector<float> k = k_sets[l].read_rows<float>(w, 1);
                AttnShape shape;
                shape.n_q_heads = n_q_heads;
                shape.n_kv_heads = n_heads;
                shape.head_dim = head_dim;
                shape.n_q = shape.n_k = shape.kv_stride = ctx;
                shape.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
                shape.window = windows[l];
                attn_token_mass(shape, tile, q.data(), k.data(), &token_mass[l]);
                token_selection[l] = select_topk_tokens(token_mass[l], topk);
            }
            accumulate(token_mass, token_selection);
        } else {
            for (int l = 0; l < n_layers; ++l) {
                mass[l] =
                    TileMass{n_heads, n_tiles, n_tiles, tile, mass_sets[l].read_rows<float>(w, 1), windows[l], ctx};
                selection[l] = select_topk_tiles(mass[l], topk);
            }
            accumulate(mass, selection);
        }
        progress.update(w + 1);
    }
    progress.finish();

    H5ArtifactWriter writer(ws.new_artifact_path("similarity", key), kSimilarityFormatVersion);
    const ArtifactHeader header =
        make_artifact_header("similarity", key, {{"capture", capture_key}}, similarity_params(topk, granularity),
                             capture_header.model_hash, capture_header.text_hash, capture_header.tokenizer_hash);
    write_artifact_header(writer.root(), header);
    if (topk.tiles > 0) {
        writer.root().set_attr("topk_tiles", static_cast<int64_t>(topk.tiles));
    } else {
        writer.root().set_attr("topk_pct", static_cast<double>(topk.pct));
        writer.root().set_attr("k_min", static_cast<int64_t>(topk.k_min_tokens));
        writer.root().set_attr("k_rule", std::string(mode_name(topk.k_rule)));
    }
    writer.root().set_attr("round_k", static_cast<int64_t>(topk.round_k));
    writer.root().set_attr("key_granularity", std::string(mode_name(granularity)));
    writer.root().set_attr("n_layers", n_layers);
    writer.root().set_attr("n_kv_heads", n_heads);
    writer.root().set_attr("n_windows", n_windows);
    const std::vector<int64_t> shape{n_layers, n_layers, n_heads, n_heads};
    for (int m = 0; m < 4; ++m) {
        std::vector<float> table(table_size, std::numeric_limits<float>::quiet_NaN());
        for (int b = 1; b < n_layers; ++b)
            for (int a = 0; a < b; ++a)
                for (int hb = 0; hb < n_heads; ++hb)
                    for (int ha = 0; ha < n_heads; ++ha) {
                        const size_t i = ((static_cast<size_t>(b) * n_layers + a) * n_heads + hb) * n_heads + ha;
                        table[i] = static_cast<float>(sums[m][i] / n_windows);
                    }
        writer.root().write_dataset<float>(similarity_measure_name(kMeasures[m].first, kMeasures[m].second), table,
                                           shape);
    }
    writer.root().write_dataset<float>("importance", importance, {n_layers});
    writer.commit();

    SimilarityRecord detail;
    detail.artifact_key = key;
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
    ws.db().insert_artifact(make_artifact_record(ws, header, capture_record->model_id, kSimilarityFormatVersion),
                            detail);
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
