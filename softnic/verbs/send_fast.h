// The fast paths of the send engine: a single-SGE RDMA WRITE on a connected RC/UC QP, and a
// single-SGE SEND on any QP, whose peer and keys were seen before. Latency is the time until the remote store, so the store
// comes first, after the fewest checks that keep every rule of the slow path: the SQ has
// room; the peer QP still has its number, is alive and ready, and enables remote writes;
// the rkey's region is unchanged since its translation was cached (one generation load,
// engine.h), and the range lies inside it; the lkey likewise. Anything else, or any fault injection, takes
// the general engine (send.cc), which produces the same result more slowly.
//
// SEND: the same checks, then the RECV at the head of the peer's one-SGE ring is looked at
// before it is taken (its SGE holds the message, its lkey's cached translation is valid), so a
// message this path cannot deliver stays where the general engine finds it. The next WQE
// is prefetched behind it.
//
// Inline in their two callers (post_send and the ibv_wr_* batch), with the WR's fields as
// arguments: a post of one WRITE is one function, the provider's, as on mlx5. `post` is the
// list this WR belongs to, which counts its doorbell; null when the WR is the whole post.
#pragma once

#include <endian.h>

#include <cstddef>

#include "softnic/verbs/engine.h"

namespace softnic {

// What a post looks up once: the runtime. The calling thread's counter lane is looked up
// only where a count misses its QP's cached slots (CountFastMessage).
struct PostContext {
  Runtime* runtime;
  static PostContext OfThisThread() { return PostContext{Runtime::Get()}; }
  CounterBlock* lane() const { return runtime->lane_counters(); }  // indexed by device
};

// The posting QP's side of both fast paths: nothing stalled or injected, the QP ready to
// send, the SGE within its limits, room in the send queue.
[[gnu::always_inline]] inline bool QpPostsFast(const SoftQp* qp, const FabricHeader& fabric, bool inline_data,
                                               uint32_t bytes) {
  return qp->pending.empty() && qp->entry->state.load(std::memory_order_relaxed) == IBV_QPS_RTS &&
         fabric.faults_active.load(std::memory_order_relaxed) == 0 && qp->cap.max_send_sge != 0 &&
         !(inline_data && bytes > qp->cap.max_inline_data) &&
         qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire) < qp->cap.max_send_wr;
}

// The peer QP still has the number the cache holds, is ready to receive and alive.
[[gnu::always_inline]] inline bool PeerReceives(const FabricHeader& fabric, const Destination& peer) {
  const QpEntry& entry = *peer.entry;
  uint32_t state = entry.state.load(std::memory_order_acquire);
  return entry.qpn.load(std::memory_order_acquire) == peer.qpn && (state == IBV_QPS_RTS || state == IBV_QPS_RTR) &&
         ProcessAlive(fabric, entry.owner_slot, entry.owner_incarnation);
}

// The bytes the SGE names in this process: the caller's own for inline data, else through
// the QP's cached lkey translation. Null if the lkey does not cover them.
[[gnu::always_inline]] inline const uint8_t* FastSource(SoftQp* qp, const PostContext& at, const ibv_sge& sge,
                                                        bool inline_data) {
  if (inline_data) return reinterpret_cast<const uint8_t*>(sge.addr);
  const uint8_t* source = LookupKey(qp->local_key, sge.lkey, sge.addr, sge.length);
  if (__builtin_expect(source == nullptr, 0)) {
    source = TranslateIntoCache(at.runtime, qp->device_index, sge.lkey, 0, qp->entry->pd_id, true, &qp->local_key,
                                sge.addr, sge.length);
  }
  return source;
}

// The requester's CQE of a WR, which retires the send queue up to it.
[[gnu::always_inline]] inline Cqe SendCompletion(const SoftQp* qp, uint64_t wr_id, ibv_wc_opcode opcode,
                                                 ibv_wc_status status, uint32_t bytes, uint32_t slot) {
  Cqe cqe{};
  cqe.wr_id = wr_id;
  cqe.status = status;
  cqe.opcode = opcode;
  cqe.byte_len = bytes;
  cqe.qp_num = qp->ex.qp_base.qp_num;
  cqe.sq_retire = slot;
  cqe.is_send = 1;
  return cqe;
}
[[gnu::always_inline]] inline void PushSendCompletion(SoftQp* qp, uint64_t wr_id, ibv_wc_opcode opcode,
                                                      ibv_wc_status status, uint32_t bytes, uint32_t slot) {
  PushCqe(qp->send_cq->ring, SendCompletion(qp, wr_id, opcode, status, bytes, slot), qp->device_index, false);
}

