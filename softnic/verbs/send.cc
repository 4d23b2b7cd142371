// The send engine: the requester's ibv_post_send performs each transfer (copy into or out
// of the peer's mapped memory, or an atomic on it) and produces the completions. The
// responder's CPU takes no part in READ, WRITE and atomics.
//
// Hot path (no stall): validate, one SQ-room check, resolve the peer (cached), check the
// key against the shared MR table, copy, push a CQE. No allocation, no system call; the
// per-QP spinlock is the one mlx5 takes too. RC sends that cannot proceed (no RECV posted,
// responder not ready) become "stalled": the WR and every later one wait in order in
// qp->pending and are retried on the RNR/retry timers (send_stall.cc).
#include <cerrno>
#include <cstring>

#include "softnic/verbs/multicast.h"
#include "softnic/verbs/send_fast.h"

namespace softnic {
namespace {

constexpr uint32_t kMaxPieces = 2 * 32 + 1;
static_assert(kMaxPieces >= DeviceAttributes{}.max_sge + 1, "the sender SGEs plus a GRH");

struct Piece {
  uint8_t* address;
  uint64_t bytes;
};

ibv_wc_opcode WcOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: return IBV_WC_SEND;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

bool AllowedOpcode(ibv_qp_type type, ibv_wr_opcode opcode) {
  if (type == IBV_QPT_XRC_RECV) return false;  // it has no send queue
  switch (opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: return true;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return type != IBV_QPT_UD;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IsReliable(type);
    default: return false;
  }
}

// The QP access flag (ibv_modify_qp) a responder needs for `opcode`; 0 for SENDs.
uint32_t ResponderAccess(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_ACCESS_REMOTE_WRITE;
    case IBV_WR_RDMA_READ: return IBV_ACCESS_REMOTE_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_ACCESS_REMOTE_ATOMIC;
    default: return 0;
  }
}

uint64_t TotalBytes(const WorkRequest& wr) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  return total;
}

// A local buffer named by an SGE of this QP's own device; null if the lkey does not cover
// it (IBV_WC_LOC_PROT_ERR).
uint8_t* LocalBuffer(const SoftQp* qp, const ibv_sge& sge, uint32_t needed_access) {
  KeyTranslation translation;
  if (!TranslateKey(Runtime::Get(), qp->device_index, sge.lkey, needed_access, qp->entry->pd_id, true,
                    &translation)) {
    return nullptr;
  }
  return TranslatedAddress(translation, sge.addr, sge.length);
}

// The memory a peer's key names, mapped into this process. Null when the key, PD, access
// or range check fails: nothing outside a registered region is ever touched.
uint8_t* PeerBuffer(Runtime* runtime, uint32_t device, uint32_t key, uint64_t address,
                    uint64_t bytes, uint32_t needed_access, uint32_t pd_id) {
  KeyTranslation translation;
  if (!TranslateKey(runtime, device, key, needed_access, pd_id, false, &translation)) return nullptr;
  return TranslatedAddress(translation, address, bytes);
}

// The sender's gather list as pieces. False: a local key check failed.
bool GatherSources(const SoftQp* qp, const WorkRequest& wr, Piece* pieces, uint32_t* count) {
  bool inline_data = (wr.send_flags & IBV_SEND_INLINE) != 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const ibv_sge& sge = wr.sg_list[i];
    if (sge.length == 0) continue;
    uint8_t* address = inline_data ? reinterpret_cast<uint8_t*>(sge.addr)
                                   : LocalBuffer(qp, sge, 0);
    if (address == nullptr) return false;
    pieces[n++] = Piece{address, sge.length};
  }
  *count = n;
  return true;
}

// Copies pieces into one contiguous range, its last 8 bytes last (see CopyOrderedSingle).
void CopyOrdered(uint8_t* destination, const Piece* pieces, uint32_t count, uint64_t total) {
  constexpr uint64_t kTailBytes = 8;
  if (count == 1) {
    CopyOrderedSingle(destination, pieces[0].address, total);
    return;
  }
  uint64_t body = total > kTailBytes ? total - kTailBytes : 0;
  uint64_t offset = 0;
  uint8_t tail[kTailBytes];
  uint64_t tail_filled = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* source = pieces[i].address;
    uint64_t bytes = pieces[i].bytes;
    if (offset < body) {
      uint64_t part = std::min(bytes, body - offset);
      std::memcpy(destination + offset, source, part);
      offset += part;
      source += part;
      bytes -= part;
    }
    if (bytes > 0) {
      std::memcpy(tail + tail_filled, source, bytes);
      tail_filled += bytes;
    }
  }
  if (tail_filled == 0) return;
  std::atomic_thread_fence(std::memory_order_release);
  uint8_t* at = destination + offset;
  if (tail_filled == kTailBytes && (reinterpret_cast<uintptr_t>(at) & (kTailBytes - 1)) == 0) {
    uint64_t word;
    std::memcpy(&word, tail, sizeof(word));
    __atomic_store_n(reinterpret_cast<uint64_t*>(at), word, __ATOMIC_RELEASE);
  } else {
    std::memcpy(at, tail, tail_filled);
  }
}

