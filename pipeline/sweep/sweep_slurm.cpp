#include "pipeline/sweep/sweep_slurm.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "build_info.h"
#include "io/atomic_file.h"
#include "io/file_util.h"
#include "io/store/results_merge.h"
#include "io/store/table_format.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

struct ProgramOutput {
    int exit_code = -1;  ///< 127: the program could not be started
    std::string output;  ///< stdout and stderr
};

/// Runs a program (looked up in PATH, no shell) and collects what it prints.
ProgramOutput run_program(const std::vector<std::string>& argv) {
    int out[2];
    KASCADE_CHECK(::pipe(out) == 0, "cannot create a pipe to run {}: {}", argv[0], std::strerror(errno));
    const pid_t pid = ::fork();
    KASCADE_CHECK(pid >= 0, "cannot run {}: {}", argv[0], std::strerror(errno));
    if (pid == 0) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(out[1], STDERR_FILENO);
        ::close(out[0]);
        ::close(out[1]);
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ProgramOutput result;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(out[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0) result.output.append(buffer, static_cast<size_t>(n));
    }
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

/// Quotes one word for bash.
std::string shell_word(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

/// Quotes one argument of an #SBATCH line for sbatch's own parser (not a shell): a word of plain characters as it
/// is (unless always_quote: paths), anything else in double quotes, with backslash before '"' and '\\'. Quoted, spaces
/// and '#' (which would start a comment) are part of the argument.
std::string sbatch_word(const std::string& s, bool always_quote = false) {
    const bool plain = !always_quote && !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("-_.,:=+/@%").find(c) != std::string_view::npos;
    });
    if (plain) return s;
    std::string q = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') q += '\\';
        q += c;
    }
    return q + "\"";
}

/// A path in an sbatch file name pattern: '%' is Slurm's replacement character, "%%" a literal one.
std::string slurm_pattern_path(const fs::path& path) {
    std::string out;
    for (char c : path.string()) out += c == '%' ? std::string("%%") : std::string(1, c);
    return out;
}

/// Every value written into a batch script passes here: a control character (a newline above all) would end the
/// #SBATCH or shell line it is on and start another, so it is refused, naming the field.
void check_script_field(std::string_view field, const std::string& value) {
    const auto bad = std::find_if(value.begin(), value.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c < 0x20 || c == 0x7f;
    });
    KASCADE_CHECK(bad == value.end(),
                  "{} \"{}\" contains a control character ({}); it would be written into a Slurm batch script, "
                  "where it would end the line",
                  field, escape_for_display(value), escape_for_display(std::string(1, *bad)));
}

/// The fields of the submission that go into its scripts, checked before anything is written.
void check_script_fields(const SlurmSettings& s, const SweepSpec& spec, const fs::path& sweep_file,
                         const fs::path& results_dir, const fs::path& shard_dir) {
    check_script_field("--partition ([slurm] partition)", s.partition);
    check_script_field("--time ([slurm] time)", s.time);
    check_script_field("--mem ([slurm] mem)", s.mem);
    for (const std::string& arg : s.sbatch_args) check_script_field("--sbatch-arg ([slurm] sbatch_args)", arg);
    check_script_field("the sweep file's path", sweep_file.string());
    check_script_field("--results", results_dir.string());
    check_script_field("--shard-dir", shard_dir.string());
    for (const auto& [name, value] : spec.environment) {
        const bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                                std::all_of(name.begin(), name.end(), [](char c) {
                                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                                });
        KASCADE_CHECK(identifier,
                      "{}: ${{{}}} is not a variable name a batch script can export (letters, digits and _)",
                      spec.file.string(), escape_for_display(name));
        check_script_field(fmt::format("{}: the value of ${{{}}}", spec.file.string(), name), value);
    }
}

/// The #SBATCH lines every script of the submission shares.
std::string resource_lines(const SlurmSettings& s) {
    std::string lines;
    if (!s.partition.empty()) lines += "#SBATCH --partition=" + sbatch_word(s.partition) + "\n";
    if (!s.time.empty()) lines += "#SBATCH --time=" + sbatch_word(s.time) + "\n";
    if (s.cpus_per_task > 0) lines += fmt::format("#SBATCH --cpus-per-task={}\n", s.cpus_per_task);
    if (!s.mem.empty()) lines += "#SBATCH --mem=" + sbatch_word(s.mem) + "\n";
    for (const std::string& arg : s.sbatch_args) lines += "#SBATCH " + sbatch_word(arg) + "\n";
    return lines;
}