// The checks of a fast WRITE on `qp`'s side and its peer's: the QP posts fast, the peer is
// resolved, alive, ready and enables remote writes.
[[gnu::always_inline]] inline bool WriteGoesFast(const SoftQp* qp, const FabricHeader& fabric, bool inline_data,
                                                 uint32_t bytes) {
  const Destination& peer = qp->connected;
  // Eligible only when the general engine has already resolved this peer.
  return peer.entry != nullptr && QpPostsFast(qp, fabric, inline_data, bytes) && PeerReceives(fabric, peer) &&
         (peer.entry->qp_access_flags.load(std::memory_order_acquire) & IBV_ACCESS_REMOTE_WRITE) != 0;
}

// The requester key of a WRITE of `bytes` on `qp` (accounting.h).
[[gnu::always_inline]] inline uint64_t FastWriteKey(const SoftQp* qp, uint32_t bytes, bool inline_data,
                                                    bool signaled) {
  return qp->write_key_base | bytes | (inline_data ? shape_key::kInline : 0) | (signaled ? shape_key::kSignaled : 0);
}

[[gnu::always_inline]] inline FastResult TryFastWrite(SoftQp* qp, const PostContext& at, uint64_t wr_id,
                                                      uint32_t send_flags, const ibv_sge& sge,
                                                      uint64_t remote_addr, uint32_t rkey, PostCost* post) {
  const FabricHeader& fabric = *at.runtime->fabric();
  Destination& peer = qp->connected;
  bool inline_data = (send_flags & IBV_SEND_INLINE) != 0;
  if (!WriteGoesFast(qp, fabric, inline_data, sge.length)) return FastResult::kSlowPath;
  uint8_t* remote = LookupKey(qp->remote_key, rkey, remote_addr, sge.length);
  if (__builtin_expect(remote == nullptr, 0)) {
    remote = TranslateIntoCache(at.runtime, peer.device, rkey, IBV_ACCESS_REMOTE_WRITE, peer.entry->pd_id, false,
                                &qp->remote_key, remote_addr, sge.length);
    if (remote == nullptr) return FastResult::kSlowPath;
  }
  const uint8_t* source = FastSource(qp, at, sge, inline_data);
  if (source == nullptr) return FastResult::kSlowPath;
  if (sge.length != 0) CopyOrderedSingle(remote, source, sge.length);

  uint32_t slot = ++qp->sq_posted;
  bool signaled = qp->signal_all || (send_flags & IBV_SEND_SIGNALED);
  uint64_t key = FastWriteKey(qp, sge.length, inline_data, signaled);
  uint32_t wqe_bytes = CountFastMessage(
      key, qp->device_index, peer.device,
      [&] {
        model::WrShape wqe;
        wqe.op = model::Opcode::kWrite;
        wqe.payload_B = sge.length;
        wqe.inline_data = inline_data;
        return WqeBytes(wqe);  // RC and UC WRITEs have the same WQE header
      },
      post == nullptr, qp->shape_cursors.fast_write[signaled], [&] { return at.lane(); });
  if (post != nullptr) post->Add(wqe_bytes);
  if (signaled) PushSendCompletion(qp, wr_id, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, sge.length, slot);
  return FastResult::kDone;
}

// How a post of one WRITE through PostCachedWrite ended.
enum class CachedWrite : uint8_t {
  kNotTaken,      // nothing done: a check failed or a cache missed (the general path takes it)
  kDone,
  kCqFull,        // done but for its CQE: an overrun to report (FinishPushCqe)
  kCqWithChannel, // done; the CQ has a completion channel, which FinishPushCqe may wake
};

// The requester's CQE of a cached WRITE, once its bytes are in place.
[[gnu::always_inline]] inline CachedWrite PushCachedWriteCompletion(SoftQp* qp, uint64_t wr_id, uint32_t bytes,
                                                                    uint32_t slot) {
  Ring& ring = qp->send_cq->ring;
  if (!TryPushCqe(ring, SendCompletion(qp, wr_id, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, bytes, slot))) {
    return CachedWrite::kCqFull;
  }
  return ring.header()->channel_id == 0 ? CachedWrite::kDone : CachedWrite::kCqWithChannel;
}