// Copies a source piece list into a destination piece list (front to back).
void CopyPieces(const Piece* to, uint32_t to_count, const Piece* from, uint32_t from_count) {
  uint32_t t = 0;
  uint64_t t_offset = 0;
  for (uint32_t f = 0; f < from_count; ++f) {
    const uint8_t* source = from[f].address;
    uint64_t left = from[f].bytes;
    while (left > 0 && t < to_count) {
      uint64_t part = std::min(left, to[t].bytes - t_offset);
      if (source != nullptr) {  // a piece without an address leaves its target bytes as they are
        std::memcpy(to[t].address + t_offset, source, part);
        source += part;
      }
      left -= part;
      t_offset += part;
      if (t_offset == to[t].bytes) {
        ++t;
        t_offset = 0;
      }
    }
  }
}

void CountTransfer(Runtime* runtime, SoftQp* qp, const WorkRequest& wr, uint32_t peer_device) {
  uint64_t key = MessageKey(TransferShape{ModeledShape(qp, wr), qp->path_mtu_bytes}, runtime->fabric()->link_layer);
  AccountTransfer(key, qp->shape_cursors, runtime->counters(qp->device_index), runtime->counters(peer_device));
}

// Responder side of a message that consumes a RECV: take one, or report none.
bool TakeRecv(Destination& destination, uint8_t* wqe_copy, uint32_t wqe_bytes, uint64_t* dequeued) {
  bool taken = destination.recv_queue.TryPop(wqe_copy, wqe_bytes, dequeued);
  if (taken && destination.entry->uses_srq) {
    RingHeader* header = destination.recv_queue.header();
    uint32_t limit = header->srq_limit.load(std::memory_order_relaxed);
    if (limit != 0 && destination.recv_queue.Size() < limit &&
        header->srq_limit.exchange(0, std::memory_order_acq_rel) != 0) {
      header->event_pending.store(1, std::memory_order_release);
      Runtime::Get()->SignalChannel(header->async_channel_id);
    }
  }
  return taken;
}

Outcome Fail(ibv_wc_status status) { return Outcome{Outcome::kComplete, status, 0, StallReason::kNone}; }
Outcome Done(uint64_t bytes) {
  return Outcome{Outcome::kComplete, IBV_WC_SUCCESS, static_cast<uint32_t>(bytes), StallReason::kNone};
}
Outcome Stall(StallReason reason) { return Outcome{Outcome::kStall, IBV_WC_SUCCESS, 0, reason}; }

// A message the transport loses silently (UC/UD): counted, completes successfully.
Outcome Lose(Runtime* runtime, const SoftQp* qp, Counter counter) {
  Count(runtime->counters(qp->device_index), counter);
  return Done(0);
}

