#include "pipeline/stages/capture_stage.h"

#include "base/error.h"
#include "io/file_util.h"
#include "io/store/h5_file.h"
#include "pipeline/runtime/capture_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/stages/artifact_provenance.h"
#include "pipeline/stages/content_key.h"

namespace kascade {

namespace {

nlohmann::json capture_params_json(const CaptureParams& p) {
    return {{"token_offset", p.token_offset},
            {"n_tokens", p.n_tokens},
            {"ctx", p.ctx},
            {"tile", p.tile},
            {"save_qk", p.save_qk}};
}

nlohmann::json capture_inputs_json(const std::string& model_hash, const std::string& tokenizer_hash,
                                   const std::string& text_hash) {
    return {{"model", model_hash}, {"tokenizer", tokenizer_hash}, {"text", text_hash}};
}

void check_params(const CaptureParams& p, const LoadedModel& model, const LoadedText& text) {
    KASCADE_CHECK(p.tile >= 1 && p.tile <= p.ctx, "invalid tile={} (must be in [1, ctx={}])", p.tile, p.ctx);
    KASCADE_CHECK(p.n_tokens > 0, "invalid calib-tokens={} (must be > 0)", p.n_tokens);
    KASCADE_CHECK(p.token_offset + p.n_tokens <= static_cast<int64_t>(text.tokens.size()),
                  "calibration range [{}, {}) runs past the end of \"{}\" ({} tokens)", p.token_offset,
                  p.token_offset + p.n_tokens, text.path.string(), text.tokens.size());
    KASCADE_CHECK(p.ctx <= model.weights.config.max_seq_len,
                  "--ctx {} is larger than the model's context of {} positions (max_position_embeddings)", p.ctx,
                  model.weights.config.max_seq_len);
}

}  // namespace

std::string capture_key(const std::string& model_hash, const std::string& tokenizer_hash, const std::string& text_hash,
                        const CaptureParams& params) {
    return content_key("capture", kCaptureFormatVersion, capture_inputs_json(model_hash, tokenizer_hash, text_hash),
                       capture_params_json(params));
}

StageResult run_capture(Workspace& ws, LoadedModel& model, LoadedText& text, const CaptureParams& params, bool force) {
    check_params(params, model, text);
    const std::string key = capture_key(model.model_hash, model.tokenizer_hash, text.hash, params);
    if (!force && ws.has_artifact(key)) return {key, true};

    const ModelConfig& c = model.weights.config;
    const int32_t start = sequence_start_token(c, model.tokenizer.get());
    const bool has_bos = start >= 0;
    const int64_t per_window = has_bos ? params.ctx - 1 : params.ctx;
    const int64_t n_windows = params.n_tokens / per_window;
    KASCADE_CHECK(n_windows >= 1, "calib-tokens={} is less than one window of {} tokens (ctx {})", params.n_tokens,
                  per_window, params.ctx);
    const int n_tiles = tile_count(params.ctx, params.tile);

    H5ArtifactWriter writer(ws.new_artifact_path("capture", key), kCaptureFormatVersion);
    H5Group& root = writer.root();
    const ArtifactHeader header =
        make_artifact_header("capture", key, capture_inputs_json(model.model_hash, model.tokenizer_hash, text.hash),
                             capture_params_json(params), model.model_hash, text.hash, model.tokenizer_hash);
    write_artifact_header(root, header);
    root.set_attr("token_offset", params.token_offset);
    root.set_attr("n_tokens", n_windows * per_window);
    root.set_attr("ctx", params.ctx);
    root.set_attr("tile", params.tile);
    root.set_attr("n_windows", n_windows);
    root.set_attr("n_layers", c.n_layers);
    root.set_attr("n_kv_heads", c.n_kv_heads);
    root.set_attr("n_heads", c.n_heads);
    root.set_attr("head_dim", c.head_dim);

    const std::span<const int32_t> calib(text.tokens.data() + params.token_offset, n_windows * per_window);
    root.write_dataset<int32_t>("tokens", calib, {static_cast<int64_t>(calib.size())});

    H5DatasetOptions compressed;
    compressed.compress = true;
    std::vector<H5Group> layer_groups;
    std::vector<H5Dataset> mass_sets, q_sets, k_sets;
    for (int l = 0; l < c.n_layers; ++l) {
        layer_groups.push_back(root.create_group(fmt::format("layer_{:02}", l)));
        mass_sets.push_back(layer_groups[l].create_dataset("tile_mass", H5DType::Float32,
                                                           {n_windows, c.n_kv_heads, n_tiles, n_tiles}, compressed));
        if (params.save_qk) {
            q_sets.push_back(layer_groups[l].create_dataset(
                "q", H5DType::Float32, {n_windows, params.ctx, c.n_heads, c.head_dim}, compressed));
            k_sets.push_back(layer_groups[l].create_dataset(
                "k", H5DType::Float32, {n_windows, c.n_kv_heads, params.ctx, c.head_dim}, compressed));
        }
    }

    Transformer runtime(model.weights);
    CaptureAttention capture(c.n_layers, params.tile, params.save_qk);
    // Always fp32 (no --kv-dtype): a capture records the attention statistics the schedules are calibrated on, and
    // its artifacts and keys serve runs of every KV dtype (as of every matmul precision).
    KvCache cache(c, params.ctx, 0, KvDType::F32);
    std::vector<float> hidden(static_cast<size_t>(params.ctx) * c.dim);
    ProgressLine progress("capture", n_windows, "windows");
    for (int64_t w = 0; w < n_windows; ++w) {
        const TokenWindow window{params.token_offset + w * per_window, params.token_offset + (w + 1) * per_window};
        const std::vector<int32_t> input = window_input(text.tokens, window, start);
        cache.clear();
        runtime.forward(input, cache, capture, hidden.data());
        for (int l = 0; l < c.n_layers; ++l) {
            mass_sets[l].write_rows<float>(w, capture.tile_mass(l).mass);
            if (params.save_qk) {
                q_sets[l].write_rows<float>(w, capture.queries(l));
                k_sets[l].write_rows<float>(w, capture.keys(l));
            }
        }
        progress.update(w + 1);
    }
    progress.finish();
    for (int l = 0; l < c.n_layers; ++l) {
        layer_groups[l].set_attr("importance", capture.importance(l));
        // The window the tile mass was pooled under (0 = none, or one covering the whole context), so a reader can
        // tell which key tiles were candidates at all.
        const int window = c.window(l);
        layer_groups[l].set_attr("window", static_cast<int64_t>(window >= params.ctx ? 0 : window));
    }
    layer_groups.clear();
    mass_sets.clear();
    q_sets.clear();
    k_sets.clear();
    writer.commit();

    CaptureRecord detail;
    detail.artifact_key = key;
    detail.model_id = ws.stored_id(model);
    detail.text_id = ws.stored_id(text);
    detail.tokenizer_hash = model.tokenizer_hash;
    detail.token_offset = params.token_offset;
    detail.n_tokens = n_windows * per_window;
    detail.ctx = params.ctx;
    detail.tile = params.tile;
    detail.save_qk = params.save_qk ? 1 : 0;
    ws.db().insert_artifact(make_artifact_record(ws, header, detail.model_id, kCaptureFormatVersion), detail);
    return {key, false};
}

}  // namespace kascade