// A post of one small WRITE whose every cache holds (peer, keys, counter slots), under the
// QP's lock or by the thread that owns it: TryFastWrite's checks, each a load and a compare,
// and no call. It decides everything before the first store: a miss returns kNotTaken with
// nothing done.
[[gnu::always_inline]] inline CachedWrite PostCachedWrite(SoftQp* qp, const FabricHeader& fabric,
                                                          const ibv_send_wr& wr) {
  const ibv_sge& sge = wr.sg_list[0];
  uint32_t bytes = sge.length;
  uint32_t send_flags = wr.send_flags;
  bool inline_data = (send_flags & IBV_SEND_INLINE) != 0;
  // Larger copies call memcpy: TryFastWrite's.
  if (bytes > kSmallCopyBytes || !WriteGoesFast(qp, fabric, inline_data, bytes)) return CachedWrite::kNotTaken;
  uint8_t* remote = LookupKey(qp->remote_key, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr, bytes);
  const uint8_t* source = inline_data ? reinterpret_cast<const uint8_t*>(sge.addr)
                                      : LookupKey(qp->local_key, sge.lkey, sge.addr, bytes);
  bool signaled = qp->signal_all || (send_flags & IBV_SEND_SIGNALED);
  uint64_t key = FastWriteKey(qp, bytes, inline_data, signaled);
  if (remote == nullptr || source == nullptr) return CachedWrite::kNotTaken;
  FastMessageSlots& slots = qp->shape_cursors.fast_write[signaled].For(key, qp->connected.device);
  if (!slots.Hold(key, qp->connected.device)) {
    return CachedWrite::kNotTaken;
  }
  if (bytes != 0) CopyOrderedSingle(remote, source, bytes);
  uint32_t slot = ++qp->sq_posted;
  slots.Bump(true);
  return signaled ? PushCachedWriteCompletion(qp, wr.wr_id, bytes, slot) : CachedWrite::kDone;
}

// A post of one WR, a one-SGE WRITE (the caller checked that much), of the shape the QP's
// route holds (WriteRoute), to addresses inside its regions: kNotTaken, with nothing done,
// when any check fails. No call, no frame.
[[gnu::always_inline]] inline CachedWrite PostRoutedWrite(SoftQp* qp, const WriteRoute& route, const ibv_send_wr& wr) {
  if (wr.send_flags != route.send_flags || route.epoch != route.control_epoch->load(std::memory_order_acquire)) {
    return CachedWrite::kNotTaken;
  }
  const ibv_sge& sge = wr.sg_list[0];
  if (sge.length != route.bytes || wr.wr.rdma.rkey != route.rkey ||
      wr.wr.rdma.remote_addr - route.remote_first > route.remote_span) {
    return CachedWrite::kNotTaken;
  }
  auto* source = reinterpret_cast<const uint8_t*>(sge.addr);
  if ((route.send_flags & IBV_SEND_INLINE) == 0) {
    if (sge.lkey != route.lkey || sge.addr - route.local_first > route.local_span) return CachedWrite::kNotTaken;
    source += route.local_bias;
  }
  if (!ProcessSlotAlive(*route.peer_process, route.peer_incarnation) || route.counts.lane_epoch != LaneEpoch() ||
      qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
    return CachedWrite::kNotTaken;
  }
  uint32_t bytes = route.bytes;
  if (bytes > kSmallCopyBytes) __builtin_unreachable();  // FillWriteRoute's rule: no memcpy call here
  CopyOrderedSingle(reinterpret_cast<uint8_t*>(wr.wr.rdma.remote_addr + route.remote_bias), source, bytes);
  uint32_t slot = ++qp->sq_posted;
  route.counts.Bump(true);
  return route.signaled ? PushCachedWriteCompletion(qp, wr.wr_id, bytes, slot) : CachedWrite::kDone;
}

