#include "pipeline/stages/schedule_stage.h"

#include "base/error.h"
#include "io/store/h5_file.h"
#include "pipeline/stages/artifact_provenance.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/similarity_stage.h"

namespace kascade {

namespace {

nlohmann::json schedule_params_json(const ScheduleParams& p) {
    nlohmann::json j = {{"policy", mode_name(p.policy)},
                        {"metric", mode_name(p.metric)},
                        {"aggregation", mode_name(p.aggregation)},
                        {"head_map", mode_name(p.head_map)}};
    if (p.policy == SchedulePolicy::Threshold) {
        j["threshold"] = p.threshold;
        j["max_reuse_dist"] = p.max_reuse_dist;
    } else if (p.policy == SchedulePolicy::Dp) {
        j["n_anchors"] = p.n_anchors;
    } else {
        j["anchor_list"] = p.anchor_list;
    }
    return j;
}

void check_params(const ScheduleParams& p) {
    if (p.policy == SchedulePolicy::Fixed)
        KASCADE_CHECK(!p.anchor_list.empty(), "policy fixed needs --anchor-list, e.g. 0,2,8");
}

}  // namespace

std::string schedule_key(const std::string& similarity_key, const ScheduleParams& params) {
    return content_key("schedule", kScheduleFormatVersion, {{"similarity", similarity_key}},
                       schedule_params_json(params));
}

AttentionSchedule attention_schedule_from(const Schedule& stored) {
    AttentionSchedule s;
    s.layers.resize(stored.layers.size());
    for (const ScheduleLayerRecord& row : stored.layers) {
        LayerPlan& plan = s.layers.at(row.layer);
        plan.role = parse_mode<LayerRole>(row.role, "schedule_layers.role");
        if (row.anchor_layer) plan.anchor = static_cast<int>(*row.anchor_layer);
        if (row.head_map_json) plan.head_map = nlohmann::json::parse(*row.head_map_json).get<std::vector<int32_t>>();
    }
    return s;
}

ScheduleResult run_schedule(Workspace& ws, const std::string& similarity_key, const ScheduleParams& params,
                            bool force) {
    check_params(params);
    const LayerSimilarity sim = load_layer_similarity(ws, similarity_key, params.metric, params.aggregation);
    const std::string key = schedule_key(similarity_key, params);
    if (!force) {
        // A deleted schedule file is made again (its row stays and keeps its id).
        const auto existing = ws.db().find_schedule(key);
        if (existing && ws.has_artifact(key)) return {existing->record.id, key, true};
    }

    const HeadMapMode mode = params.head_map;
    AttentionSchedule schedule;
    if (params.policy == SchedulePolicy::Threshold) {
        schedule = schedule_threshold(sim, params.threshold, params.max_reuse_dist, mode);
    } else if (params.policy == SchedulePolicy::Dp) {
        schedule = schedule_dp(sim, params.n_anchors, mode);
    } else {
        schedule = schedule_fixed(sim, params.anchor_list, mode);
    }

    const int L = sim.n_layers, H = sim.n_kv_heads;
    std::vector<int8_t> roles(L);
    std::vector<int32_t> anchors(L, -1), head_maps(static_cast<size_t>(L) * H, -1);
    std::vector<ScheduleLayerRecord> layers(L);
    for (int l = 0; l < L; ++l) {
        const LayerPlan& plan = schedule.layers[l];
        roles[l] = static_cast<int8_t>(plan.role);
        layers[l].layer = l;
        layers[l].role = std::string(mode_name(plan.role));
        if (plan.role == LayerRole::Reuse) {
            anchors[l] = plan.anchor;
            std::copy(plan.head_map.begin(), plan.head_map.end(), head_maps.begin() + static_cast<size_t>(l) * H);
            layers[l].anchor_layer = plan.anchor;
            layers[l].head_map_json = nlohmann::json(plan.head_map).dump();
            layers[l].similarity = sim.layer_score(plan.anchor, l);
        }
    }

    // The artifact first, then the rows: a crash in between leaves a file no row points to (recomputed next time).
    const std::optional<ArtifactRecord> sim_record = ws.db().find_artifact(similarity_key);
    ArtifactHeader input_header;
    {
        H5ArtifactReader sim_file(ws.results_dir(), *sim_record, kSimilarityFormatVersion, kSimilarityFormatVersion);
        input_header = read_artifact_header(sim_file.root());
    }
    const ArtifactHeader header =
        make_artifact_header("schedule", key, {{"similarity", similarity_key}}, schedule_params_json(params),
                             input_header.model_hash, input_header.text_hash, input_header.tokenizer_hash);
    H5ArtifactWriter writer(ws.new_artifact_path("schedule", key), kScheduleFormatVersion);
    write_artifact_header(writer.root(), header);
    H5Group& root = writer.root();
    root.set_attr("policy", std::string(mode_name(params.policy)));
    if (params.policy == SchedulePolicy::Threshold) {
        root.set_attr("threshold", params.threshold);
        root.set_attr("max_reuse_dist", params.max_reuse_dist);
    } else if (params.policy == SchedulePolicy::Dp) {
        root.set_attr("n_anchors", params.n_anchors);
    } else {
        const std::vector<int64_t> list(params.anchor_list.begin(), params.anchor_list.end());
        root.set_attr_array<int64_t>("anchor_list", list);
    }
    root.set_attr("metric", std::string(mode_name(params.metric)));
    root.set_attr("aggregation", std::string(mode_name(params.aggregation)));
    root.set_attr("head_map", std::string(mode_name(params.head_map)));
    root.set_attr("n_layers", L);
    root.set_attr("n_kv_heads", H);
    root.write_dataset<int8_t>("role", roles, {L});
    root.write_dataset<int32_t>("anchor", anchors, {L});
    root.write_dataset<int32_t>("head_map", head_maps, {L, H});
    writer.commit();

    ws.db().insert_artifact(make_artifact_record(ws, header, sim_record->model_id, kScheduleFormatVersion));

    ScheduleRecord record;
    record.key = key;
    record.similarity_key = similarity_key;
    record.model_id = sim_record->model_id;
    record.policy = std::string(mode_name(params.policy));
    if (params.policy == SchedulePolicy::Threshold) {
        record.threshold = params.threshold;
        record.max_reuse_dist = params.max_reuse_dist;
    } else if (params.policy == SchedulePolicy::Dp) {
        record.n_anchors = params.n_anchors;
    } else {
        record.anchor_list = nlohmann::json(params.anchor_list).dump();
    }
    record.metric = std::string(mode_name(params.metric));
    record.aggregation = std::string(mode_name(params.aggregation));
    record.head_map = std::string(mode_name(params.head_map));
    const int64_t id = ws.db().insert_schedule(record, layers);
    return {id, key, false};
}

}  // namespace kascade