// A message that consumes a RECV of `destination`'s receive queue, completed in its CQ. The
// completion and an error are `responder`'s, the QP the message came to: the destination
// itself, but on XRC, where the destination is the SRQ the WR named.
Outcome ExecuteSend(Runtime* runtime, SoftQp* qp, const WorkRequest& wr, Destination& destination,
                    const Destination& responder, const Piece* sources, uint32_t source_count, uint64_t total) {
  const FabricHeader& fabric = *runtime->fabric();
  bool reliable = IsReliable(qp->ex.qp_base.qp_type);
  bool ud = qp->ex.qp_base.qp_type == IBV_QPT_UD;
  alignas(16) uint8_t wqe_storage[sizeof(RecvWqe) + sizeof(ibv_sge) * 64];
  auto* wqe = reinterpret_cast<RecvWqe*>(wqe_storage);
  uint32_t wqe_bytes = RecvWqeBytes(destination.entry->recv_sge_capacity);
  uint64_t recv_dequeued = 0;
  if (wqe_bytes > sizeof(wqe_storage) || !TakeRecv(destination, wqe_storage, wqe_bytes, &recv_dequeued)) {
    if (reliable) return Stall(StallReason::kNoReceive);
    return Lose(runtime, qp, kDroppedNoRecv);
  }
  Cqe cqe = ReceiveCompletion(fabric, qp, responder.qpn, wqe->wr_id, wr.opcode, wr.imm_data);
  // The owner's post_recv learns the ring's progress through the QP it polls the completion
  // of; an XRC receive QP has no ring, so its SRQ's producer reads the ring instead.
  cqe.recv_dequeued = &responder == &destination ? recv_dequeued : 0;
  bool solicited = (wr.send_flags & IBV_SEND_SOLICITED) != 0;
  if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    cqe.byte_len = static_cast<uint32_t>(total);
    cqe.status = IBV_WC_SUCCESS;
    PushCqe(destination.recv_cq, cqe, destination.device, solicited);
    return Done(total);
  }
  // SEND: scatter into the responder's buffers, behind a GRH on UD.
  uint64_t header_bytes = ud ? kUdGrhBytes : 0;
  Piece targets[kMaxPieces];
  uint32_t target_count = 0;
  uint64_t capacity = 0;
  bool protection_ok = true;
  for (uint32_t i = 0; i < destination.entry->recv_sge_capacity && protection_ok; ++i) {
    const ibv_sge& sge = wqe->sge[i];
    if (sge.length == 0) continue;
    uint8_t* address = PeerBuffer(runtime, destination.device, sge.lkey, sge.addr, sge.length,
                                  IBV_ACCESS_LOCAL_WRITE, destination.entry->pd_id);
    protection_ok = address != nullptr;
    targets[target_count++] = Piece{address, sge.length};
    capacity += sge.length;
  }
  cqe.opcode = IBV_WC_RECV;
  if (!protection_ok || total + header_bytes > capacity) {
    cqe.status = protection_ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
    PushCqe(destination.recv_cq, cqe, destination.device, solicited);
    if (!reliable) return Done(0);
    ChangeBetweenControlEpochs(*runtime->fabric(),
                               [&] { responder.entry->state.store(IBV_QPS_ERR, std::memory_order_release); });
    return Fail(protection_ok ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR);
  }
  Piece all_sources[kMaxPieces];
  uint32_t all_count = 0;
  uint8_t grh[kUdGrhBytes];
  if (ud) {
    // Without a GRH on the wire the GRH area is left as posted (see the fast path).
    const bool grh_sent = ReceiverSeesGrh(fabric, wr.ah);
    if (grh_sent) {
      WriteGrh(grh, destination.grh, total);
      cqe.wc_flags |= IBV_WC_GRH;
    }
    all_sources[all_count++] = Piece{grh_sent ? grh : nullptr, kUdGrhBytes};
  }
  for (uint32_t i = 0; i < source_count; ++i) all_sources[all_count++] = sources[i];
  CopyPieces(targets, target_count, all_sources, all_count);
  cqe.byte_len = static_cast<uint32_t>(total + header_bytes);
  cqe.status = IBV_WC_SUCCESS;
  PushCqe(destination.recv_cq, cqe, destination.device, solicited);
  return Done(total);
}

Outcome ExecuteAtomic(Runtime* runtime, SoftQp* qp, const WorkRequest& wr, const Destination& destination) {
  if ((wr.remote_addr & 7) != 0) return Fail(IBV_WC_REM_INV_REQ_ERR);
  uint8_t* remote = PeerBuffer(runtime, destination.device, wr.rkey, wr.remote_addr, 8,
                               IBV_ACCESS_REMOTE_ATOMIC, destination.entry->pd_id);
  if (remote == nullptr) {
    Count(runtime->counters(qp->device_index), kRemoteAccessErrors);
    return Fail(IBV_WC_REM_ACCESS_ERR);
  }
  uint8_t* local = LocalBuffer(qp, wr.sg_list[0], IBV_ACCESS_LOCAL_WRITE);
  if (local == nullptr) return Fail(IBV_WC_LOC_PROT_ERR);
  auto* word = reinterpret_cast<uint64_t*>(remote);
  uint64_t original;
  if (wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    original = __atomic_fetch_add(word, wr.compare_add, __ATOMIC_SEQ_CST);
  } else {
    original = wr.compare_add;
    __atomic_compare_exchange_n(word, &original, wr.swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  }
  std::memcpy(local, &original, sizeof(original));
  CountTransfer(runtime, qp, wr, destination.device);
  return Done(sizeof(original));
}

Outcome ExecuteRead(Runtime* runtime, SoftQp* qp, const WorkRequest& wr, const Destination& destination) {
  Piece targets[kMaxPieces];
  uint32_t count = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    if (wr.sg_list[i].length == 0) continue;
    uint8_t* local = LocalBuffer(qp, wr.sg_list[i], IBV_ACCESS_LOCAL_WRITE);
    if (local == nullptr) return Fail(IBV_WC_LOC_PROT_ERR);
    targets[count++] = Piece{local, wr.sg_list[i].length};
  }
  uint64_t total = wr.total_bytes;
  uint8_t* remote = PeerBuffer(runtime, destination.device, wr.rkey, wr.remote_addr, total,
                               IBV_ACCESS_REMOTE_READ, destination.entry->pd_id);
  if (remote == nullptr) {
    Count(runtime->counters(qp->device_index), kRemoteAccessErrors);
    return Fail(IBV_WC_REM_ACCESS_ERR);
  }
  Piece source{remote, total};
  CopyPieces(targets, count, &source, 1);
  CountTransfer(runtime, qp, wr, destination.device);
  return Done(total);
}

