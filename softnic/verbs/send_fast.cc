// The fast path of the send engine: a single-SGE RDMA WRITE on a connected RC/UC QP whose
// peer and keys were seen before. Latency is the time until the remote store, so the store
// comes first, after the fewest checks that keep every rule of the slow path: the SQ has
// room; the peer QP still has its number, is alive and ready; the rkey is still
// registered, and the range lies inside the region (from a per-QP cache of the last
// rkey's translation); the lkey likewise. Anything else, or any fault injection, takes
// the general engine (send.cc), which produces the same result more slowly.
#include <cstring>

#include "softnic/verbs/engine.h"

namespace softnic {
FastResult TryFastWrite(SoftQp* qp, const FastWrite& w, PostCost& post) {
  Runtime* runtime = Runtime::Get();
  const FabricHeader& fabric = *runtime->fabric();
  Destination& peer = qp->connected;
  // Eligible only when the general engine has already resolved this peer.
  if (peer.entry == nullptr || !qp->pending.empty() ||
      qp->entry->state.load(std::memory_order_relaxed) != IBV_QPS_RTS ||
      fabric.faults_active.load(std::memory_order_relaxed) != 0) {
    return FastResult::kSlowPath;
  }
  bool inline_data = (w.send_flags & IBV_SEND_INLINE) != 0;
  if (qp->cap.max_send_sge == 0 || (inline_data && w.sge.length > qp->cap.max_inline_data)) {
    return FastResult::kSlowPath;
  }
  if (qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
    return FastResult::kSlowPath;
  }
  const QpEntry& entry = *peer.entry;
  uint32_t state = entry.state.load(std::memory_order_acquire);
  if (entry.qpn.load(std::memory_order_acquire) != peer.qpn ||
      (state != IBV_QPS_RTS && state != IBV_QPS_RTR) ||
      !ProcessAlive(fabric, entry.owner_slot, entry.owner_incarnation)) {
    return FastResult::kSlowPath;
  }
  uint8_t* remote = LookupKey(qp->remote_key, w.rkey, w.remote_addr, w.sge.length);
  if (remote == nullptr) {
    if (!TranslateKey(runtime, peer.device, w.rkey, IBV_ACCESS_REMOTE_WRITE, entry.pd_id, false, &qp->remote_key)) {
      return FastResult::kSlowPath;
    }
    remote = LookupKey(qp->remote_key, w.rkey, w.remote_addr, w.sge.length);
    if (remote == nullptr) return FastResult::kSlowPath;
  }
  const uint8_t* source = reinterpret_cast<const uint8_t*>(w.sge.addr);
  if (!inline_data) {
    source = LookupKey(qp->local_key, w.sge.lkey, w.sge.addr, w.sge.length);
    if (source == nullptr) {
      if (!TranslateKey(runtime, qp->device_index, w.sge.lkey, 0, qp->entry->pd_id, true, &qp->local_key)) {
        return FastResult::kSlowPath;
      }
      source = LookupKey(qp->local_key, w.sge.lkey, w.sge.addr, w.sge.length);
      if (source == nullptr) return FastResult::kSlowPath;
    }
  }
  if (w.sge.length != 0) CopyOrderedSingle(remote, source, w.sge.length);

  uint32_t slot = ++qp->sq_posted;
  bool signaled = qp->signal_all || (w.send_flags & IBV_SEND_SIGNALED);
  uint64_t key = qp->write_key_base | w.sge.length | (inline_data ? shape_key::kInline : 0) |
                 (signaled ? shape_key::kSignaled : 0);
  AccountTransfer(key, qp->shape_cursors, runtime->counters(qp->device_index), runtime->counters(peer.device));
  model::WrShape wqe;
  wqe.op = model::Opcode::kWrite;
  wqe.payload_B = w.sge.length;
  wqe.inline_data = inline_data;
  post.Add(WqeBytes(wqe));  // RC and UC WRITEs have the same WQE header
  if (signaled) {
    Cqe cqe{};
    cqe.wr_id = w.wr_id;
    cqe.status = IBV_WC_SUCCESS;
    cqe.opcode = IBV_WC_RDMA_WRITE;
    cqe.byte_len = w.sge.length;
    cqe.qp_num = qp->ex.qp_base.qp_num;
    cqe.sq_retire = slot;
    cqe.is_send = 1;
    PushCqe(qp->send_cq->ring, cqe, runtime->counters(qp->device_index), false);
  }
  return FastResult::kDone;
}

}  // namespace softnic
