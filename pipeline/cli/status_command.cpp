// kascade status: what the results folder holds, and what is stale (an artifact file gone, or its model or text
// file changed since it was made); per sweep, how many jobs are done, pending (queued or running on Slurm, or not
// yet run) and failed.
#include <cstdio>
#include <map>
#include <set>

#include "base/error.h"
#include "io/file_util.h"
#include "io/store/h5_file.h"
#include "io/store/table_format.h"
#include "pipeline/cli/commands.h"
#include "pipeline/stages/workspace.h"
#include "pipeline/sweep/sweep.h"
#include "pipeline/sweep/sweep_slurm.h"

namespace kascade::cli {

namespace {

/// "ok", or why the artifact cannot be trusted any more. The file's checksum and then its root attributes are
/// checked against its row, so a truncated, damaged or replaced file is reported rather than found by the next
/// stage.
std::string artifact_state(const std::filesystem::path& results_dir, const ArtifactRecord& artifact,
                           const std::string& model_state, bool& file_ok) {
    file_ok = false;
    const std::filesystem::path file = results_dir / artifact.path;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return "stale: file missing";
    const std::uintmax_t bytes = std::filesystem::file_size(file, ec);
    if (ec || bytes != static_cast<std::uintmax_t>(artifact.bytes)) {
        return fmt::format("bad: {} bytes, recorded {}", ec ? 0 : bytes, artifact.bytes);
    }
    try {
        H5ArtifactReader reader(results_dir, artifact, artifact.format_version, artifact.format_version);
    } catch (const Error& e) {
        return fmt::format("bad: {}", e.what());
    }
    file_ok = true;
    return model_state;
}

/// Per sweep: jobs done, pending (of which queued/running on Slurm) and failed. A job is failed when it is not
/// done and its last attempt ended with an error (recorded by kascade), or its Slurm task has ended (failed,
/// cancelled, timed out, out of memory, or no longer queued); pending otherwise.
QueryResult sweep_status(ResultsDb& db) {
    QueryResult table;
    table.columns = {"sweep", "file", "jobs", "done", "pending", "queued", "running", "failed", "slurm jobs"};
    for (const SweepRecord& sweep : db.list_sweeps()) {
        const std::vector<SweepJobRecord> jobs = db.list_sweep_jobs(sweep.key);
        std::map<int64_t, std::string> task_of;  // job index -> "<array id>_<index>" of its latest submission
        std::vector<std::string> array_ids;
        for (const SlurmArrayRecord& a : db.list_slurm_arrays(sweep.key)) {
            array_ids.push_back(a.job_id);
            for (int64_t index : nlohmann::json::parse(a.job_indices).get<std::vector<int64_t>>())
                task_of[index] = a.job_id + "_" + std::to_string(index);
        }
        const SlurmTaskStates slurm = slurm_task_states(array_ids);
        std::map<int64_t, std::string> failed_at;  // job index -> time of its last recorded failure
        for (const JobFailureRecord& f : db.list_job_failures(sweep.key)) failed_at[f.job_index] = f.failed_at;
        int64_t done = 0, pending = 0, queued = 0, running = 0, failed = 0;
        for (const SweepJobRecord& job : jobs) {
            if (job_output_stored(db, job.stage, job.job_key, job.task_grid.value_or(""))) {
                ++done;
                continue;
            }
            std::string state;
            if (auto t = task_of.find(job.job_index); t != task_of.end()) {
                auto s = slurm.states.find(t->second);
                if (s != slurm.states.end()) {
                    state = s->second;
                } else if (slurm.queue_known) {
                    state = "ENDED";  // submitted, not queued, no result: cancelled or lost
                }
            }
            static const std::set<std::string> kQueued = {"PENDING",     "CONFIGURING", "REQUEUED",     "REQUEUE_HOLD",
                                                          "REQUEUE_FED", "SUSPENDED",   "RESV_DEL_HOLD"};
            static const std::set<std::string> kRunning = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT",
                                                           "RESIZING"};
            if (kQueued.count(state)) {
                ++pending;
                ++queued;
            } else if (kRunning.count(state)) {
                ++pending;
                ++running;
            } else if (failed_at.count(job.job_index) || !state.empty()) {
                // Recorded as failed, or its task ended (failed, cancelled, timed out, ...) without a result.
                ++failed;
            } else {
                ++pending;
            }
        }
        std::string ids;
        for (const std::string& id : array_ids) ids += (ids.empty() ? "" : ",") + id;
        table.rows.push_back(
            {sweep.key, sweep.file, static_cast<int64_t>(jobs.size()), done, pending, queued, running, failed, ids});
    }
    return table;
}

}  // namespace

