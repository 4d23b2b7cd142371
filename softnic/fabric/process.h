// A process's membership of a fabric: a slot whose robust liveness mutex is held by a
// dedicated thread for the whole life of the process. Peers test liveness with one load.
#pragma once

#include <linux/futex.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "softnic/fabric/fabric.h"

namespace softnic {

struct ProcessAttachment {
  uint32_t slot = 0;
  uint32_t incarnation = 0;
};

// Claims a free slot (or one whose owner died, reclaiming that owner's QPs, MRs, objects
// and counters first). The claiming thread keeps running, holding the slot, until exit.
bool AttachProcess(Fabric* fabric, ProcessAttachment* attachment, std::string* error);

// True while the process that claimed `slot` as `incarnation` is alive. Lock-free: reads
// the robust mutex word, whose owner TID the kernel clears when the holder dies.
[[gnu::always_inline]] inline bool ProcessSlotAlive(const ProcessSlot& process, uint32_t incarnation) {
  if (process.incarnation.load(std::memory_order_acquire) != incarnation) return false;
  int word = __atomic_load_n(reinterpret_cast<const int*>(&process.liveness), __ATOMIC_RELAXED);
  return (word & FUTEX_TID_MASK) == process.holder_tid.load(std::memory_order_relaxed);
}
[[gnu::always_inline]] inline bool ProcessAlive(const FabricHeader& fabric, uint32_t slot, uint32_t incarnation) {
  return ProcessSlotAlive(fabric.processes[slot], incarnation);
}

// The robust admin mutex, taken around table allocation and slot reclaim (cold paths).
class AdminLock {
 public:
  explicit AdminLock(FabricHeader* fabric);
  ~AdminLock();
  AdminLock(const AdminLock&) = delete;
  AdminLock& operator=(const AdminLock&) = delete;

 private:
  FabricHeader* fabric_;
};

}  // namespace softnic
