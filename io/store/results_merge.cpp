// io/store/results_merge.cpp: merging results folders (see results_merge.h).
#include "io/store/results_merge.h"

#include <algorithm>
#include <map>

#include "io/atomic_file.h"
#include "io/store/record_sql.h"

namespace kascade {

namespace fs = std::filesystem;
using namespace store_sql;

namespace {

/// What the source holds, read in full before anything is written.
struct SourceRows {
    std::vector<ModelRecord> models;
    std::vector<TextRecord> texts;
    std::vector<ArtifactRecord> artifacts;
    std::map<std::string, CaptureRecord> captures;         // by artifact key
    std::map<std::string, SimilarityRecord> similarities;  // by artifact key
    std::vector<ScheduleRecord> schedules;
    std::vector<RunRecord> runs;
    std::vector<TaskRunRecord> task_runs;
};

SourceRows read_source(SQLite::Database& db) {
    SourceRows s;
    s.models = select_records<ModelRecord>(db, "ORDER BY id");
    s.texts = select_records<TextRecord>(db, "ORDER BY id");
    s.artifacts = select_records<ArtifactRecord>(db, "ORDER BY created_at, key");
    for (CaptureRecord& c : select_records<CaptureRecord>(db, "")) s.captures.emplace(c.artifact_key, std::move(c));
    for (SimilarityRecord& r : select_records<SimilarityRecord>(db, ""))
        s.similarities.emplace(r.artifact_key, std::move(r));
    s.schedules = select_records<ScheduleRecord>(db, "ORDER BY id");
    s.runs = select_records<RunRecord>(db, "ORDER BY id");
    s.task_runs = select_records<TaskRunRecord>(db, "ORDER BY id");
    return s;
}

/// The keys to merge: the requested ones and everything they derive from.
std::set<std::string> close_over_inputs(const SourceRows& s, const std::set<std::string>& keys) {
    std::set<std::string> out = keys;
    std::map<std::int64_t, std::string> schedule_key_by_id;
    for (const ScheduleRecord& r : s.schedules) schedule_key_by_id[r.id] = r.key;
    for (const RunRecord& r : s.runs) {
        if (out.count(r.key) && r.schedule_id) out.insert(schedule_key_by_id.at(*r.schedule_id));
    }
    for (const TaskRunRecord& r : s.task_runs) {
        if (out.count(r.key) && r.schedule_id) out.insert(schedule_key_by_id.at(*r.schedule_id));
    }
    for (const ScheduleRecord& r : s.schedules) {
        if (out.count(r.key) && r.similarity_key) out.insert(*r.similarity_key);
    }
    for (const auto& [key, sim] : s.similarities) {
        if (out.count(key)) out.insert(sim.capture_key);
    }
    return out;
}

int stage_order(const std::string& stage) {
    return stage == "capture" ? 0 : stage == "similarity" ? 1 : 2;
}

bool exists_by_key(SQLite::Database& db, std::string_view table, std::string_view column, const std::string& key) {
    SQLite::Statement st(db, fmt::format("SELECT 1 FROM {} WHERE {} = ?", table, column));
    st.bind(1, key);
    return st.executeStep();
}

std::int64_t id_by_key(SQLite::Database& db, std::string_view table, std::string_view column, const std::string& key) {
    SQLite::Statement st(db, fmt::format("SELECT id FROM {} WHERE {} = ?", table, column));
    st.bind(1, key);
    KASCADE_ASSERT(st.executeStep());
    return st.getColumn(0).getInt64();
}

/// Inserts every row of R that dest does not have (a conflict on a unique column = has it); returns the count.
template <class R>
std::int64_t insert_missing(SQLite::Database& dest, const std::vector<R>& rows, std::string_view conflict) {
    std::int64_t added = 0;
    SQLite::Statement st(dest, insert_sql<R>(conflict));
    for (const R& row : rows) {
        st.reset();
        bind_record(st, row);
        st.exec();
        added += dest.getChanges();
    }
    return added;
}

}  // namespace

MergeCounts merge_results(ResultsDb& source, ResultsDb& dest, const std::set<std::string>* keys) {
    const std::string what = fmt::format("merging {} into {}", source.db_file().string(), dest.db_file().string());
    KASCADE_CHECK(source.schema_version() >= 1, "{}: {} holds no results yet", what, source.db_file().string());
    SQLite::Database& src = source.database();
    SQLite::Database& dst = dest.database();
    const SourceRows rows = guarded(source.db_file(), what, [&] { return read_source(src); });
    std::set<std::string> wanted;
    if (keys != nullptr) wanted = close_over_inputs(rows, *keys);
    auto selected = [&](const std::string& key) { return keys == nullptr || wanted.count(key) > 0; };

    MergeCounts counts;
    // Files first: a row is only ever written once its file is in place.
    std::vector<ArtifactRecord> artifacts;
    for (const ArtifactRecord& a : rows.artifacts) {
        if (selected(a.key)) artifacts.push_back(a);
    }
    std::stable_sort(artifacts.begin(), artifacts.end(), [](const ArtifactRecord& a, const ArtifactRecord& b) {
        return stage_order(a.stage) < stage_order(b.stage);
    });
    for (const ArtifactRecord& a : artifacts) {
        const fs::path from = source.results_dir() / a.path, to = dest.results_dir() / a.path;
        if (!fs::exists(from) || fs::exists(to)) continue;
        copy_file_atomic(from, to);
        ++counts.files;
    }

    guarded(dest.db_file(), what, [&] {
        SQLite::Transaction tx(dst, SQLite::TransactionBehavior::IMMEDIATE);
        std::map<std::int64_t, std::int64_t> model_id, text_id, schedule_id;  // source id -> dest id
        auto dest_model = [&](std::int64_t id) {
            auto it = model_id.find(id);
            if (it != model_id.end()) return it->second;
            const auto m = std::find_if(rows.models.begin(), rows.models.end(), [&](auto& r) { return r.id == id; });
            KASCADE_ASSERT(m != rows.models.end());
            insert_record(dst, *m, " ON CONFLICT(hash) DO NOTHING");
            return model_id[id] = id_by_key(dst, ModelRecord::table, "hash", m->hash);
        };
        auto dest_text = [&](std::int64_t id) {
            auto it = text_id.find(id);
            if (it != text_id.end()) return it->second;
            const auto t = std::find_if(rows.texts.begin(), rows.texts.end(), [&](auto& r) { return r.id == id; });
            KASCADE_ASSERT(t != rows.texts.end());
            insert_record(dst, *t, " ON CONFLICT(hash) DO NOTHING");
            return text_id[id] = id_by_key(dst, TextRecord::table, "hash", t->hash);
        };
        if (keys == nullptr) {
            for (const ModelRecord& m : rows.models) dest_model(m.id);
            for (const TextRecord& t : rows.texts) dest_text(t.id);
        }

        for (ArtifactRecord a : artifacts) {
            if (exists_by_key(dst, ArtifactRecord::table, "key", a.key)) {
                ++counts.skipped;
                continue;
            }
            a.model_id = dest_model(a.model_id);
            insert_record(dst, a);
            ++counts.artifacts;
            if (auto c = rows.captures.find(a.key); c != rows.captures.end()) {
                CaptureRecord detail = c->second;
                detail.model_id = dest_model(detail.model_id);
                detail.text_id = dest_text(detail.text_id);
                insert_record(dst, detail, " ON CONFLICT(artifact_key) DO NOTHING");
            }
            if (auto s = rows.similarities.find(a.key); s != rows.similarities.end()) {
                insert_record(dst, s->second, " ON CONFLICT(artifact_key) DO NOTHING");
            }
        }

        for (ScheduleRecord s : rows.schedules) {
            if (!selected(s.key)) continue;
            const std::int64_t source_id = s.id;
            if (exists_by_key(dst, ScheduleRecord::table, "key", s.key)) {
                ++counts.skipped;
            } else {
                s.model_id = dest_model(s.model_id);
                insert_record(dst, s);
                const std::int64_t id = dst.getLastInsertRowid();
                std::vector<ScheduleLayerRecord> layers =
                    select_records<ScheduleLayerRecord>(src, "WHERE schedule_id = ? ORDER BY layer", source_id);
                for (ScheduleLayerRecord& l : layers) l.schedule_id = id;
                insert_missing(dst, layers, "");
                ++counts.schedules;
            }
            schedule_id[source_id] = id_by_key(dst, ScheduleRecord::table, "key", s.key);
        }

        for (RunRecord r : rows.runs) {
            if (!selected(r.key)) continue;
            if (exists_by_key(dst, RunRecord::table, "key", r.key)) {
                ++counts.skipped;
                continue;
            }
            const std::int64_t source_id = r.id;
            r.model_id = dest_model(r.model_id);
            r.text_id = dest_text(r.text_id);
            if (r.schedule_id) r.schedule_id = schedule_id.at(*r.schedule_id);
            insert_record(dst, r);
            const std::int64_t id = dst.getLastInsertRowid();
            std::vector<RunMetrics> metrics = select_records<RunMetrics>(src, "WHERE run_id = ?", source_id);
            std::vector<RunLayerRecord> layers =
                select_records<RunLayerRecord>(src, "WHERE run_id = ? ORDER BY layer", source_id);
            for (RunMetrics& m : metrics) m.run_id = id;
            for (RunLayerRecord& l : layers) l.run_id = id;
            insert_missing(dst, metrics, "");
            insert_missing(dst, layers, "");
            ++counts.runs;
        }

        // A task run the destination has may still lack samples (a shard ran more lengths or depths of it): its
        // samples are merged either way, each (length, depth, index) kept where it is already stored.
        for (TaskRunRecord r : rows.task_runs) {
            if (!selected(r.key)) continue;
            const std::int64_t source_id = r.id;
            if (exists_by_key(dst, TaskRunRecord::table, "key", r.key)) {
                ++counts.skipped;
            } else {
                r.model_id = dest_model(r.model_id);
                if (r.text_id) r.text_id = dest_text(*r.text_id);
                if (r.schedule_id) r.schedule_id = schedule_id.at(*r.schedule_id);
                insert_record(dst, r);
                ++counts.task_runs;
            }
            const std::int64_t id = id_by_key(dst, TaskRunRecord::table, "key", r.key);
            std::vector<TaskSampleRecord> samples = select_records<TaskSampleRecord>(
                src, "WHERE task_run_id = ? ORDER BY length, depth_pct, sample_index", source_id);
            for (TaskSampleRecord& sample : samples) sample.task_run_id = id;
            counts.task_samples +=
                insert_missing(dst, samples, " ON CONFLICT(task_run_id, length, depth_pct, sample_index) DO NOTHING");
        }

        if (keys == nullptr) {
            // Benchmarks have no key: a row equal in every value is the same measurement.
            SQLite::Statement same(dst,
                                   "SELECT 1 FROM kernel_bench WHERE name = ? AND shape_json = ? AND threads = ? AND "
                                   "time_ms = ? AND git_commit = ? AND machine = ? AND created_at = ?");
            for (const KernelBenchRecord& b : select_records<KernelBenchRecord>(src, "ORDER BY id")) {
                same.reset();
                same.bind(1, b.name);
                same.bind(2, b.shape_json);
                same.bind(3, b.threads);
                same.bind(4, b.time_ms);
                same.bind(5, b.git_commit);
                same.bind(6, b.machine);
                same.bind(7, b.created_at);
                if (same.executeStep()) continue;
                insert_record(dst, b);
                ++counts.kernel_bench;
            }
            if (source.schema_version() >= 2) {
                counts.sweeps = insert_missing(dst, select_records<SweepRecord>(src, "ORDER BY created_at, key"),
                                               " ON CONFLICT(key) DO NOTHING");
                insert_missing(dst, select_records<SweepJobRecord>(src, "ORDER BY sweep_key, job_index"),
                               " ON CONFLICT(sweep_key, job_index) DO NOTHING");
                counts.job_failures = insert_missing(dst, select_records<JobFailureRecord>(src, "ORDER BY id"),
                                                     " ON CONFLICT DO NOTHING");
                counts.slurm_arrays = insert_missing(dst, select_records<SlurmArrayRecord>(src, "ORDER BY job_id"),
                                                     " ON CONFLICT(job_id) DO NOTHING");
            }
        }
        tx.commit();
    });
    return counts;
}

}  // namespace kascade