void register_status_command(CLI::App& app, const CommonOptions& common) {
    CLI::App* cmd = app.add_subcommand("status", "List artifacts, schedules and runs, and which are stale");
    cmd->footer(
        "Every artifact file is checked against its row (checksum, size, root attributes). Artifacts stored by an\n"
        "older kascade have no checksum: --verify records one for each whose size and attributes check out (the only\n"
        "way status writes to the database).\n"
        "Example:\n  kascade status --results results [--verify]");
    auto verify = std::make_shared<bool>(false);
    cmd->add_flag("--verify", *verify, "record a checksum for every good artifact stored without one");
    cmd->callback([&common, verify] {
        // Read-only: status on a mistyped --results is an error, never a new empty results folder.
        const std::filesystem::path results_dir = common.results_dir;
        ResultsDb db(results_dir, DbAccess::ReadOnly);
        std::map<int64_t, std::string> model_state;  // by model id: "ok" or why stale
        auto state_of_model = [&](int64_t id) -> const std::string& {
            auto it = model_state.find(id);
            if (it != model_state.end()) return it->second;
            const auto m = db.find_model(id);
            std::string state = "ok";
            if (!m || !std::filesystem::exists(m->path)) {
                state = "stale: model file missing";
            } else if (model_content_hash(m->path) != m->hash) {
                state = "stale: model file changed";
            }
            return model_state[id] = state;
        };

        QueryResult artifacts;
        artifacts.columns = {"stage", "key", "params", "created_at", "state"};
        std::vector<std::pair<std::string, std::string>> checksums;  // (key, checksum) of verified files without one
        int64_t without_checksum = 0;
        for (const ArtifactRecord& a : db.list_artifacts()) {
            bool file_ok = false;
            artifacts.rows.push_back({a.stage, a.key, a.params_json, a.created_at,
                                      artifact_state(results_dir, a, state_of_model(a.model_id), file_ok)});
            if (a.checksum) continue;
            ++without_checksum;
            if (*verify && file_ok) checksums.emplace_back(a.key, hash_file_hex(results_dir / a.path));
        }
        std::printf("artifacts (%zu) in %s\n", artifacts.rows.size(), (results_dir / "artifacts").c_str());
        write_result(stdout, artifacts, OutputFormat::Table);
        if (!checksums.empty()) {
            ResultsDb writable(results_dir);
            int64_t recorded = 0;
            for (const auto& [key, checksum] : checksums) recorded += writable.record_artifact_checksum(key, checksum);
            std::printf("recorded the checksum of %ld artifacts stored without one\n", static_cast<long>(recorded));
        } else if (without_checksum > 0 && !*verify) {
            std::printf(
                "%ld artifacts were stored without a checksum (by an older kascade): kascade status --verify "
                "records one for each good file\n",
                static_cast<long>(without_checksum));
        }

        QueryResult schedules;
        schedules.columns = {"id",       "policy",  "threshold", "max_reuse_dist", "n_anchors",
                             "head_map", "anchors", "reuse",     "similarity_key"};
        for (const ScheduleRecord& s : db.list_schedules()) {
            auto opt_int = [](const std::optional<int64_t>& v) -> QueryValue {
                return v ? QueryValue(*v) : QueryValue(std::monostate{});
            };
            schedules.rows.push_back({s.id, s.policy, s.threshold ? QueryValue(*s.threshold) : QueryValue{},
                                      opt_int(s.max_reuse_dist), opt_int(s.n_anchors), s.head_map, s.n_anchor_layers,
                                      s.n_reuse_layers, s.similarity_key.value_or("")});
        }
        std::printf("\nschedules (%zu)\n", schedules.rows.size());
        write_result(stdout, schedules, OutputFormat::Table);

        const QueryResult sweeps = sweep_status(db);
        std::printf("\nsweeps (%zu): pending = queued + running on Slurm + not yet run\n", sweeps.rows.size());
        write_result(stdout, sweeps, OutputFormat::Table);

        const std::vector<RunRecord> runs = db.list_runs();
        std::map<std::string, int> by_method;
        for (const RunRecord& r : runs) ++by_method[r.method];
        std::printf("\nruns (%zu):", runs.size());
        for (const auto& [method, n] : by_method) std::printf(" %s %d", method.c_str(), n);
        std::printf("  (kascade query runs lists them)\n");
    });
}

}  // namespace kascade::cli
