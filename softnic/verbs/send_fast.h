// The fast path of the send engine: a single-SGE RDMA WRITE on a connected RC/UC QP whose
// peer and keys were seen before. Latency is the time until the remote store, so the store
// comes first, after the fewest checks that keep every rule of the slow path: the SQ has
// room; the peer QP still has its number, is alive and ready, and enables remote writes;
// the rkey's region is unchanged since its translation was cached (one generation load,
// engine.h), and the range lies inside it; the lkey likewise. Anything else, or any fault injection, takes
// the general engine (send.cc), which produces the same result more slowly.
//
// Inline in its two callers (post_send and the ibv_wr_* batch), with the WR's fields as
// arguments: a post of one WRITE is one function, the provider's, as on mlx5. `post` is the
// list this WR belongs to, which counts its doorbell; null when the WR is the whole post.
#pragma once

#include "softnic/verbs/engine.h"

namespace softnic {

// What a post looks up once: the runtime, and the calling thread's counter lane.
struct PostContext {
  Runtime* runtime;
  CounterBlock* lane;  // indexed by device
  static PostContext OfThisThread() {
    Runtime* runtime = Runtime::Get();
    return PostContext{runtime, runtime->lane_counters()};
  }
};

// Cold (send.cc): translates `key` into `cache` and looks the range up; null if refused.
uint8_t* TranslateIntoCache(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                            uint32_t pd_id, bool local, KeyTranslation* cache, uint64_t address, uint64_t bytes);

[[gnu::always_inline]] inline FastResult TryFastWrite(SoftQp* qp, const PostContext& at, uint64_t wr_id,
                                                      uint32_t send_flags, const ibv_sge& sge,
                                                      uint64_t remote_addr, uint32_t rkey, PostCost* post) {
  const FabricHeader& fabric = *at.runtime->fabric();
  Destination& peer = qp->connected;
  // Eligible only when the general engine has already resolved this peer.
  if (peer.entry == nullptr || !qp->pending.empty() ||
      qp->entry->state.load(std::memory_order_relaxed) != IBV_QPS_RTS ||
      fabric.faults_active.load(std::memory_order_relaxed) != 0) {
    return FastResult::kSlowPath;
  }
  bool inline_data = (send_flags & IBV_SEND_INLINE) != 0;
  if (qp->cap.max_send_sge == 0 || (inline_data && sge.length > qp->cap.max_inline_data)) {
    return FastResult::kSlowPath;
  }
  if (qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
    return FastResult::kSlowPath;
  }
  const QpEntry& entry = *peer.entry;
  uint32_t state = entry.state.load(std::memory_order_acquire);
  if (entry.qpn.load(std::memory_order_acquire) != peer.qpn ||
      (state != IBV_QPS_RTS && state != IBV_QPS_RTR) ||
      (entry.qp_access_flags.load(std::memory_order_acquire) & IBV_ACCESS_REMOTE_WRITE) == 0 ||
      !ProcessAlive(fabric, entry.owner_slot, entry.owner_incarnation)) {
    return FastResult::kSlowPath;
  }
  uint8_t* remote = LookupKey(qp->remote_key, rkey, remote_addr, sge.length);
  if (__builtin_expect(remote == nullptr, 0)) {
    remote = TranslateIntoCache(at.runtime, peer.device, rkey, IBV_ACCESS_REMOTE_WRITE, entry.pd_id, false,
                                &qp->remote_key, remote_addr, sge.length);
    if (remote == nullptr) return FastResult::kSlowPath;
  }
  const uint8_t* source = reinterpret_cast<const uint8_t*>(sge.addr);
  if (!inline_data) {
    source = LookupKey(qp->local_key, sge.lkey, sge.addr, sge.length);
    if (__builtin_expect(source == nullptr, 0)) {
      source = TranslateIntoCache(at.runtime, qp->device_index, sge.lkey, 0, qp->entry->pd_id, true,
                                  &qp->local_key, sge.addr, sge.length);
      if (source == nullptr) return FastResult::kSlowPath;
    }
  }
  if (sge.length != 0) CopyOrderedSingle(remote, source, sge.length);

  uint32_t slot = ++qp->sq_posted;
  bool signaled = qp->signal_all || (send_flags & IBV_SEND_SIGNALED);
  uint64_t key = qp->write_key_base | sge.length | (inline_data ? shape_key::kInline : 0) |
                 (signaled ? shape_key::kSignaled : 0);
  CounterBlock& counters = at.lane[qp->device_index];
  model::WrShape wqe;
  wqe.op = model::Opcode::kWrite;
  wqe.payload_B = sge.length;
  wqe.inline_data = inline_data;
  uint32_t wqe_bytes = WqeBytes(wqe);  // RC and UC WRITEs have the same WQE header
  CountFastWrite(key, SingleWqePostKey(wqe_bytes), post == nullptr, qp->shape_cursors.fast_write[signaled],
                 counters, at.lane[peer.device]);
  if (post != nullptr) post->Add(wqe_bytes);
  if (signaled) {
    Cqe cqe{};
    cqe.wr_id = wr_id;
    cqe.status = IBV_WC_SUCCESS;
    cqe.opcode = IBV_WC_RDMA_WRITE;
    cqe.byte_len = sge.length;
    cqe.qp_num = qp->ex.qp_base.qp_num;
    cqe.sq_retire = slot;
    cqe.is_send = 1;
    PushCqe(qp->send_cq->ring, cqe, counters, false);
  }
  return FastResult::kDone;
}

}  // namespace softnic