// The GRH of every UD message from `source_device` to `destination_device`, but its length.
inline ibv_grh MakeGrh(const FabricHeader& fabric, uint32_t source_device, uint32_t destination_device) {
  ibv_grh grh{};
  grh.version_tclass_flow = htobe32(6u << 28);
  grh.next_hdr = 0x1b;  // IB transport header follows
  grh.hop_limit = 64;
  std::memcpy(grh.sgid.raw, fabric.devices[source_device].gid, sizeof(grh.sgid.raw));
  std::memcpy(grh.dgid.raw, fabric.devices[destination_device].gid, sizeof(grh.dgid.raw));
  return grh;
}

// The GRH a UD receiver finds in front of the payload: the destination's, with the length.
static_assert(kUdGrhBytes <= kSmallCopyBytes);
[[gnu::always_inline]] inline void WriteGrh(uint8_t* at, const ibv_grh& destination_grh, uint64_t payload_bytes) {
  // Four 16-byte moves: a 40-byte memcpy compiles to a rep movs, slow to start per message.
  CopySmall(at, reinterpret_cast<const uint8_t*>(&destination_grh), kUdGrhBytes);
  uint16_t paylen = htobe16(static_cast<uint16_t>(payload_bytes));
  std::memcpy(at + offsetof(ibv_grh, paylen), &paylen, sizeof(paylen));
}

// Whether a UD receiver's completion says a GRH is present: always on RoCE, on IB when the
// sender's address handle is global.
inline bool ReceiverSeesGrh(const FabricHeader& fabric, const SoftAh* ah) {
  return fabric.link_layer == LinkLayer::kEthernet || (ah != nullptr && ah->attr.is_global);
}

// The responder's CQE of a message from `qp` that consumed RECV `recv_wr_id` of QP
// `destination_qpn`: a success, before its length and GRH flag are known.
inline Cqe ReceiveCompletion(const FabricHeader& fabric, const SoftQp* qp, uint32_t destination_qpn,
                             uint64_t recv_wr_id, ibv_wr_opcode opcode, uint32_t imm_data) {
  Cqe cqe{};
  cqe.wr_id = recv_wr_id;
  cqe.status = IBV_WC_SUCCESS;
  cqe.qp_num = destination_qpn;
  cqe.src_qp = qp->ex.qp_base.qp_num;
  cqe.slid = fabric.link_layer == LinkLayer::kInfiniBand ? fabric.devices[qp->device_index].lid : 0;
  cqe.opcode = opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    cqe.imm_data = imm_data;
    cqe.wc_flags = IBV_WC_WITH_IMM;
  }
  return cqe;
}

// UD only: where the WR's address handle points.
struct UdAddress {
  const SoftAh* ah;
  uint32_t remote_qpn;
  uint32_t remote_qkey;
};

