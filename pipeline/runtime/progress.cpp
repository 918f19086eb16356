#include "pipeline/runtime/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace kascade {

namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string format_duration(double seconds) {
    const auto s = static_cast<int64_t>(seconds + 0.5);
    if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    return fmt::format("{}:{:02}", s / 60, s % 60);
}
}  // namespace

ProgressLine::ProgressLine(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - kRedrawInterval),
      enabled_(enabled()) {}

ProgressLine::~ProgressLine() {
    finish();
}

bool ProgressLine::enabled() {
    return ::isatty(STDERR_FILENO) == 1;
}

void ProgressLine::update(int64_t done) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < kRedrawInterval && done < total_) return;
    last_draw_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const std::string eta = rate > 0 && done < total_ ? format_duration((total_ - done) / rate) : "-";
    const double pct = total_ > 0 ? 100.0 * done / total_ : 100.0;
    std::fprintf(stderr, "\r\033[K%s %lld/%lld %s (%.0f%%)  %.1f %s/s  elapsed %s  ETA %s", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), unit_.c_str(), pct, rate, unit_.c_str(),
                 format_duration(elapsed).c_str(), eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressLine::finish() {
    if (drawn_) {
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
        drawn_ = false;
    }
}

}  // namespace kascade
