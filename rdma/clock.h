// Fine-grained timestamps: the TSC, calibrated once against CLOCK_MONOTONIC, where the CPU
// has an invariant TSC; otherwise (e.g. qemu TCG guests) CLOCK_MONOTONIC itself, read
// through the vDSO. Either way no syscall, so latency samples can be taken on every op.
#pragma once

#include <cstdint>
#include <x86intrin.h>

namespace rdmalab {

inline std::uint64_t ReadTsc() noexcept { return __rdtsc(); }

// CLOCK_MONOTONIC in ns (vDSO: no syscall).
std::uint64_t MonotonicNs() noexcept;

class TscClock {
 public:
  // Measures the TSC rate over `window_ms` of CLOCK_MONOTONIC. Without an invariant TSC
  // (constant_tsc and nonstop_tsc in /proc/cpuinfo) the TSC is used only if two half windows
  // measure the same rate (within 0.5%); otherwise CLOCK_MONOTONIC.
  static TscClock Calibrate(unsigned window_ms = 50);

  std::uint64_t Now() const noexcept { return use_tsc_ ? ReadTsc() : MonotonicNs(); }
  // "tsc" (invariant), "tsc_rate_checked" (not flagged invariant, rate verified) or
  // "clock_monotonic".
  const char* Source() const noexcept { return source_; }
  double NsPerTick() const noexcept { return ns_per_tick_; }
  double GHz() const noexcept { return 1.0 / ns_per_tick_; }
  std::uint64_t TicksToNs(std::uint64_t ticks) const noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(ticks) * ns_per_tick_);
  }
  std::uint64_t NsToTicks(std::uint64_t ns) const noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(ns) / ns_per_tick_);
  }

 private:
  TscClock(double ns_per_tick, bool use_tsc, const char* source)
      : ns_per_tick_(ns_per_tick), use_tsc_(use_tsc), source_(source) {}
  double ns_per_tick_;
  bool use_tsc_;
  const char* source_;
};

}  // namespace rdmalab