// Inline only where a post of one SEND has a function of its own (send.cc): elsewhere
// TryFastSend, out of line, since its frame (two CQEs, the GRH) would weigh on every WRITE's post.
[[gnu::always_inline]] inline FastResult TryFastSendInline(SoftQp* qp, const PostContext& at, uint64_t wr_id,
                                                           ibv_wr_opcode opcode, uint32_t send_flags,
                                                           uint32_t imm_data, const ibv_sge& sge,
                                                           const UdAddress& address, PostCost* post) {
  const FabricHeader& fabric = *at.runtime->fabric();
  bool ud = qp->ex.qp_base.qp_type == IBV_QPT_UD;
  bool inline_data = (send_flags & IBV_SEND_INLINE) != 0;
  if (!QpPostsFast(qp, fabric, inline_data, sge.length)) return FastResult::kSlowPath;
  Destination* peer = &qp->connected;
  if (ud) {
    // The destination must already be in the cache; its QKEY must match (else it drops).
    if (address.ah == nullptr || address.ah->device < 0 || sge.length > qp->path_mtu_bytes) {
      return FastResult::kSlowPath;
    }
    uint32_t device = uint32_t(address.ah->device);
    uint32_t qpn = address.remote_qpn & kQpnMask;
    peer = &qp->ud_cache[UdDestinationSlot(qpn, device)];
    uint32_t qkey = (address.remote_qkey & 0x80000000u) ? qp->attr.qkey : address.remote_qkey;
    if (peer->entry == nullptr || peer->qpn != qpn || peer->device != device ||
        peer->entry->qkey.load(std::memory_order_relaxed) != qkey) {
      return FastResult::kSlowPath;
    }
  } else if (peer->entry == nullptr) {
    return FastResult::kSlowPath;
  }
  const QpEntry& entry = *peer->entry;
  if (!PeerReceives(fabric, *peer) || entry.uses_srq != 0 || entry.recv_sge_capacity != 1) {
    return FastResult::kSlowPath;
  }
  const uint8_t* source = FastSource(qp, at, sge, inline_data);
  if (source == nullptr) return FastResult::kSlowPath;
  uint64_t header_bytes = ud ? kUdGrhBytes : 0;
  uint64_t needed = sge.length + header_bytes;
  uint8_t* target = nullptr;
  uint64_t recv_wr_id = 0;
  auto take_if_it_holds_the_message = [&](const void* payload) __attribute__((always_inline)) {
    const auto* wqe = static_cast<const RecvWqe*>(payload);
    ibv_sge buffer;
    std::memcpy(&buffer, &wqe->sge[0], sizeof(buffer));
    recv_wr_id = wqe->wr_id;
    if (buffer.length < needed) return false;
    target = LookupKey(peer->recv_key, buffer.lkey, buffer.addr, buffer.length);
    if (__builtin_expect(target == nullptr, 0)) {
      target = TranslateIntoCache(at.runtime, peer->device, buffer.lkey, IBV_ACCESS_LOCAL_WRITE, entry.pd_id, false,
                                  &peer->recv_key, buffer.addr, buffer.length);
    }
    return target != nullptr;
  };
  uint64_t recv_dequeued = 0;
  if (peer->recv_queue.TryPopIf(&recv_dequeued, take_if_it_holds_the_message) != Ring::PopResult::kTaken) {
    return FastResult::kSlowPath;
  }
  peer->recv_queue.PrefetchHead();
  // Without a GRH on the wire the buffer's GRH area stays as the receiver posted it, as a
  // NIC leaves it: a receiver that keeps that area on a line of its own gets one line less
  // written into its cache per message.
  const bool grh = ud && ReceiverSeesGrh(fabric, address.ah);
  if (grh) WriteGrh(target, peer->grh, sge.length);
  if (ud) target += kUdGrhBytes;
  if (sge.length <= kSmallCopyBytes) {
    CopySmall(target, source, sge.length);
  } else {
    std::memcpy(target, source, sge.length);
  }
  bool with_imm = opcode == IBV_WR_SEND_WITH_IMM;
  Cqe cqe = ReceiveCompletion(fabric, qp, peer->qpn, recv_wr_id, opcode, imm_data);
  cqe.recv_dequeued = recv_dequeued;
  cqe.byte_len = static_cast<uint32_t>(needed);
  if (grh) cqe.wc_flags |= IBV_WC_GRH;
  PushCqe(peer->recv_cq, cqe, peer->device, (send_flags & IBV_SEND_SOLICITED) != 0);

  uint32_t slot = ++qp->sq_posted;
  bool signaled = qp->signal_all || (send_flags & IBV_SEND_SIGNALED);
  bool header_only = with_imm && sge.length == 0;
  uint64_t key = qp->send_key_base | sge.length |
                 (uint64_t{inline_data} | uint64_t{signaled} << 1 | uint64_t{header_only} << 2 | uint64_t{with_imm} << 3)
                     << shape_key::kFlagsShift;
  uint32_t wqe_bytes =
      CountFastMessage(key, qp->device_index, peer->device,
                       [&] { return WqeBytes(ModeledShape(qp, opcode, send_flags, sge.length, 1)); },
                       post == nullptr, qp->shape_cursors.fast_send[signaled],
                       [&] { return at.lane(); });
  if (post != nullptr) post->Add(wqe_bytes);
  if (signaled) PushSendCompletion(qp, wr_id, IBV_WC_SEND, IBV_WC_SUCCESS, sge.length, slot);
  return FastResult::kDone;
}

[[gnu::noinline]] inline FastResult TryFastSend(SoftQp* qp, const PostContext& at, uint64_t wr_id,
                                                ibv_wr_opcode opcode, uint32_t send_flags, uint32_t imm_data,
                                                const ibv_sge& sge, const UdAddress& address, PostCost* post) {
  return TryFastSendInline(qp, at, wr_id, opcode, send_flags, imm_data, sge, address, post);
}

}  // namespace softnic
