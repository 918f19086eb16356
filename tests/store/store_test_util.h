// tests/store/store_test_util.h: temporary folders, a small fully linked results database and row counts for the
// store tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "common/error_of.h"
#include "common/temp_dir.h"
#include "io/store/results_db.h"

namespace kascade::test {

inline ModelRecord sample_model() {
    ModelRecord m;
    m.hash = "m0del";
    m.path = "models/stories15M.bin";
    m.format = "llama2c";
    m.model_type = "llama2c";
    m.n_layers = 3;
    m.n_heads = 6;
    m.n_kv_heads = 2;
    m.head_dim = 48;
    m.dim = 288;
    m.vocab_size = 32000;
    return m;
}

inline TextRecord sample_text() {
    return TextRecord{0, "t3xt", "data/tinystories.txt", 12345, ""};
}

/// Ids of the rows sample_store() creates.
struct SampleIds {
    std::int64_t model = 0;
    std::int64_t text = 0;
    std::int64_t schedule = 0;
    std::int64_t run = 0;
};

inline std::vector<ScheduleLayerRecord> sample_schedule_layers() {
    return {
        {0, 0, "dense", std::nullopt, std::nullopt, std::nullopt},
        {0, 1, "reuse", 0, "[0,0]", 0.93},
        {0, 2, "anchor", std::nullopt, std::nullopt, std::nullopt},
    };
}

inline ScheduleRecord sample_schedule(std::int64_t model_id) {
    ScheduleRecord s;
    s.key = "sched-1";
    s.similarity_key = "sim-1";
    s.model_id = model_id;
    s.policy = "threshold";
    s.threshold = 0.9;
    s.max_reuse_dist = 2;
    s.metric = "recall";
    s.aggregation = "min";
    s.head_map = "argmax";
    return s;
}

inline RunRecord sample_run(std::int64_t model_id, std::int64_t text_id, std::optional<std::int64_t> schedule_id) {
    RunRecord r;
    r.key = "run-1";
    r.model_id = model_id;
    r.text_id = text_id;
    r.schedule_id = schedule_id;
    r.method = "kascade";
    r.tile = 16;
    r.topk_tiles = 12;
    r.ctx = 256;
    r.token_offset = 4096;
    r.n_tokens = 2048;
    r.git_commit = "abc123";
    r.machine = "test-host";
    r.threads = 2;
    r.started_at = "2026-01-01T00:00:00Z";
    r.finished_at = "2026-01-01T00:01:00Z";
    return r;
}

inline RunMetrics sample_metrics() {
    RunMetrics m;
    m.n_scored = 2040;
    m.nll_dense = 2.0;
    m.ppl_dense = 7.38906;
    m.nll_sparse = 2.01;
    m.ppl_sparse = 7.46332;
    m.degradation_pct = 1.005;
    m.density = 0.42;
    m.tokens_per_s = 812.5;
    m.attn_ms_dense = 3.5;
    m.attn_ms_reuse = 0.75;
    m.wall_s = 60;
    return m;
}

inline std::vector<RunLayerRecord> sample_run_layers() {
    return {
        {0, 0, "dense", std::nullopt, 1.0, 1.5, 0.0},
        {0, 1, "reuse", 0, 0.3, 0.4, 0.02},
        {0, 2, "anchor", std::nullopt, 0.3, 1.1, 0.01},
    };
}

/// Fills db with one model, text, capture, similarity, schedule (3 layers) and kascade run (3 layers).
inline SampleIds fill_sample_store(ResultsDb& db) {
    SampleIds ids;
    ids.model = db.upsert_model(sample_model());
    ids.text = db.upsert_text(sample_text());
    db.insert_artifact(ArtifactRecord{"cap-1", "capture", "artifacts/capture/cap-1.h5", ids.model, 1, "{\"ctx\":256}",
                                      "{}", 1000, "", std::nullopt},
                       CaptureRecord{"cap-1", ids.model, ids.text, "tok", 0, 2048, 256, 16, 0});
    db.insert_artifact(ArtifactRecord{"sim-1", "similarity", "artifacts/similarity/sim-1.h5", ids.model, 1, "{}",
                                      "{\"capture\":\"cap-1\"}", 500, "", std::nullopt},
                       SimilarityRecord{"sim-1", "cap-1", 12, std::nullopt, std::nullopt, "[\"recall_min\"]"});
    ids.schedule = db.insert_schedule(sample_schedule(ids.model), sample_schedule_layers());
    ids.run = db.insert_run(sample_run(ids.model, ids.text, ids.schedule), sample_metrics(), sample_run_layers()).id;
    return ids;
}

/// The number of rows in `table`, read through the store's own connection.
inline std::int64_t count_rows(ResultsDb& db, const std::string& table) {
    return db.database().execAndGet("SELECT count(*) FROM " + table).getInt64();
}

}  // namespace kascade::test
