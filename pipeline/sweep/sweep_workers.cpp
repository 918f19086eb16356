// pipeline/sweep/sweep_workers.cpp: `kascade sweep --jobs N`: N worker processes of this executable, each
// loading the model and text once, fed one job at a time by the sweep process, which hands out the next job
// whose inputs are stored (see sweep.h).
//
// Protocol, one line each way per job: the sweep writes "<index>\n" to a worker's stdin; the worker answers on
// its stdout "<index> ok <cached 0|1> <seconds> <summary>\n" or "<index> fail <message>\n". A worker's stderr is
// passed through. End of stdin ends a worker; a worker that dies fails the job it had.
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include "base/error.h"
#include "pipeline/sweep/sweep.h"
#include "pipeline/sweep/sweep_scheduler.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

struct Worker {
    pid_t pid = -1;
    int to = -1;    ///< its stdin
    int from = -1;  ///< its stdout
    int err = -1;   ///< its stderr
    std::string buffer;
    int job = -1;  ///< the job it runs, -1 when idle
};

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

Worker spawn_worker(const fs::path& exe, const std::vector<std::string>& args, int threads) {
    int in[2], out[2], err[2];
    KASCADE_CHECK(::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0,
                  "cannot create pipes for a sweep worker: {}", std::strerror(errno));
    const pid_t pid = ::fork();
    KASCADE_CHECK(pid >= 0, "cannot start a sweep worker: {}", std::strerror(errno));
    if (pid == 0) {
        ::dup2(in[0], STDIN_FILENO);
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
        std::vector<char*> argv;
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    Worker w;
    w.pid = pid;
    w.to = in[1];
    w.from = out[0];
    w.err = err[0];
    return w;
}

std::string exit_description(int status) {
    if (WIFSIGNALED(status))
        return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return fmt::format("exited with status {}", WEXITSTATUS(status));
}

/// The command line of a worker: `kascade sweep FILE --results DIR --worker --sweep-key KEY [--force]`.
std::vector<std::string> worker_arguments(const fs::path& results_dir, const SweepSpec& spec, const SweepPlan& plan,
                                          bool force) {
    std::vector<std::string> args = {
        "kascade",     "sweep", fs::absolute(spec.file).string(), "--results", results_dir.string(), "--worker",
        "--sweep-key", plan.key};
    if (force) args.push_back("--force");
    return args;
}

/// The scheduler of a plan's jobs: their dependencies, the stored ones done.
SweepScheduler plan_scheduler(const SweepPlan& plan) {
    std::vector<std::vector<int>> depends_on;
    std::vector<bool> stored;
    for (const SweepJob& job : plan.jobs) {
        depends_on.push_back(job.depends_on);
        stored.push_back(job.stored);
    }
    return SweepScheduler(std::move(depends_on), stored);
}

/// The worker processes of one sweep and the I/O with them: jobs handed out as the scheduler says, answers read
/// and logged, stderr passed through.
class WorkerPool {
  public:
    WorkerPool(const SweepPlan& plan, SweepScheduler& scheduler, std::FILE* log)
        : plan_(plan), scheduler_(scheduler), log_(log) {}

    void start(const fs::path& exe, const std::vector<std::string>& args, int n_workers, int threads) {
        for (int w = 0; w < n_workers; ++w) workers_.push_back(spawn_worker(exe, args, threads));
    }

    /// Runs jobs until none runs: everything done, or what is left waits for a failed job.
    void run() {
        for (;;) {
            hand_out_jobs();
            if (!scheduler_.any_running()) return;
            wait_for_output();
        }
    }

    /// Logs the jobs that never started (an input failed) and counts them failed.
    void log_skipped_jobs() {
        const int n_jobs = static_cast<int>(plan_.jobs.size());
        for (int i : scheduler_.waiting()) {
            ++totals_.failed;
            std::fprintf(log_, "[%3d/%d] %-10s skipped  %s: an input job failed\n", i + 1, n_jobs,
                         plan_.jobs[i].stage.c_str(), plan_.jobs[i].label.c_str());
        }
    }

    /// End of input stops the workers; what they still print on stderr is passed on.
    void stop() {
        for (Worker& w : workers_) close_fd(w.to);
        for (Worker& w : workers_) {
            char chunk[4096];
            ssize_t n;
            while (w.err >= 0 && (n = ::read(w.err, chunk, sizeof chunk)) > 0) std::fwrite(chunk, 1, n, stderr);
            close_fd(w.err);
            close_fd(w.from);
            if (w.pid > 0) ::waitpid(w.pid, nullptr, 0);
        }
    }

    const WorkerTotals& totals() const { return totals_; }

  private:
    /// Hands the next ready job, in plan order, to every idle worker.
    void hand_out_jobs() {
        for (Worker& w : workers_) {
            if (w.pid < 0 || w.job >= 0) continue;
            const std::optional<int> next = scheduler_.start_next();
            if (!next) break;
            const std::string line = std::to_string(*next) + "\n";
            w.job = *next;
            if (::write(w.to, line.data(), line.size()) != static_cast<ssize_t>(line.size())) worker_gone(w);
        }
    }

    /// Waits for output of any worker and reads it: answers on stdout, messages on stderr.
    void wait_for_output() {
        std::vector<pollfd> fds;
        std::vector<std::pair<Worker*, bool>> owners;  // (worker, is stderr)
        for (Worker& w : workers_) {
            if (w.from >= 0) {
                fds.push_back({w.from, POLLIN, 0});
                owners.emplace_back(&w, false);
            }
            if (w.err >= 0) {
                fds.push_back({w.err, POLLIN, 0});
                owners.emplace_back(&w, true);
            }
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            KASCADE_CHECK(errno == EINTR, "waiting for sweep workers: {}", std::strerror(errno));
            return;
        }
        for (size_t f = 0; f < fds.size(); ++f) {
            if (fds[f].revents == 0) continue;
            Worker& w = *owners[f].first;
            char chunk[4096];
            const ssize_t n = ::read(fds[f].fd, chunk, sizeof chunk);
            if (owners[f].second) {
                pass_stderr(w, chunk, n);
            } else if (n <= 0) {
                worker_gone(w);
            } else {
                read_answers(w, chunk, static_cast<size_t>(n));
            }
        }
    }

    /// Passes on what a worker printed to stderr; at its end, closes it.
    static void pass_stderr(Worker& w, const char* chunk, ssize_t n) {
        if (n > 0) {
            std::fwrite(chunk, 1, static_cast<size_t>(n), stderr);
        } else {
            close_fd(w.err);
        }
    }

    /// Adds output to the worker's buffer and finishes its job for each whole answer line:
    /// "<index> ok <rest>" or "<index> fail <message>".
    void read_answers(Worker& w, const char* chunk, size_t n) {
        w.buffer.append(chunk, n);
        for (size_t eol; (eol = w.buffer.find('\n')) != std::string::npos;) {
            const std::string line = w.buffer.substr(0, eol);
            w.buffer.erase(0, eol + 1);
            std::istringstream in(line);
            int index = -1;
            std::string verdict;
            in >> index >> verdict;
            KASCADE_ASSERT(index == w.job);
            std::string rest;
            std::getline(in >> std::ws, rest);
            finish_job(w, verdict == "ok", rest);
        }
    }

    /// Ends the worker's job and logs it; `rest` is "<cached> <seconds> <summary>" or the failure's message.
    void finish_job(Worker& w, bool ok, const std::string& rest) {
        const int i = w.job;
        w.job = -1;
        scheduler_.finish(i, ok);
        if (ok) {
            std::istringstream in(rest);
            int cached = 0;
            double seconds = 0;
            in >> cached >> seconds;
            std::string summary;
            std::getline(in >> std::ws, summary);
            if (!cached) ++totals_.computed;
            std::fprintf(log_, "%s\n", job_log_line(plan_, i, {cached != 0, summary}, seconds).c_str());
        } else {
            ++totals_.failed;
            std::fprintf(log_, "[%3d/%d] %-10s FAILED   %s: %s\n", i + 1, static_cast<int>(plan_.jobs.size()),
                         plan_.jobs[i].stage.c_str(), plan_.jobs[i].label.c_str(), rest.c_str());
        }
        std::fflush(log_);
    }

    /// A worker whose stdin or stdout closed has ended: reaps it and fails the job it had.
    void worker_gone(Worker& w) {
        close_fd(w.to);
        close_fd(w.from);
        int status = 0;
        ::waitpid(w.pid, &status, 0);
        w.pid = -1;
        if (w.job >= 0) finish_job(w, false, "its worker process " + exit_description(status));
    }

    const SweepPlan& plan_;
    SweepScheduler& scheduler_;
    std::FILE* log_;
    std::vector<Worker> workers_;
    WorkerTotals totals_;
};

}  // namespace

