// io/store/records.cpp: the column lists of the results-database records (see records.h).
#include "io/store/records.h"

namespace kascade {

const std::vector<Field<ModelRecord>>& ModelRecord::fields() {
    using R = ModelRecord;
    static const std::vector<Field<R>> f = {
        {"hash", &R::hash},
        {"path", &R::path},
        {"format", &R::format},
        {"model_type", &R::model_type},
        {"n_layers", &R::n_layers},
        {"n_heads", &R::n_heads},
        {"n_kv_heads", &R::n_kv_heads},
        {"head_dim", &R::head_dim},
        {"dim", &R::dim},
        {"vocab_size", &R::vocab_size},
        {"created_at", &R::created_at},
    };
    return f;
}

const std::vector<Field<TextRecord>>& TextRecord::fields() {
    using R = TextRecord;
    static const std::vector<Field<R>> f = {
        {"hash", &R::hash}, {"path", &R::path}, {"bytes", &R::bytes}, {"created_at", &R::created_at}};
    return f;
}

const std::vector<Field<ArtifactRecord>>& ArtifactRecord::fields() {
    using R = ArtifactRecord;
    static const std::vector<Field<R>> f = {
        {"key", &R::key},
        {"stage", &R::stage},
        {"path", &R::path},
        {"model_id", &R::model_id},
        {"format_version", &R::format_version},
        {"params_json", &R::params_json},
        {"input_keys_json", &R::input_keys_json},
        {"bytes", &R::bytes},
        {"created_at", &R::created_at},
        {"checksum", &R::checksum},
    };
    return f;
}

const std::vector<Field<CaptureRecord>>& CaptureRecord::fields() {
    using R = CaptureRecord;
    static const std::vector<Field<R>> f = {
        {"artifact_key", &R::artifact_key},
        {"model_id", &R::model_id},
        {"text_id", &R::text_id},
        {"tokenizer_hash", &R::tokenizer_hash},
        {"token_offset", &R::token_offset},
        {"n_tokens", &R::n_tokens},
        {"ctx", &R::ctx},
        {"tile", &R::tile},
        {"save_qk", &R::save_qk},
    };
    return f;
}

const std::vector<Field<SimilarityRecord>>& SimilarityRecord::fields() {
    using R = SimilarityRecord;
    static const std::vector<Field<R>> f = {
        {"artifact_key", &R::artifact_key},
        {"capture_key", &R::capture_key},
        {"topk_tiles", &R::topk_tiles},
        {"topk_pct", &R::topk_pct},
        {"k_min", &R::k_min},
        {"metrics_json", &R::metrics_json},
    };
    return f;
}

const std::vector<Field<ScheduleRecord>>& ScheduleRecord::fields() {
    using R = ScheduleRecord;
    static const std::vector<Field<R>> f = {
        {"key", &R::key},
        {"similarity_key", &R::similarity_key},
        {"model_id", &R::model_id},
        {"policy", &R::policy},
        {"threshold", &R::threshold},
        {"max_reuse_dist", &R::max_reuse_dist},
        {"n_anchors", &R::n_anchors},
        {"anchor_list", &R::anchor_list},
        {"metric", &R::metric},
        {"aggregation", &R::aggregation},
        {"head_map", &R::head_map},
        {"n_layers", &R::n_layers},
        {"n_anchor_layers", &R::n_anchor_layers},
        {"n_reuse_layers", &R::n_reuse_layers},
        {"created_at", &R::created_at},
    };
    return f;
}

const std::vector<Field<ScheduleLayerRecord>>& ScheduleLayerRecord::fields() {
    using R = ScheduleLayerRecord;
    static const std::vector<Field<R>> f = {
        {"schedule_id", &R::schedule_id},
        {"layer", &R::layer},
        {"role", &R::role},
        {"anchor_layer", &R::anchor_layer},
        {"head_map_json", &R::head_map_json},
        {"similarity", &R::similarity},
    };
    return f;
}

const std::vector<Field<RunRecord>>& RunRecord::fields() {
    using R = RunRecord;
    static const std::vector<Field<R>> f = {
        {"key", &R::key},
        {"model_id", &R::model_id},
        {"text_id", &R::text_id},
        {"schedule_id", &R::schedule_id},
        {"method", &R::method},
        {"tile", &R::tile},
        {"topk_tiles", &R::topk_tiles},
        {"topk_pct", &R::topk_pct},
        {"k_min", &R::k_min},
        {"sink_tokens", &R::sink_tokens},
        {"window_tokens", &R::window_tokens},
        {"ctx", &R::ctx},
        {"token_offset", &R::token_offset},
        {"n_tokens", &R::n_tokens},
        {"git_commit", &R::git_commit},
        {"machine", &R::machine},
        {"threads", &R::threads},
        {"started_at", &R::started_at},
        {"finished_at", &R::finished_at},
        {"status", &R::status},
        // Added by schema version 2 (columns appended to the table).
        {"key_granularity", &R::key_granularity},
        {"k_rule", &R::k_rule},
        {"round_k", &R::round_k},
        {"pooling", &R::pooling},
        // Added by schema version 4.
        {"phase", &R::phase},
        {"prompt_tokens", &R::prompt_tokens},
        {"decode_tokens", &R::decode_tokens},
        {"page_size", &R::page_size},
        // Added by schema version 9.
        {"selection_layers", &R::selection_layers},
        {"window_ratio", &R::window_ratio},
        // Added by schema version 10.
        {"matmul", &R::matmul},
        // Added by schema version 11.
        {"kv_dtype", &R::kv_dtype},
    };
    return f;
}

const std::vector<Field<TaskRunRecord>>& TaskRunRecord::fields() {
    using R = TaskRunRecord;
    static const std::vector<Field<R>> f = {
        {"key", &R::key},
        {"model_id", &R::model_id},
        {"text_id", &R::text_id},
        {"schedule_id", &R::schedule_id},
        {"task", &R::task},
        {"metric", &R::metric},
        {"seed", &R::seed},
        {"max_new_tokens", &R::max_new_tokens},
        {"prefill", &R::prefill},
        {"method", &R::method},
        {"tile", &R::tile},
        {"topk_tiles", &R::topk_tiles},
        {"topk_pct", &R::topk_pct},
        {"k_min", &R::k_min},
        {"k_rule", &R::k_rule},
        {"round_k", &R::round_k},
        {"key_granularity", &R::key_granularity},
        {"pooling", &R::pooling},
        {"page_size", &R::page_size},
        {"git_commit", &R::git_commit},
        {"machine", &R::machine},
        {"created_at", &R::created_at},
        // Added by schema version 8.
        {"dataset_name", &R::dataset_name},
        {"max_length", &R::max_length},
        {"chat_template", &R::chat_template},
        // Added by schema version 9.
        {"selection_layers", &R::selection_layers},
        {"window_ratio", &R::window_ratio},
        // Added by schema version 10.
        {"matmul", &R::matmul},
        // Added by schema version 11.
        {"kv_dtype", &R::kv_dtype},
    };
    return f;
}

const std::vector<Field<TaskSampleRecord>>& TaskSampleRecord::fields() {
    using R = TaskSampleRecord;
    static const std::vector<Field<R>> f = {
        {"task_run_id", &R::task_run_id},
        {"length", &R::length},
        {"depth_pct", &R::depth_pct},
        {"sample_index", &R::sample_index},
        {"needle_depth", &R::needle_depth},
        {"expected_json", &R::expected_json},
        {"generated", &R::generated},
        {"score", &R::score},
        {"generated_tokens", &R::generated_tokens},
        {"density", &R::density},
        {"prefill_tokens_per_s", &R::prefill_tokens_per_s},
        {"decode_tokens_per_s", &R::decode_tokens_per_s},
        {"threads", &R::threads},
        {"finished_at", &R::finished_at},
        {"batch", &R::batch},
    };
    return f;
}

const std::vector<Field<DatasetSampleRecord>>& DatasetSampleRecord::fields() {
    using R = DatasetSampleRecord;
    static const std::vector<Field<R>> f = {
        {"task_run_id", &R::task_run_id},
        {"sample_index", &R::sample_index},
        {"sample_id", &R::sample_id},
        {"prompt_tokens", &R::prompt_tokens},
        {"full_tokens", &R::full_tokens},
        {"cut_at", &R::cut_at},
        {"answers_json", &R::answers_json},
        {"generated", &R::generated},
        {"score", &R::score},
        {"generated_tokens", &R::generated_tokens},
        {"density", &R::density},
        {"prefill_tokens_per_s", &R::prefill_tokens_per_s},
        {"decode_tokens_per_s", &R::decode_tokens_per_s},
        {"threads", &R::threads},
        {"finished_at", &R::finished_at},
        {"batch", &R::batch},
    };
    return f;
}

const std::vector<Field<RunMetrics>>& RunMetrics::fields() {
    using R = RunMetrics;
    static const std::vector<Field<R>> f = {
        {"run_id", &R::run_id},
        {"n_scored", &R::n_scored},
        {"nll_dense", &R::nll_dense},
        {"ppl_dense", &R::ppl_dense},
        {"nll_sparse", &R::nll_sparse},
        {"ppl_sparse", &R::ppl_sparse},
        {"degradation_pct", &R::degradation_pct},
        {"density", &R::density},
        {"tokens_per_s", &R::tokens_per_s},
        {"attn_ms_dense", &R::attn_ms_dense},
        {"attn_ms_anchor", &R::attn_ms_anchor},
        {"attn_ms_reuse", &R::attn_ms_reuse},
        {"wall_s", &R::wall_s},
    };
    return f;
}

const std::vector<Field<RunLayerRecord>>& RunLayerRecord::fields() {
    using R = RunLayerRecord;
    static const std::vector<Field<R>> f = {
        {"run_id", &R::run_id},
        {"layer", &R::layer},
        {"role", &R::role},
        {"anchor_layer", &R::anchor_layer},
        {"density", &R::density},
        {"attn_ms", &R::attn_ms},
        {"out_rel_error", &R::out_rel_error},
    };
    return f;
}

const std::vector<Field<KernelBenchRecord>>& KernelBenchRecord::fields() {
    using R = KernelBenchRecord;
    static const std::vector<Field<R>> f = {
        {"name", &R::name},       {"shape_json", &R::shape_json},
        {"threads", &R::threads}, {"time_ms", &R::time_ms},
        {"gflops", &R::gflops},   {"gbps", &R::gbps},
        {"speedup", &R::speedup}, {"git_commit", &R::git_commit},
        {"machine", &R::machine}, {"created_at", &R::created_at},
    };
    return f;
}

const std::vector<Field<SweepRecord>>& SweepRecord::fields() {
    using R = SweepRecord;
    static const std::vector<Field<R>> f = {
        {"key", &R::key}, {"file", &R::file}, {"n_jobs", &R::n_jobs}, {"created_at", &R::created_at}};
    return f;
}

const std::vector<Field<SweepJobRecord>>& SweepJobRecord::fields() {
    using R = SweepJobRecord;
    static const std::vector<Field<R>> f = {
        {"sweep_key", &R::sweep_key}, {"job_index", &R::job_index}, {"stage", &R::stage},
        {"job_key", &R::job_key},     {"label", &R::label},         {"depends_on", &R::depends_on},
        {"task_grid", &R::task_grid},
    };
    return f;
}

const std::vector<Field<JobFailureRecord>>& JobFailureRecord::fields() {
    using R = JobFailureRecord;
    static const std::vector<Field<R>> f = {
        {"sweep_key", &R::sweep_key}, {"job_index", &R::job_index}, {"job_key", &R::job_key},
        {"machine", &R::machine},     {"error", &R::error},         {"failed_at", &R::failed_at},
    };
    return f;
}

const std::vector<Field<SlurmArrayRecord>>& SlurmArrayRecord::fields() {
    using R = SlurmArrayRecord;
    static const std::vector<Field<R>> f = {
        {"job_id", &R::job_id},           {"sweep_key", &R::sweep_key}, {"level", &R::level},
        {"job_indices", &R::job_indices}, {"script", &R::script},       {"submitted_at", &R::submitted_at},
    };
    return f;
}

}  // namespace kascade