/// Dependency level of each unstored job among the unstored jobs (-1 for stored ones).
std::vector<int> job_levels(const SweepPlan& plan) {
    std::vector<int> level(plan.jobs.size(), -1);
    for (size_t i = 0; i < plan.jobs.size(); ++i) {  // dependencies always come earlier in the plan
        if (plan.jobs[i].stored) continue;
        level[i] = 0;
        for (int d : plan.jobs[i].depends_on)
            if (level[d] >= 0) level[i] = std::max(level[i], level[d] + 1);
    }
    return level;
}

void write_script(const fs::path& path, const std::string& text) {
    write_file_atomic(path, text);
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
}

/// Merges the shards of an earlier submission of this sweep into the results folder.
void merge_earlier_shards(const fs::path& results_dir, const fs::path& sweep_shards, std::FILE* log) {
    std::error_code ec;
    if (!fs::is_directory(sweep_shards, ec)) return;
    std::vector<fs::path> shards;
    for (const auto& entry : fs::directory_iterator(sweep_shards)) {
        if (fs::exists(entry.path() / ResultsDb::kFileName)) shards.push_back(entry.path());
    }
    if (shards.empty()) return;
    std::sort(shards.begin(), shards.end());
    ResultsDb into(results_dir);
    int64_t runs = 0, artifacts = 0, schedules = 0;
    for (const fs::path& shard : shards) {
        ResultsDb from(shard, DbAccess::ReadOnly);
        const MergeCounts c = merge_results(from, into);
        runs += c.runs;
        artifacts += c.artifacts;
        schedules += c.schedules;
    }
    std::fprintf(log, "merged %zu shards of an earlier submission from %s: %ld runs, %ld schedules, %ld artifacts\n",
                 shards.size(), sweep_shards.c_str(), static_cast<long>(runs), static_cast<long>(schedules),
                 static_cast<long>(artifacts));
}

/// One job array per dependency level of the unstored jobs, the level's jobs in plan order.
std::vector<SlurmArrayJob> arrays_by_level(const SweepPlan& plan) {
    const std::vector<int> level = job_levels(plan);
    const int n_levels = level.empty() ? 0 : *std::max_element(level.begin(), level.end()) + 1;
    std::vector<SlurmArrayJob> arrays;
    for (int l = 0; l < n_levels; ++l) {
        SlurmArrayJob array;
        array.level = l;
        for (size_t i = 0; i < level.size(); ++i)
            if (level[i] == l) array.jobs.push_back(static_cast<int>(i));
        arrays.push_back(array);
    }
    return arrays;
}

/// What every batch script of one submission shares. Paths are absolute: tasks run elsewhere and later.
struct ScriptContext {
    fs::path exe;          ///< this kascade
    fs::path sweep_file;   ///< the sweep file
    fs::path results_dir;  ///< --results
    fs::path shard_dir;    ///< --shard-dir; empty: none
    fs::path logs;         ///< where Slurm writes the tasks' output
    std::string sweep_key;
    std::string header;       ///< the #! line and a comment naming this kascade and the sweep
    std::string resources;    ///< the #SBATCH resource lines
    std::string environment;  ///< an export line per ${VAR} the sweep file uses
    int array_throttle = 0;   ///< [slurm] array_throttle; 0: none
};

ScriptContext script_context(const fs::path& exe, const SweepSpec& spec, const SweepPlan& plan,
                             const fs::path& sweep_file, const fs::path& results_dir, const fs::path& shard_dir,
                             const fs::path& folder, const SlurmSettings& settings) {
    ScriptContext c;
    c.exe = exe;
    c.sweep_file = sweep_file;
    c.results_dir = results_dir;
    c.shard_dir = shard_dir;
    c.logs = folder / "logs";
    c.sweep_key = plan.key;
    c.header = fmt::format("#!/bin/bash\n# Generated by kascade {} ({}) for `kascade sweep {} --slurm`: sweep {}.\n",
                           KASCADE_VERSION, KASCADE_GIT_COMMIT, sweep_file.string(), plan.key);
    c.resources = resource_lines(settings);
    for (const auto& [name, value] : spec.environment)
        c.environment += "export " + name + "=" + shell_word(value) + "\n";
    c.array_throttle = settings.array_throttle;
    return c;
}

