// kascade schedule: stage 3, choose anchor and reuse layers from a similarity artifact.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/stages/schedule_stage.h"

namespace kascade::cli {

namespace {
struct ScheduleArgs {
    std::string similarity;
    ScheduleParams params;
    std::string policy{mode_name(ScheduleParams{}.policy)};
    std::string metric{mode_name(ScheduleParams{}.metric)};
    std::string aggregation{mode_name(ScheduleParams{}.aggregation)};
    std::string head_map{mode_name(ScheduleParams{}.head_map)};
    std::string anchor_list;
    bool force = false;
    bool json = false;
};

std::vector<int> parse_anchor_list(const std::string& s) {
    std::vector<int> anchors;
    size_t begin = 0;
    while (begin <= s.size()) {
        const size_t end = std::min(s.find(',', begin), s.size());
        const std::string item = s.substr(begin, end - begin);
        char* rest = nullptr;
        const long v = std::strtol(item.c_str(), &rest, 10);
        KASCADE_USAGE_CHECK(!item.empty() && *rest == '\0', "invalid --anchor-list '{}': expected layers like 0,2,8",
                            s);
        anchors.push_back(static_cast<int>(v));
        begin = end + 1;
    }
    return anchors;
}
}  // namespace

void register_schedule_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<ScheduleArgs>();
    CLI::App* cmd = app.add_subcommand("schedule", "Stage 3: choose dense, anchor and reuse layers");
    cmd->footer(
        "Stores the schedule in the database (and artifacts/schedule/<key>.h5) and prints its id and layers.\n"
        "Examples:\n"
        "  kascade schedule --similarity 9d0c... --policy threshold --threshold 0.65 --max-reuse-dist 4\n"
        "  kascade schedule --similarity 9d0c... --policy dp --anchors 3\n"
        "  kascade schedule --similarity 9d0c... --policy fixed --anchor-list 0,2 --head-map identity");
    cmd->add_option("--similarity", args->similarity, "similarity key (printed by `kascade similarity`)")->required();
    cmd->add_option("--policy", args->policy, "threshold | dp | fixed")->capture_default_str();
    check_range(cmd->add_option("--threshold", args->params.threshold, "threshold policy: minimum similarity to reuse")
                    ->capture_default_str(),
                param_range::kThreshold);
    check_range(
        cmd->add_option("--max-reuse-dist", args->params.max_reuse_dist, "threshold policy: max layers from the anchor")
            ->capture_default_str(),
        param_range::kMaxReuseDist);
    check_range(cmd->add_option("--anchors", args->params.n_anchors, "dp policy: number of anchors K, layer 0 included")
                    ->capture_default_str(),
                param_range::kAnchors);
    cmd->add_option("--anchor-list", args->anchor_list, "fixed policy: anchor layers, e.g. 0,2,8");
    cmd->add_option("--metric", args->metric, "recall | jaccard")->capture_default_str();
    cmd->add_option("--aggregation", args->aggregation, "over query tiles: mean | min")->capture_default_str();
    cmd->add_option("--head-map", args->head_map, "argmax | identity | pooled")->capture_default_str();
    cmd->add_flag("--force", args->force, "recompute even if the schedule exists");
    cmd->add_flag("--json", args->json,
                  "print one JSON object: schedule_id, schedule_key, cached, layers (layer, role, anchor_layer, "
                  "head_map, similarity)");
    cmd->callback([args, &common] {
        args->params.policy = parse_mode<SchedulePolicy>(args->policy, "--policy");
        args->params.metric = parse_mode<SimilarityMetric>(args->metric, "--metric");
        args->params.aggregation = parse_mode<SimilarityAggregation>(args->aggregation, "--aggregation");
        args->params.head_map = parse_mode<HeadMapMode>(args->head_map, "--head-map");
        if (!args->anchor_list.empty()) args->params.anchor_list = parse_anchor_list(args->anchor_list);
        Workspace ws(common.results_dir);
        const ScheduleResult r = run_schedule(ws, args->similarity, args->params, args->force);
        const auto stored = ws.db().load_schedule(r.id);
        if (args->json) {
            nlohmann::json layers = nlohmann::json::array();
            for (const ScheduleLayerRecord& layer : stored->layers) {
                nlohmann::json l = {{"layer", layer.layer}, {"role", layer.role}};
                if (layer.anchor_layer) {
                    l["anchor_layer"] = *layer.anchor_layer;
                    l["head_map"] = nlohmann::json::parse(layer.head_map_json.value_or("[]"));
                    l["similarity"] = layer.similarity.value_or(0);
                }
                layers.push_back(l);
            }
            const nlohmann::json out = {
                {"schedule_id", r.id}, {"schedule_key", r.key}, {"cached", r.cached}, {"layers", layers}};
            std::printf("%s\n", out.dump().c_str());
            return;
        }
        std::printf("schedule %lld%s\n", static_cast<long long>(r.id), r.cached ? " (cached)" : "");
        for (const ScheduleLayerRecord& layer : stored->layers) {
            std::printf("  layer %2lld  %-6s", static_cast<long long>(layer.layer), layer.role.c_str());
            if (layer.anchor_layer) {
                std::printf("  anchor %lld  heads %s  similarity %.4f", static_cast<long long>(*layer.anchor_layer),
                            layer.head_map_json->c_str(), layer.similarity.value_or(0));
            }
            std::printf("\n");
        }
    });
}

}  // namespace kascade::cli
