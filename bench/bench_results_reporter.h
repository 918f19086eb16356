// bench/bench_results_reporter.h: optional recording of benchmark rows into a kascade results database
// (table kernel_bench), so that speed measurements can be queried beside the perplexity runs:
//   bench_attention --results results       then   kascade query sql "SELECT * FROM kernel_bench"
// The console output is unchanged; every iteration row is stored with its counters, thread count, git commit and
// machine.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "io/host_info.h"
#include "io/store/results_db.h"

namespace kascade {

class ResultsDbReporter : public benchmark::ConsoleReporter {
  public:
    explicit ResultsDbReporter(const std::filesystem::path& results_dir)
        : db_(results_dir), machine_(machine_description()) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& run : runs) {
            if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
            KernelBenchRecord row;
            row.name = run.benchmark_name();
            nlohmann::json counters = nlohmann::json::object();
            for (const auto& [name, counter] : run.counters) counters[name] = counter.value;
            row.shape_json = counters.dump();
            row.threads = counters.contains("threads") ? counters["threads"].get<int64_t>() : run.threads;
            // GetAdjustedRealTime() is in run.time_unit; the multiplier converts seconds to that unit.
            row.time_ms = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit) * 1e3;
            row.gflops = counter(run, "GFLOP/s");
            row.gbps = counter(run, "GB/s");
            row.speedup = counter(run, "speedup");
            row.git_commit = KASCADE_GIT_COMMIT;
            row.machine = machine_;
            row.created_at = utc_now();
            db_.insert_kernel_bench(row);
        }
    }

    /// Removes "--results DIR" / "--results=DIR" from argv (Google Benchmark rejects flags it does not know).
    static std::optional<std::filesystem::path> take_results_flag(int& argc, char** argv) {
        std::optional<std::filesystem::path> dir;
        int out = 1;
        for (int i = 1; i < argc; ++i) {
            if (std::strcmp(argv[i], "--results") == 0 && i + 1 < argc) {
                dir = argv[++i];
            } else if (std::strncmp(argv[i], "--results=", 10) == 0) {
                dir = argv[i] + 10;
            } else {
                argv[out++] = argv[i];
            }
        }
        argc = out;
        return dir;
    }

  private:
    static std::optional<double> counter(const Run& run, const char* name) {
        const auto it = run.counters.find(name);
        return it == run.counters.end() ? std::nullopt : std::optional<double>(it->second.value);
    }

    ResultsDb db_;
    std::string machine_;
};

/// Runs the registered benchmarks, recording them in the results database when --results was given.
inline void run_benchmarks(const std::optional<std::filesystem::path>& results_dir) {
    if (results_dir) {
        ResultsDbReporter reporter(*results_dir);
        benchmark::RunSpecifiedBenchmarks(&reporter);
    } else {
        benchmark::RunSpecifiedBenchmarks();
    }
}

}  // namespace kascade
