// The send engine's internal interface, shared by send.cc (execution), send_stall.cc
// (peers, faults, stalled-WR retries) and wr_api.cc (the ibv_wr_* batch).
#pragma once

#include "softnic/verbs/internal.h"

namespace softnic {

struct Outcome {
  enum Kind : uint8_t { kComplete, kStall } kind;
  ibv_wc_status status;
  uint32_t byte_len;
  StallReason reason;
};

inline void LockQpInline(SoftQp* qp) {
  while (qp->lock.test_and_set(std::memory_order_acquire)) {
    __builtin_ia32_pause();
  }
}

Outcome Execute(SoftQp* qp, const WorkRequest& wr);
int ValidateWorkRequest(const SoftQp* qp, WorkRequest& wr);  // also sets wr.total_bytes
int SubmitValidatedLocked(SoftQp* qp, const WorkRequest& wr);
void CompleteSend(SoftQp* qp, const WorkRequest& wr, uint32_t slot, ibv_wc_status status,
                  uint32_t byte_len);
void Finish(SoftQp* qp, const WorkRequest& wr, uint32_t slot, const Outcome& outcome);

// The receive side of the peer this WR goes to, mapped and cached; null when there is no
// live QP of the right number and state there.
Destination* ResolveDestination(Runtime* runtime, SoftQp* qp, const WorkRequest& wr);
uint32_t EffectiveQkey(const SoftQp* qp, const WorkRequest& wr);

void ApplyFaultDelay(const DeviceEntry& local, const DeviceEntry& remote);
bool FaultDrops(const DeviceEntry& local, const DeviceEntry& remote);

// Stalled RC send queues (caller holds the QP lock).
void BeginStall(SoftQp* qp, StallReason reason);
void StorePending(SoftQp* qp, const WorkRequest& wr, uint32_t slot);
void CopyWorkRequest(const WorkRequest& wr, StoredWorkRequest* stored);

}  // namespace softnic
