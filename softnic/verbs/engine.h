// The send engine's internal interface, shared by send.cc (execution), send_stall.cc
// (peers, faults, stalled-WR retries) and wr_api.cc (the ibv_wr_* batch).
#pragma once

#include <cstring>

#include "softnic/verbs/internal.h"
#include "softnic/verbs/key_translation.h"

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
inline void UnlockQpInline(SoftQp* qp) { qp->lock.clear(std::memory_order_release); }

Outcome Execute(SoftQp* qp, const WorkRequest& wr);

// The fast path (send_fast.h) adds the WR's WQE to the post's cost when it is done.
enum class FastResult : uint8_t { kDone, kSlowPath };

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

// Copies up to kSmallCopyBytes with a few fixed-size moves (the last ones overlapping)
// instead of a call to memcpy: the small messages of latency and message-rate tests are the
// common case.
constexpr uint64_t kSmallCopyBytes = 64;
[[gnu::always_inline]] inline void CopySmall(uint8_t* destination, const uint8_t* source, uint64_t bytes) {
  auto move = [&](uint64_t at, auto word) {
    std::memcpy(&word, source + at, sizeof(word));
    std::memcpy(destination + at, &word, sizeof(word));
  };
  struct Block16 {
    uint64_t half[2];
  };
  if (bytes > 32) {
    move(0, Block16{});
    move(16, Block16{});
    move(bytes - 32, Block16{});
    move(bytes - 16, Block16{});
  } else if (bytes >= 16) {
    move(0, Block16{});
    move(bytes - 16, Block16{});
  } else if (bytes >= 8) {
    move(0, uint64_t{});
    move(bytes - 8, uint64_t{});
  } else if (bytes >= 4) {
    move(0, uint32_t{});
    move(bytes - 4, uint32_t{});
  } else if (bytes >= 2) {
    move(0, uint16_t{});
    move(bytes - 2, uint16_t{});
  } else if (bytes == 1) {
    destination[0] = source[0];
  }
}

// Copies one contiguous source so that its last 8 bytes are stored last, after a release
// fence: a responder polling them and seeing the new value sees the whole message (HERD's
// request polling relies on this; memcpy alone may store in any order).
[[gnu::always_inline]] inline void CopyOrderedSingle(uint8_t* destination, const uint8_t* source, uint64_t bytes) {
  constexpr uint64_t kTailBytes = 8;
  if (bytes < kTailBytes) {
    CopySmall(destination, source, bytes);
    return;
  }
  uint64_t body = bytes - kTailBytes;
  if (body == 0) {
    // An 8-byte message, latency tests' size: CopySmall would test five sizes to copy nothing.
  } else if (body <= kSmallCopyBytes) {
    CopySmall(destination, source, body);
  } else {
    std::memcpy(destination, source, body);
  }
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
// Counts the doorbell, the WRs and the modeled cost of handing them to the NIC, in the
// calling thread's counter lane.
inline void CountPost(SoftQp* qp, CounterBlock* lane, PostCost& post_cost) {
  post_cost.CountInto(lane[qp->device_index], qp->shape_cursors.single_wqe_post);
}

int ValidateWorkRequest(const SoftQp* qp, WorkRequest& wr);  // also sets wr.total_bytes
int SubmitValidatedLocked(SoftQp* qp, const WorkRequest& wr);
void CompleteSend(SoftQp* qp, const WorkRequest& wr, uint32_t slot, ibv_wc_status status,
                  uint32_t byte_len);
void Finish(SoftQp* qp, const WorkRequest& wr, uint32_t slot, const Outcome& outcome);

// The receive side of the peer this WR goes to, mapped and cached; null when there is no
// live QP of the right number and state there.
Destination* ResolveDestination(Runtime* runtime, SoftQp* qp, const WorkRequest& wr);
// The same for the UD QP `qpn` on `device` (a member of a multicast group).
Destination* ResolveUdDestination(Runtime* runtime, SoftQp* qp, uint32_t device, uint32_t qpn);
// The same for the XRC SRQ `srqn` on `device` (the device of the XRC receive QP).
Destination* ResolveXrcSrq(Runtime* runtime, SoftQp* qp, uint32_t device, uint32_t srqn);

// Transports whose requester retries (RNR, an unreachable responder) and whose errors end
// the QP: RC and XRC.
inline bool IsReliable(ibv_qp_type type) { return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND; }
uint32_t EffectiveQkey(const SoftQp* qp, const WorkRequest& wr);

void ApplyFaultDelay(const DeviceEntry& local, const DeviceEntry& remote);
bool FaultDrops(const DeviceEntry& local, const DeviceEntry& remote);

// Stalled RC send queues (caller holds the QP lock).
void BeginStall(SoftQp* qp, StallReason reason);
void StorePending(SoftQp* qp, const WorkRequest& wr, uint32_t slot);
void CopyWorkRequest(const WorkRequest& wr, StoredWorkRequest* stored);

}  // namespace softnic