enum class FaultVerdict { kPasses, kDeviceDown, kDropped };

// The device faults on the path to `device` (fault injection): down devices lose every
// message, a delay waits here, a drop probability loses UC/UD messages.
FaultVerdict PassFaults(Runtime* runtime, const SoftQp* qp, uint32_t device, bool reliable) {
  const FabricHeader& fabric = *runtime->fabric();
  if (fabric.faults_active.load(std::memory_order_relaxed) == 0) return FaultVerdict::kPasses;
  const DeviceEntry& local_device = fabric.devices[qp->device_index];
  const DeviceEntry& remote_device = fabric.devices[device];
  if (local_device.faults.down.load(std::memory_order_relaxed) |
      remote_device.faults.down.load(std::memory_order_relaxed)) {
    return FaultVerdict::kDeviceDown;
  }
  ApplyFaultDelay(local_device, remote_device);
  if (!reliable && FaultDrops(local_device, remote_device)) return FaultVerdict::kDropped;
  return FaultVerdict::kPasses;
}

// A UD SEND to a group: every QP attached to it, on any device (the sender's own QP too:
// a NIC loops multicast back to its port), gets a copy through the checks a unicast SEND
// meets there (QKEY, faults, a posted RECV), with the group's GID as the GRH's
// destination. The sender completes once, whoever received.
Outcome ExecuteMulticast(Runtime* runtime, SoftQp* qp, const WorkRequest& wr) {
  if ((wr.remote_qpn & kQpnMask) != kMulticastQpn) return Lose(runtime, qp, kDroppedNoDestination);
  Piece sources[kMaxPieces];
  uint32_t source_count = 0;
  if (!GatherSources(qp, wr, sources, &source_count)) return Fail(IBV_WC_LOC_PROT_ERR);
  const FabricHeader& fabric = *runtime->fabric();
  const uint32_t in_use = fabric.multicast_in_use.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < in_use; ++i) {
    const MulticastAttachment& member = fabric.multicast[i];
    const uint32_t qpn = member.qpn.load(std::memory_order_acquire);
    if (qpn == 0 || qpn == kEntryReserved || !ReachesAttachment(wr.ah->attr, member)) continue;
    Destination* destination = ResolveUdDestination(runtime, qp, member.device, qpn);
    if (destination == nullptr || destination->entry->qkey.load(std::memory_order_relaxed) != EffectiveQkey(qp, wr)) {
      Count(runtime->counters(qp->device_index), kDroppedNoDestination);
      continue;
    }
    switch (PassFaults(runtime, qp, destination->device, false)) {
      case FaultVerdict::kPasses: break;
      case FaultVerdict::kDeviceDown: Count(runtime->counters(qp->device_index), kDroppedDeviceDown); continue;
      case FaultVerdict::kDropped: Count(runtime->counters(qp->device_index), kDroppedFault); continue;
    }
    const ibv_grh unicast_grh = destination->grh;
    std::memcpy(destination->grh.dgid.raw, member.mgid, sizeof(member.mgid));
    Outcome outcome = ExecuteSend(runtime, qp, wr, *destination, *destination, sources, source_count, wr.total_bytes);
    destination->grh = unicast_grh;
    if (outcome.status == IBV_WC_SUCCESS) CountTransfer(runtime, qp, wr, destination->device);
  }
  return Done(wr.total_bytes);
}

// Whether the responder QP enables `opcode` (its qp_access_flags); SENDs need nothing.
bool ResponderEnables(const Destination& responder, ibv_wr_opcode opcode) {
  uint32_t needed = ResponderAccess(opcode);
  return needed == 0 || (responder.entry->qp_access_flags.load(std::memory_order_acquire) & needed) != 0;
}