/// The batch script of one level's array: each task runs the plan job whose index is its array task id.
std::string render_array_script(const ScriptContext& c, const SweepPlan& plan, const SlurmArrayJob& array) {
    std::string stages;
    std::set<std::string> seen;
    for (int i : array.jobs)
        if (seen.insert(plan.jobs[i].stage).second) stages += (stages.empty() ? "" : ", ") + plan.jobs[i].stage;
    std::string text = c.header;
    text += fmt::format("# Level {}: {} ({} jobs); array task id = the job's index in the sweep's plan.\n", array.level,
                        stages, array.jobs.size());
    text += fmt::format("#SBATCH --job-name=kascade-{}-L{}\n", c.sweep_key.substr(0, 8), array.level);
    text += "#SBATCH --array=" + slurm_array_ranges(array.jobs) +
            (c.array_throttle > 0 ? fmt::format("%{}", c.array_throttle) : "") + "\n";
    text += "#SBATCH --output=" + sbatch_word(slurm_pattern_path(c.logs) + "/%A_%a.out", true) + "\n";
    text += c.resources;
    text += "set -euo pipefail\n" + c.environment;
    text += "export OMP_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n";
    text += "exec " + shell_word(c.exe.string()) + " sweep " + shell_word(c.sweep_file.string()) + " --results " +
            shell_word(c.results_dir.string()) + " --sweep-key " + c.sweep_key +
            " --job-index \"$SLURM_ARRAY_TASK_ID\"" +
            (c.shard_dir.empty() ? "" : " --shard-dir " + shell_word(c.shard_dir.string())) + "\n";
    return text;
}

/// The batch script of the merge job, which runs after the last array: every task's shard into the results.
std::string render_merge_script(const ScriptContext& c) {
    std::string text = c.header;
    text += "# After the last array: merge every task's shard into the results folder (idempotent).\n";
    text += fmt::format("#SBATCH --job-name=kascade-{}-merge\n", c.sweep_key.substr(0, 8));
    text += "#SBATCH --output=" + sbatch_word(slurm_pattern_path(c.logs) + "/merge_%j.out", true) + "\n";
    text += c.resources;
    text += "set -euo pipefail\nshopt -s nullglob\n";
    text += "shards=(" + shell_word((c.shard_dir / c.sweep_key).string()) + "/job-*)\n";
    text += "if [ ${#shards[@]} -eq 0 ]; then echo \"no shard to merge\" >&2; exit 1; fi\n";
    text += "exec " + shell_word(c.exe.string()) + " merge \"${shards[@]}\" --into " +
            shell_word(c.results_dir.string()) + "\n";
    return text;
}

/// The sbatch command of one script; `previous`: the job it waits for (afterany), empty for none.
std::vector<std::string> sbatch_arguments(const fs::path& script, const std::string& previous) {
    std::vector<std::string> argv = {"sbatch", "--parsable"};
    if (!previous.empty()) argv.push_back("--dependency=afterany:" + previous);
    argv.push_back(script.string());
    return argv;
}

/// Writes the script of every array into the submission's folder and, with a shard folder, adds the merge job
/// with its script.
void write_batch_scripts(const ScriptContext& c, const SweepPlan& plan, const fs::path& folder,
                         SlurmSubmission& submission) {
    for (SlurmArrayJob& array : submission.arrays) {
        array.script = folder / fmt::format("level-{}.sbatch", array.level);
        write_script(array.script, render_array_script(c, plan, array));
    }
    if (c.shard_dir.empty()) return;
    SlurmArrayJob merge;
    merge.level = static_cast<int>(submission.arrays.size());
    merge.script = folder / "merge.sbatch";
    write_script(merge.script, render_merge_script(c));
    submission.arrays.push_back(merge);
}

/// Submits the arrays in order, each after the previous one, and logs their job ids; a dry run logs the scripts.
void submit_arrays(std::vector<SlurmArrayJob>& arrays, bool dry_run, std::FILE* log) {
    std::string previous;
    for (SlurmArrayJob& array : arrays) {
        const std::vector<std::string> argv = sbatch_arguments(array.script, previous);
        const std::string what = array.jobs.empty() ? std::string("merge") : fmt::format("level {}", array.level);
        if (dry_run) {
            std::fprintf(log, "%s: %s%s\n", what.c_str(), previous.empty() ? "" : "(after the previous) ",
                         array.script.c_str());
            previous = "<previous job id>";
            continue;
        }
        const ProgramOutput r = run_program(argv);
        KASCADE_CHECK(r.exit_code == 0, "sbatch {} failed (exit code {}): {}", array.script.string(), r.exit_code,
                      r.exit_code == 127 ? "sbatch not found: is Slurm installed here?" : r.output);
        array.job_id = r.output.substr(0, r.output.find_first_of(";\n"));
        previous = array.job_id;
        std::fprintf(log, "%s: job %s (%zu tasks) %s\n", what.c_str(), array.job_id.c_str(),
                     std::max<size_t>(array.jobs.size(), 1), array.script.c_str());
        std::fflush(log);
    }
}

