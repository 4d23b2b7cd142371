// Cycle-accurate timestamps: the TSC, calibrated once against CLOCK_MONOTONIC. Reading it
// costs a few ns and no syscall, so latency samples can be taken on every operation.
#pragma once

#include <cstdint>
#include <x86intrin.h>

namespace rdmalab {

inline std::uint64_t ReadTsc() noexcept { return __rdtsc(); }

class TscClock {
 public:
  // Measures the TSC rate over `window_ms` of CLOCK_MONOTONIC. Fails when the CPU has no
  // invariant TSC (constant_tsc and nonstop_tsc in /proc/cpuinfo): its ticks would not be time.
  static TscClock Calibrate(unsigned window_ms = 50);

  std::uint64_t Now() const noexcept { return ReadTsc(); }
  double NsPerTick() const noexcept { return ns_per_tick_; }
  double GHz() const noexcept { return 1.0 / ns_per_tick_; }
  std::uint64_t TicksToNs(std::uint64_t ticks) const noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(ticks) * ns_per_tick_);
  }
  std::uint64_t NsToTicks(std::uint64_t ns) const noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(ns) / ns_per_tick_);
  }

 private:
  explicit TscClock(double ns_per_tick) : ns_per_tick_(ns_per_tick) {}
  double ns_per_tick_;
};

// CLOCK_MONOTONIC in ns (vDSO: no syscall).
std::uint64_t MonotonicNs() noexcept;

}  // namespace rdmalab