// The transfer itself, once the responder QP has taken the WR: `receiver` is where its keys
// are checked (their PD) and a RECV is taken from, `responder` the QP (they differ on XRC:
// the receiver is the SRQ the WR names).
Outcome Deliver(Runtime* runtime, SoftQp* qp, const WorkRequest& wr, Destination& receiver,
                const Destination& responder) {
  bool reliable = IsReliable(qp->ex.qp_base.qp_type);
  switch (wr.opcode) {
    case IBV_WR_RDMA_READ: return ExecuteRead(runtime, qp, wr, receiver);
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return ExecuteAtomic(runtime, qp, wr, receiver);
    default: break;
  }
  Piece sources[kMaxPieces];
  uint32_t source_count = 0;
  if (!GatherSources(qp, wr, sources, &source_count)) return Fail(IBV_WC_LOC_PROT_ERR);
  uint64_t total = wr.total_bytes;
  if (wr.opcode == IBV_WR_RDMA_WRITE || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    uint8_t* remote = PeerBuffer(runtime, receiver.device, wr.rkey, wr.remote_addr, total,
                                 IBV_ACCESS_REMOTE_WRITE, receiver.entry->pd_id);
    if (remote == nullptr && total != 0) {
      Count(runtime->counters(qp->device_index), kRemoteAccessErrors);
      return reliable ? Fail(IBV_WC_REM_ACCESS_ERR) : Lose(runtime, qp, kDroppedAccess);
    }
    // WRITE_WITH_IMM needs a RECV before any byte lands, so that an RNR leaves no trace.
    if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && receiver.recv_queue.Size() == 0) {
      return reliable ? Stall(StallReason::kNoReceive) : Lose(runtime, qp, kDroppedNoRecv);
    }
    if (total != 0) CopyOrdered(remote, sources, source_count, total);
    CountTransfer(runtime, qp, wr, receiver.device);
    if (wr.opcode == IBV_WR_RDMA_WRITE) return Done(total);
    return ExecuteSend(runtime, qp, wr, receiver, responder, sources, source_count, total);
  }
  Outcome outcome = ExecuteSend(runtime, qp, wr, receiver, responder, sources, source_count, total);
  if (outcome.kind == Outcome::kComplete && outcome.status == IBV_WC_SUCCESS) {
    CountTransfer(runtime, qp, wr, receiver.device);
  }
  return outcome;
}

// XRC: the WR goes to the receive QP this QP is connected to, which hands it to the SRQ
// the WR names; a NIC answers an SRQ number that names no SRQ, or one of another XRC
// domain than the receive QP's, with a NAK (invalid request), which ends the send QP.
// Every operation's keys are checked against the SRQ's PD (the receive QP has none).
Outcome ExecuteXrc(Runtime* runtime, SoftQp* qp, const WorkRequest& wr) {
  Destination* target = ResolveDestination(runtime, qp, wr);
  if (target == nullptr) return Stall(StallReason::kReceiverNotReady);
  switch (PassFaults(runtime, qp, target->device, true)) {
    case FaultVerdict::kPasses: break;
    case FaultVerdict::kDeviceDown:
      Lose(runtime, qp, kDroppedDeviceDown);
      return Stall(StallReason::kReceiverNotReady);
    case FaultVerdict::kDropped: return Lose(runtime, qp, kDroppedFault);
  }
  Destination* srq = ResolveXrcSrq(runtime, qp, target->device, wr.remote_srqn);
  if (srq == nullptr || srq->entry->xrcd_id != target->entry->xrcd_id || !ResponderEnables(*target, wr.opcode)) {
    Count(runtime->counters(qp->device_index), kRemoteAccessErrors);
    return Fail(IBV_WC_REM_INV_REQ_ERR);
  }
  return Deliver(runtime, qp, wr, *srq, *target);
}

}  // namespace

Outcome Execute(SoftQp* qp, const WorkRequest& wr) {
  Runtime* runtime = Runtime::Get();
  ibv_qp_type type = qp->ex.qp_base.qp_type;
  bool reliable = type == IBV_QPT_RC;
  if (type == IBV_QPT_UD && wr.ah->multicast) return ExecuteMulticast(runtime, qp, wr);
  if (type == IBV_QPT_XRC_SEND) return ExecuteXrc(runtime, qp, wr);
  Destination* destination = ResolveDestination(runtime, qp, wr);
  if (destination == nullptr) {
    return reliable ? Stall(StallReason::kReceiverNotReady) : Lose(runtime, qp, kDroppedNoDestination);
  }
  if (type == IBV_QPT_UD &&
      destination->entry->qkey.load(std::memory_order_relaxed) != EffectiveQkey(qp, wr)) {
    return Lose(runtime, qp, kDroppedNoDestination);
  }
  switch (PassFaults(runtime, qp, destination->device, reliable)) {
    case FaultVerdict::kPasses: break;
    // Every attempt is lost on the wire; RC then retries until retry_cnt runs out.
    case FaultVerdict::kDeviceDown: {
      Outcome lost = Lose(runtime, qp, kDroppedDeviceDown);
      return reliable ? Stall(StallReason::kReceiverNotReady) : lost;
    }
    case FaultVerdict::kDropped: return Lose(runtime, qp, kDroppedFault);
  }

  // The responder's QP must enable the operation before any key is looked at (rxe's
  // check_op_valid): RC NAKs it as an invalid request, UC drops it.
  if (!ResponderEnables(*destination, wr.opcode)) {
    Count(runtime->counters(qp->device_index), kRemoteAccessErrors);
    return reliable ? Fail(IBV_WC_REM_INV_REQ_ERR) : Lose(runtime, qp, kDroppedAccess);
  }
  return Deliver(runtime, qp, wr, *destination, *destination);
}