/// Records the sweep and its submitted arrays, so `kascade status` can follow them.
void record_submission(const fs::path& results_dir, const SweepSpec& spec, const SweepPlan& plan,
                       const SlurmSubmission& submission) {
    ResultsDb db(results_dir);
    record_sweep(db, spec, plan);
    for (const SlurmArrayJob& array : submission.arrays) {
        db.record_slurm_array(
            {array.job_id, plan.key, array.level, nlohmann::json(array.jobs).dump(), array.script.string(), utc_now()});
    }
}

}  // namespace

std::string slurm_array_ranges(const std::vector<int>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ",";
        out += j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
        i = j + 1;
    }
    return out;
}

SlurmSubmission submit_sweep_to_slurm(const fs::path& results_dir_arg, const SweepSpec& spec,
                                      const SlurmSubmitOptions& options, std::FILE* log) {
    // Tasks run elsewhere and later: every path they see is absolute.
    const fs::path results_dir = fs::absolute(results_dir_arg).lexically_normal();
    const fs::path sweep_file = fs::absolute(spec.file).lexically_normal();
    const fs::path shard_dir =
        options.shard_dir.empty() ? fs::path() : fs::absolute(options.shard_dir).lexically_normal();
    check_script_fields(options.settings, spec, sweep_file, results_dir, shard_dir);
    SweepPlan plan = plan_sweep(spec);
    check_sweep_inputs(spec, plan);
    if (!shard_dir.empty() && !options.dry_run) merge_earlier_shards(results_dir, shard_dir / plan.key, log);
    mark_stored(results_dir, plan);

    SlurmSubmission submission;
    submission.sweep_key = plan.key;
    submission.folder = results_dir / "slurm" / plan.key;
    submission.arrays = arrays_by_level(plan);
    const int n_levels = static_cast<int>(submission.arrays.size());
    for (const SweepJob& j : plan.jobs) submission.stored += j.stored ? 1 : 0;
    std::fprintf(log, "sweep %s: %zu jobs, %d stored, %zu to submit as %d job arrays (sweep %s)\n", spec.file.c_str(),
                 plan.jobs.size(), submission.stored, plan.jobs.size() - submission.stored, n_levels, plan.key.c_str());
    if (n_levels == 0) return submission;

    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    KASCADE_CHECK(!ec, "cannot find this executable for the batch scripts: {}", ec.message());
    check_script_field("the path of the kascade executable", exe.string());
    fs::create_directories(submission.folder / "logs", ec);
    KASCADE_CHECK(!ec, "cannot create \"{}\": {}", (submission.folder / "logs").string(), ec.message());
    const ScriptContext scripts =
        script_context(exe, spec, plan, sweep_file, results_dir, shard_dir, submission.folder, options.settings);
    write_batch_scripts(scripts, plan, submission.folder, submission);
    submit_arrays(submission.arrays, options.dry_run, log);
    if (!options.dry_run) record_submission(results_dir, spec, plan, submission);
    return submission;
}

SlurmTaskStates slurm_task_states(const std::vector<std::string>& array_job_ids) {
    SlurmTaskStates result;
    if (array_job_ids.empty()) return result;
    std::string ids;
    for (const std::string& id : array_job_ids) ids += (ids.empty() ? "" : ",") + id;
    // Finished tasks first (sacct), then what the controller still knows (squeue) overrides.
    const ProgramOutput acct = run_program({"sacct", "-n", "-X", "-P", "-j", ids, "-o", "JobID,State"});
    if (acct.exit_code == 0) {
        std::istringstream in(acct.output);
        std::string line;
        while (std::getline(in, line)) {
            const size_t bar = line.find('|');
            if (bar == std::string::npos) continue;
            std::string state = line.substr(bar + 1);
            state = state.substr(0, state.find(' '));  // "CANCELLED by 0" -> "CANCELLED"
            result.states[line.substr(0, bar)] = state;
        }
    }
    // One call per array: squeue refuses a list in which one job has left the controller already.
    result.queue_known = true;
    for (const std::string& array : array_job_ids) {
        // --states=all: also the tasks that ended a short while ago (MinJobAge).
        const ProgramOutput queue = run_program({"squeue", "-h", "-r", "--states=all", "-j", array, "-o", "%i %T"});
        if (queue.exit_code != 0) {
            // An array the controller has forgotten has ended; any other error leaves the queue unknown.
            if (queue.output.find("Invalid job id") == std::string::npos) result.queue_known = false;
            continue;
        }
        std::istringstream in(queue.output);
        std::string id, state;
        while (in >> id >> state) result.states[id] = state;
    }
    return result;
}

}  // namespace kascade
