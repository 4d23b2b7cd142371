#include "rdma/clock.h"

#include <time.h>

#include <cmath>
#include <fstream>
#include <string>


namespace rdmalab {

std::uint64_t MonotonicNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(now.tv_nsec);
}

namespace {

constexpr double kStableRateTolerance = 0.005;

bool HasInvariantTsc() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      auto has = [&](const char* flag) { return line.find(std::string(" ") + flag) != std::string::npos; };
      return has("constant_tsc") && has("nonstop_tsc");
    }
  }
  return false;
}

// Nanoseconds per TSC tick over `window_ns` of CLOCK_MONOTONIC.
double MeasureNsPerTick(std::uint64_t window_ns) {
  const std::uint64_t start_ns = MonotonicNs();
  const std::uint64_t start_ticks = ReadTsc();
  std::uint64_t now_ns = start_ns;
  while (now_ns - start_ns < window_ns) now_ns = MonotonicNs();
  const std::uint64_t ticks = ReadTsc() - start_ticks;
  return ticks == 0 ? 0.0 : static_cast<double>(now_ns - start_ns) / static_cast<double>(ticks);
}

}  // namespace

TscClock TscClock::Calibrate(unsigned window_ms) {
  const std::uint64_t window_ns = std::uint64_t{window_ms} * 1'000'000ull;
  if (HasInvariantTsc()) return TscClock(MeasureNsPerTick(window_ns), true, "tsc");
  // Without the flags (e.g. a qemu TCG guest, whose TSC follows the host's), the TSC is
  // still used when two back-to-back windows agree on its rate: reading it costs far less
  // than CLOCK_MONOTONIC there, which would otherwise inflate every latency sample.
  const double first = MeasureNsPerTick(window_ns / 2);
  const double second = MeasureNsPerTick(window_ns / 2);
  if (first > 0 && second > 0 && std::abs(first - second) <= kStableRateTolerance * first) {
    return TscClock((first + second) / 2, true, "tsc_rate_checked");
  }
  return TscClock(1.0, false, "clock_monotonic");
}

}  // namespace rdmalab