int ValidateWorkRequest(const SoftQp* qp, WorkRequest& wr) {
  ibv_qp_type type = qp->ex.qp_base.qp_type;
  if (!AllowedOpcode(type, wr.opcode)) return EINVAL;
  if (wr.num_sge > qp->cap.max_send_sge) return EINVAL;
  wr.total_bytes = TotalBytes(wr);
  bool atomic = wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  if (atomic && (wr.num_sge != 1 || wr.sg_list[0].length < sizeof(uint64_t))) return EINVAL;
  if (wr.send_flags & IBV_SEND_INLINE) {
    if (atomic || wr.opcode == IBV_WR_RDMA_READ) return EINVAL;
    if (wr.total_bytes > qp->cap.max_inline_data) return EINVAL;
  }
  if (type == IBV_QPT_UD && (wr.ah == nullptr || wr.total_bytes > qp->path_mtu_bytes)) return EINVAL;
  return 0;
}

void CompleteSend(SoftQp* qp, const WorkRequest& wr, uint32_t slot, ibv_wc_status status,
                  uint32_t byte_len) {
  PushSendCompletion(qp, wr.wr_id, WcOpcode(wr.opcode), status, byte_len, slot);
}

// Completion of an executed WR: a CQE when signaled or failed; a failure moves the QP
// to ERR, which flushes everything behind it.
void Finish(SoftQp* qp, const WorkRequest& wr, uint32_t slot, const Outcome& outcome) {
  if (outcome.status != IBV_WC_SUCCESS) {
    CompleteSend(qp, wr, slot, outcome.status, 0);
    SetQpErrorLocked(qp);
    return;
  }
  if (qp->signal_all || (wr.send_flags & IBV_SEND_SIGNALED)) {
    CompleteSend(qp, wr, slot, IBV_WC_SUCCESS, outcome.byte_len);
  }
}

int SubmitLocked(SoftQp* qp, WorkRequest& wr) {
  int rc = ValidateWorkRequest(qp, wr);
  return rc != 0 ? rc : SubmitValidatedLocked(qp, wr);
}

int SubmitValidatedLocked(SoftQp* qp, const WorkRequest& wr) {
  uint32_t outstanding = qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire);
  if (outstanding >= qp->cap.max_send_wr) return ENOMEM;
  uint32_t state = qp->entry->state.load(std::memory_order_acquire);
  if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) return EINVAL;
  uint32_t slot = ++qp->sq_posted;
  if (state == IBV_QPS_ERR) {
    CompleteSend(qp, wr, slot, IBV_WC_WR_FLUSH_ERR, 0);
    return 0;
  }
  if (!qp->pending.empty()) {
    StorePending(qp, wr, slot);
    return 0;
  }
  Outcome outcome = Execute(qp, wr);
  if (outcome.kind == Outcome::kStall) {
    BeginStall(qp, outcome.reason);
    StorePending(qp, wr, slot);
    return 0;
  }
  Finish(qp, wr, slot, outcome);
  return 0;
}

