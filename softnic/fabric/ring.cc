#include "softnic/fabric/ring.h"

#include <sched.h>
#include <time.h>

#include <immintrin.h>

namespace softnic {
namespace {

uint64_t NowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return uint64_t(now.tv_sec) * 1'000'000'000ull + uint64_t(now.tv_nsec);
}

}  // namespace

bool WaitForClaimedSlot(uint32_t& waits, uint64_t& deadline_ns) {
  if (++waits < kClaimedSlotSpinsBeforeYield) {
    _mm_pause();
    return true;
  }
  const uint64_t now = NowNs();
  if (deadline_ns == 0) deadline_ns = now + kClaimedSlotWaitNs;
  if (now >= deadline_ns) return false;
  sched_yield();
  return true;
}

}  // namespace softnic