WorkerTotals run_with_workers(const fs::path& results_dir, const SweepSpec& spec, const SweepPlan& plan, int n_workers,
                              bool force, std::FILE* log) {
    SweepScheduler scheduler = plan_scheduler(plan);
    n_workers = std::min(n_workers, scheduler.to_compute());
    const int threads = std::max(1, omp_get_max_threads() / n_workers);
    std::fprintf(log, "%d workers, %d threads each\n", n_workers, threads);
    std::fflush(log);

    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    KASCADE_CHECK(!ec, "cannot find this executable to start sweep workers: {}", ec.message());
    const std::vector<std::string> args = worker_arguments(results_dir, spec, plan, force);
    // A worker that dies makes writes to its stdin fail with EPIPE instead of killing the sweep.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction previous {};
    ::sigaction(SIGPIPE, &ignore, &previous);

    WorkerPool pool(plan, scheduler, log);
    pool.start(exe, args, n_workers, threads);
    pool.run();
    pool.log_skipped_jobs();
    pool.stop();
    ::sigaction(SIGPIPE, &previous, nullptr);
    return pool.totals();
}

void serve_as_worker(const fs::path& results_dir, const SweepPlan& plan, bool force) {
    // Answers go to the original stdout; anything else printed to stdout goes to stderr instead.
    const int answers_fd = ::dup(STDOUT_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    std::FILE* answers = ::fdopen(answers_fd, "w");
    KASCADE_ASSERT(answers != nullptr);
    Workspace ws(results_dir);
    LoadedModel& model = ws.model(plan.model, plan.tokenizer);
    LoadedText& text = ws.text(plan.text, model);
    std::string line;
    while (std::getline(std::cin, line)) {
        const int index = std::stoi(line);
        KASCADE_ASSERT(index >= 0 && index < static_cast<int>(plan.jobs.size()));
        const double start = omp_get_wtime();
        try {
            const JobOutcome outcome = run_sweep_job(ws, model, text, plan.jobs[index], force);
            std::fprintf(answers, "%d ok %d %.3f %s\n", index, outcome.cached ? 1 : 0, omp_get_wtime() - start,
                         outcome.summary.c_str());
        } catch (const std::exception& e) {
            record_job_failure(ws.db(), plan, index, e.what());
            std::string message = e.what();
            std::replace(message.begin(), message.end(), '\n', ' ');
            std::fprintf(answers, "%d fail %s\n", index, message.c_str());
        }
        std::fflush(answers);
    }
    std::fclose(answers);
}

}  // namespace kascade