namespace {

WorkRequest FromSendWr(const ibv_send_wr* wr) {
  WorkRequest w{};
  w.wr_id = wr->wr_id;
  w.opcode = wr->opcode;
  w.send_flags = wr->send_flags;
  w.imm_data = wr->imm_data;
  w.num_sge = uint32_t(wr->num_sge < 0 ? ~0u : uint32_t(wr->num_sge));
  w.sg_list = wr->sg_list;
  switch (wr->opcode) {
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w.remote_addr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.compare_add = wr->wr.atomic.compare_add;
      w.swap = wr->wr.atomic.swap;
      break;
    default:
      w.remote_addr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
      break;
  }
  return w;
}

// A UD SEND's destination as its WR names it; none on a connected QP.
[[gnu::always_inline]] inline UdAddress UdAddressOf(const ibv_qp* qp, const ibv_send_wr& wr) {
  if (qp->qp_type != IBV_QPT_UD) return UdAddress{};
  return UdAddress{wr.wr.ud.ah ? ToSoft(wr.wr.ud.ah) : nullptr, wr.wr.ud.remote_qpn, wr.wr.ud.remote_qkey};
}

[[gnu::always_inline]] inline bool PostedFast(SoftQp* qp, const PostContext& at, bool ud, const ibv_send_wr* wr,
                                              PostCost* post_cost) {
  if (wr->num_sge != 1) return false;
  if (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM) {
    return TryFastSend(qp, at, wr->wr_id, wr->opcode, wr->send_flags, wr->imm_data, wr->sg_list[0],
                       UdAddressOf(&qp->ex.qp_base, *wr), post_cost) == FastResult::kDone;
  }
  return wr->opcode == IBV_WR_RDMA_WRITE && !ud &&
         TryFastWrite(qp, at, wr->wr_id, wr->send_flags, wr->sg_list[0], wr->wr.rdma.remote_addr,
                      wr->wr.rdma.rkey, post_cost) == FastResult::kDone;
}

// Lists, and the single WRs PostSendOp's fast paths left (a miss of PostCachedWrite, whose
// caches TryFastWrite fills here; a stalled QP; READs, atomics, several SGEs), under the
// QP's lock: each WR tries the fast paths, else the general engine.
[[gnu::noinline]] int PostSendGeneral(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  SoftQp* qp = ToSoft(ibqp);
  bool ud = ibqp->qp_type == IBV_QPT_UD;
  PostContext at = PostContext::OfThisThread();
  LockQpInline(qp);
  if (qp->stall != StallReason::kNone && !ProgressQpLocked(qp)) at.runtime->RemoveStalled(qp);
  PostCost post_cost;
  int rc = 0;
  uint32_t posted = 0;
  for (; wr != nullptr; wr = wr->next, ++posted) {
    if (PostedFast(qp, at, ud, wr, &post_cost)) continue;
    WorkRequest w = FromSendWr(wr);
    if (ud) {
      w.ah = wr->wr.ud.ah ? ToSoft(wr->wr.ud.ah) : nullptr;
      w.remote_qpn = wr->wr.ud.remote_qpn;
      w.remote_qkey = wr->wr.ud.remote_qkey;
    }
    if (ibqp->qp_type == IBV_QPT_XRC_SEND) w.remote_srqn = wr->qp_type.xrc.remote_srqn;
    rc = SubmitLocked(qp, w);
    if (rc != 0) {
      *bad_wr = wr;
      break;
    }
    post_cost.Add(WqeBytes(ModeledShape(qp, w)));
  }
  if (posted != 0) CountPost(qp, at.lane(), post_cost);
  UnlockQpInline(qp);
  return rc;
}

// Runs a fast path for one WR under the QP's lock, or without it where mlx5 would skip it
// too (SOFTNIC_SINGLE_THREADED with the progress thread off the QP); `stalled` when the QP
// is stalled, since its WR must then queue behind the stalled ones. fast_path(alone) learns
// which: `alone` when no lock was needed.
template <typename Result, typename FastPath>
[[gnu::always_inline]] inline Result PostExclusively(SoftQp* qp, const Runtime& runtime, Result stalled,
                                                     FastPath&& fast_path) {
  if (runtime.single_threaded() && !qp->shared_with_progress.load(std::memory_order_acquire)) return fast_path(true);
  LockQpInline(qp);
  Result result = qp->stall == StallReason::kNone ? fast_path(false) : stalled;
  UnlockQpInline(qp);
  return result;
}

// One SEND: TryFastSend's checks and delivery in a function of their own.
[[gnu::noinline]] int PostSingleSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  SoftQp* qp = ToSoft(ibqp);
  PostContext at = PostContext::OfThisThread();
  FastResult result = PostExclusively(qp, *at.runtime, FastResult::kSlowPath, [&](bool) __attribute__((always_inline)) {
    return TryFastSendInline(qp, at, wr->wr_id, wr->opcode, wr->send_flags, wr->imm_data, wr->sg_list[0],
                             UdAddressOf(ibqp, *wr), nullptr);
  });
  return result == FastResult::kDone ? 0 : PostSendGeneral(ibqp, wr, bad_wr);
}

// Remembers the WRITE PostCachedWrite just took as the QP's route. `epoch` was read before
// PostCachedWrite's checks, so a change since then has left the route stale already.
[[gnu::noinline]] void FillWriteRoute(SoftQp* qp, const FabricHeader& fabric, const ibv_send_wr& wr,
                                      uint64_t epoch, bool needs_lock) {
  const ibv_sge& sge = wr.sg_list[0];
  if (sge.length == 0 || sge.length > kSmallCopyBytes) return;
  bool signaled = qp->signal_all || (wr.send_flags & IBV_SEND_SIGNALED);
  const QpEntry& peer = *qp->connected.entry;
  WriteRoute route;
  route.epoch = epoch;
  route.control_epoch = &fabric.control_epoch;
  route.send_flags = wr.send_flags;
  route.bytes = sge.length;
  route.rkey = wr.wr.rdma.rkey;
  route.remote_first = qp->remote_key.first;
  route.remote_span = qp->remote_key.length - sge.length;
  route.remote_bias = qp->remote_key.bias;
  if ((wr.send_flags & IBV_SEND_INLINE) == 0) {
    route.lkey = sge.lkey;
    route.local_first = qp->local_key.first;
    route.local_span = qp->local_key.length - sge.length;
    route.local_bias = qp->local_key.bias;
  }
  route.peer_process = &fabric.processes[peer.owner_slot];
  route.peer_incarnation = peer.owner_incarnation;
  route.signaled = signaled;
  route.needs_lock = needs_lock;
  route.counts = qp->shape_cursors.fast_write[signaled].For(
      FastWriteKey(qp, sge.length, (wr.send_flags & IBV_SEND_INLINE) != 0, signaled), qp->connected.device);
  WriteRoute& last = qp->RouteFor(wr.send_flags);
  if (last.epoch != WriteRoute::kEmpty) qp->PreviousRouteFor(wr.send_flags) = last;
  last = route;
}

