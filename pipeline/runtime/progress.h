// pipeline/runtime/progress.h: a one-line progress report with rate and ETA, drawn on stderr only when stderr is a
// terminal (logs and pipes stay clean).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kascade {

class ProgressLine {
  public:
    /// label: what is being done ("perplexity"); unit: what `done` counts ("tok").
    ProgressLine(std::string label, int64_t total, std::string unit);
    ~ProgressLine();
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    void update(int64_t done);
    /// Clears the line (the caller prints its own summary).
    void finish();

    static bool enabled();  ///< stderr is a terminal

  private:
    std::string label_;
    std::string unit_;
    int64_t total_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_;
    bool drawn_ = false;
    bool enabled_;
};

}  // namespace kascade
