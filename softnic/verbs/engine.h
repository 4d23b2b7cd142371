// The send engine's internal interface, shared by send.cc (execution), send_stall.cc
// (peers, faults, stalled-WR retries) and wr_api.cc (the ibv_wr_* batch).
#pragma once

#include <cstring>

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

// The fast path (send_fast.cc): a single-SGE RDMA WRITE on a connected QP.
struct FastWrite {
  uint64_t wr_id;
  uint32_t send_flags;
  ibv_sge sge;
  uint64_t remote_addr;
  uint32_t rkey;
};
enum class FastResult : uint8_t { kDone, kSlowPath };
// Adds the WR's WQE to `post` when it is done.
FastResult TryFastWrite(SoftQp* qp, const FastWrite& w, PostCost& post);

// A WR as the PCIe/NIC model sees it (softnic/fabric/accounting.h counts it). `bytes` is the
// message length; atomics move 8 bytes whatever their local buffer.
inline model::WrShape ModeledShape(const SoftQp* qp, ibv_wr_opcode opcode, uint32_t send_flags, uint64_t bytes,
                                   uint32_t num_sge) {
  model::WrShape shape;
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: shape.op = model::Opcode::kWrite; break;
    case IBV_WR_RDMA_READ: shape.op = model::Opcode::kRead; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: shape.op = model::Opcode::kCas; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: shape.op = model::Opcode::kFaa; break;
    default: shape.op = model::Opcode::kSend; break;
  }
  shape.transport = ModeledTransport(qp->ex.qp_base.qp_type);
  bool atomic = shape.op == model::Opcode::kCas || shape.op == model::Opcode::kFaa;
  shape.payload_B = atomic ? 8 : static_cast<uint32_t>(bytes);
  shape.inline_data = (send_flags & IBV_SEND_INLINE) != 0;
  shape.signaled = qp->signal_all || (send_flags & IBV_SEND_SIGNALED) != 0;
  shape.with_imm = opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  shape.header_only = shape.with_imm && bytes == 0;
  shape.sge = num_sge;
  return shape;
}
inline model::WrShape ModeledShape(const SoftQp* qp, const WorkRequest& wr) {
  return ModeledShape(qp, wr.opcode, wr.send_flags, wr.total_bytes, wr.num_sge);
}
inline uint32_t WqeBytes(const model::WrShape& shape) { return model::SendWqeBytes(shape, model::WqeLayout{}); }

// Key checks (send.cc): a translation is valid for [first, first + length) while its MR
// table entry still holds the key.
bool TranslateKey(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                  uint32_t pd_id, bool local, KeyTranslation* out);

inline uint8_t* LookupKey(const KeyTranslation& t, uint32_t key, uint64_t address, uint64_t bytes) {
  if (t.key != key || t.entry == nullptr || t.entry->key.load(std::memory_order_acquire) != key) {
    return nullptr;
  }
  if (address < t.first || bytes > t.length || address - t.first > t.length - bytes) return nullptr;
  return reinterpret_cast<uint8_t*>(address + t.bias);
}

// Copies one contiguous source so that its last 8 bytes are stored last, after a release
// fence: a responder polling them and seeing the new value sees the whole message (HERD's
// request polling relies on this; memcpy alone may store in any order).
inline void CopyOrderedSingle(uint8_t* destination, const uint8_t* source, uint64_t bytes) {
  constexpr uint64_t kTailBytes = 8;
  if (bytes < kTailBytes) {
    std::memcpy(destination, source, bytes);
    return;
  }
  uint64_t body = bytes - kTailBytes;
  std::memcpy(destination, source, body);
  uint64_t word;
  std::memcpy(&word, source + body, sizeof(word));
  std::atomic_thread_fence(std::memory_order_release);
  uint8_t* at = destination + body;
  if ((reinterpret_cast<uintptr_t>(at) & (kTailBytes - 1)) == 0) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(at), word, __ATOMIC_RELEASE);
  } else {
    std::memcpy(at, &word, sizeof(word));
  }
}
// Counts the doorbell, the WRs and the modeled cost of handing them to the NIC.
void CountPostLocked(SoftQp* qp, PostCost& post_cost);

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