// The end of a cached WRITE whose CQE found its CQ full or with a completion channel.
[[gnu::noinline]] int FinishCachedWriteCompletion(SoftQp* qp, bool pushed) {
  FinishPushCqe(pushed, qp->send_cq->ring, false, qp->device_index, false);
  return 0;
}

[[gnu::always_inline]] inline int FinishCachedWrite(SoftQp* qp, CachedWrite result) {
  switch (result) {
    case CachedWrite::kCqFull: return FinishCachedWriteCompletion(qp, false);
    case CachedWrite::kCqWithChannel: return FinishCachedWriteCompletion(qp, true);
    default: return 0;
  }
}

// One WRITE that the QP's route did not take: PostCachedWrite, which fills the route, else
// the general path, which fills PostCachedWrite's caches.
[[gnu::noinline]] int PostUnroutedWrite(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  SoftQp* qp = ToSoft(ibqp);
  Runtime* runtime = Runtime::IfReady();
  if (runtime == nullptr || ibqp->qp_type == IBV_QPT_UD) return PostSendGeneral(ibqp, wr, bad_wr);
  const FabricHeader& fabric = *runtime->fabric();
  CachedWrite result = PostExclusively(qp, *runtime, CachedWrite::kNotTaken, [&](bool alone) __attribute__((always_inline)) {
    uint64_t epoch = fabric.control_epoch.load(std::memory_order_acquire);
    CachedWrite taken = alone ? PostRoutedWrite(qp, qp->PreviousRouteFor(wr->send_flags), *wr) : CachedWrite::kNotTaken;
    if (taken != CachedWrite::kNotTaken) return taken;
    taken = PostCachedWrite(qp, fabric, *wr);
    if (taken != CachedWrite::kNotTaken) FillWriteRoute(qp, fabric, *wr, epoch, !alone);
    return taken;
  });
  return result == CachedWrite::kNotTaken ? PostSendGeneral(ibqp, wr, bad_wr) : FinishCachedWrite(qp, result);
}

// One WRITE on a QP whose route (PostSendOp's pick) is read under its lock.
[[gnu::noinline]] int PostLockedWrite(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WriteRoute& route) {
  SoftQp* qp = ToSoft(ibqp);
  LockQpInline(qp);
  CachedWrite result = PostRoutedWrite(qp, route, *wr);
  if (result == CachedWrite::kNotTaken) result = PostRoutedWrite(qp, qp->PreviousRouteFor(wr->send_flags), *wr);
  UnlockQpInline(qp);
  if (result == CachedWrite::kNotTaken) return PostUnroutedWrite(ibqp, wr, bad_wr);
  return FinishCachedWrite(qp, result);
}

// One WR: a WRITE takes the QP's route, else PostUnroutedWrite; a SEND PostSingleSend;
// everything else the general path (as tail calls, so that a WRITE's post builds no frame).
int PostSendOp(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (wr == nullptr || wr->next != nullptr || wr->num_sge != 1) return PostSendGeneral(ibqp, wr, bad_wr);
  if (wr->opcode == IBV_WR_RDMA_WRITE) {
    SoftQp* qp = ToSoft(ibqp);
    const WriteRoute& route = qp->RouteFor(wr->send_flags);
    if (route.needs_lock) return PostLockedWrite(ibqp, wr, bad_wr, route);
    CachedWrite result = PostRoutedWrite(qp, route, *wr);
    if (result == CachedWrite::kNotTaken) return PostUnroutedWrite(ibqp, wr, bad_wr);
    return FinishCachedWrite(qp, result);
  }
  if (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM) return PostSingleSend(ibqp, wr, bad_wr);
  return PostSendGeneral(ibqp, wr, bad_wr);
}

}  // namespace

void InstallSendOps(ibv_context_ops* ops, verbs_context*) { ops->post_send = PostSendOp; }

}  // namespace softnic
