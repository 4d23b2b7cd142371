#include "softnic/fabric/process.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "softnic/fabric/accounting.h"
#include "softnic/fabric/background_thread.h"
#include "softnic/fabric/object.h"

namespace softnic {
namespace {

void LockRobust(pthread_mutex_t* mutex) {
  if (pthread_mutex_lock(mutex) == EOWNERDEAD) pthread_mutex_consistent(mutex);
}

// The dead process in `slot` no longer holds any XRC domain it opened through a file.
void ReleaseXrcdsOf(FabricHeader& header, uint32_t slot) {
  for (XrcdEntry& xrcd : header.xrcds) {
    if (xrcd.id != 0) xrcd.Release(slot);
  }
}

// Frees everything the dead (slot, incarnation) left in the tables. Caller holds admin.
void Reclaim(Fabric* fabric, uint32_t slot, uint32_t incarnation) {
  FabricHeader* header = fabric->header();
  ProcessSlot& process = header->processes[slot];
  const uint32_t lanes = LanesInUse(process);
  for (uint32_t d = 0; d < header->device_count; ++d) {
    DeviceEntry& device = header->devices[d];
    fabric->ForEachWrittenEntry(device.qps, kMaxQpsPerDevice, [&](QpEntry& qp) {
      if (qp.owner_slot == slot && qp.owner_incarnation == incarnation &&
          qp.qpn.load(std::memory_order_relaxed) != 0) {
        ChangeBetweenControlEpochs(*header, [&] { qp.qpn.store(0, std::memory_order_release); });
      }
    });
    fabric->ForEachWrittenEntry(device.mrs, kMaxMrsPerDevice, [&](MrEntry& mr) {
      if (mr.owner_slot == slot && mr.owner_incarnation == incarnation &&
          mr.key.load(std::memory_order_relaxed) != 0) {
        ClearMrEntry(*header, mr);
      }
    });
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      CounterBlock& counters = process.counters[lane][d];
      uint64_t left[kCounterCount] = {};
      SumCounterBlock(counters, left);
      for (uint32_t c = 0; c < kCounterCount; ++c) {
        __atomic_fetch_add(&device.retired.value[c], left[c], __ATOMIC_RELAXED);
        __atomic_store_n(&counters.value[c], 0, __ATOMIC_RELAXED);
      }
      for (ShapeCount& shape : counters.shapes) {
        __atomic_store_n(&shape.key, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&shape.count, 0, __ATOMIC_RELAXED);
      }
      counters.evictions = 0;
      counters.next_victim = 0;
    }
  }
  process.lanes_used.store(0, std::memory_order_release);
  ReleaseXrcdsOf(*header, slot);
  RemoveObjectsOf(fabric->directory(), slot, incarnation);
}

struct ClaimResult {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  bool claimed = false;
  ProcessAttachment attachment;
};

void HoldSlotForever(Fabric* fabric, ClaimResult* result) {
  FabricHeader* header = fabric->header();
  bool claimed = false;
  ProcessAttachment attachment;
  for (uint32_t s = 0; s < kMaxProcesses && !claimed; ++s) {
    ProcessSlot& slot = header->processes[s];
    int rc = pthread_mutex_trylock(&slot.liveness);
    if (rc != 0 && rc != EOWNERDEAD) continue;
    if (rc == EOWNERDEAD) pthread_mutex_consistent(&slot.liveness);
    {
      AdminLock admin(header);
      uint32_t previous = slot.incarnation.load(std::memory_order_relaxed);
      if (previous != 0) Reclaim(fabric, s, previous);
      // Only the fabric's devices: the blocks of devices it lacks are never read.
      for (uint32_t d = 0; d < header->device_count; ++d) slot.counters[kCounterLanes - 1][d].shared = 1;
      attachment.slot = s;
      attachment.incarnation = header->next_incarnation.fetch_add(1) + 1;
      slot.holder_tid.store(static_cast<int32_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
      slot.pid.store(static_cast<uint32_t>(getpid()), std::memory_order_relaxed);
      slot.incarnation.store(attachment.incarnation, std::memory_order_release);
    }
    claimed = true;
  }
  {
    std::lock_guard<std::mutex> lock(result->mutex);
    result->claimed = claimed;
    result->attachment = attachment;
    result->finished = true;
  }
  result->done.notify_all();
  if (!claimed) return;
  // Holding the mutex is the whole job: the kernel releases it (and marks the owner dead)
  // only when this thread, i.e. the process, ends.
  for (;;) pause();
}

}  // namespace

AdminLock::AdminLock(FabricHeader* fabric) : fabric_(fabric) { LockRobust(&fabric_->admin); }
AdminLock::~AdminLock() { pthread_mutex_unlock(&fabric_->admin); }

bool AttachProcess(Fabric* fabric, ProcessAttachment* attachment, std::string* error) {
  auto* result = new ClaimResult;  // shared with the detached thread; lives for the process
  StartBackgroundThread(HoldSlotForever, fabric, result);
  std::unique_lock<std::mutex> lock(result->mutex);
  result->done.wait(lock, [&] { return result->finished; });
  if (!result->claimed) {
    *error = "fabric '" + fabric->name() + "' has no free process slot (" +
             std::to_string(kMaxProcesses) + " processes attached)";
    return false;
  }
  *attachment = result->attachment;
  return true;
}

}  // namespace softnic
