#include "rdma/clock.h"

#include <time.h>

#include <fstream>
#include <string>


namespace rdmalab {

std::uint64_t MonotonicNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(now.tv_nsec);
}

namespace {

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

}  // namespace

TscClock TscClock::Calibrate(unsigned window_ms) {
  if (!HasInvariantTsc()) return TscClock(1.0, false);
  const std::uint64_t window_ns = std::uint64_t{window_ms} * 1'000'000ull;
  const std::uint64_t start_ns = MonotonicNs();
  const std::uint64_t start_ticks = ReadTsc();
  std::uint64_t now_ns = start_ns;
  while (now_ns - start_ns < window_ns) now_ns = MonotonicNs();
  const std::uint64_t ticks = ReadTsc() - start_ticks;
  return TscClock(static_cast<double>(now_ns - start_ns) / static_cast<double>(ticks), true);
}

}  // namespace rdmalab
