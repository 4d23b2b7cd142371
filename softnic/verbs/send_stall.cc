// The send engine's slower half: finding and mapping peers, fault injection, and RC send
// queues stalled on an RNR NAK or an unreachable responder, retried on the timers the
// QP attributes give (min_rnr_timer / rnr_retry, timeout / retry_cnt) as a NIC would.
#include <cstring>

#include "softnic/verbs/engine.h"
#include "softnic/verbs/send_fast.h"

namespace softnic {
namespace {

constexpr uint64_t kTimeoutUnitNs = 4096;      // IB local ACK timeout: 4.096 us * 2^timeout
constexpr uint64_t kInfiniteTimeoutPollNs = 1000000;  // timeout 0: wait forever, look every 1 ms
constexpr uint32_t kPpm = 1000000;

// IB spec RNR NAK timer field encoding, in microseconds (index 0 is the longest).
constexpr uint32_t kRnrTimerUs[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

bool Usable(const FabricHeader& fabric, const Destination& destination) {
  const QpEntry& entry = *destination.entry;
  if (entry.qpn.load(std::memory_order_acquire) != destination.qpn) return false;
  if (!ProcessAlive(fabric, entry.owner_slot, entry.owner_incarnation)) return false;
  uint32_t state = entry.state.load(std::memory_order_acquire);
  return state == IBV_QPS_RTR || state == IBV_QPS_RTS;
}

// Cold: look the peer up in the fabric and map its receive ring and CQ (an XRC receive QP
// has neither: its SRQs do).
bool MapDestination(Runtime* runtime, uint32_t device, uint32_t qpn, uint32_t type,
                    Destination* destination) {
  QpEntry* entry = &runtime->fabric()->devices[device].qps[qpn & (kMaxQpsPerDevice - 1)];
  if (entry->qpn.load(std::memory_order_acquire) != qpn || entry->type != type) return false;
  destination->device = device;
  destination->qpn = qpn;
  destination->entry = entry;
  if (type == IBV_QPT_XRC_RECV) return true;
  void* queue = runtime->MapRing(entry->recv_queue);
  void* cq = runtime->MapRing(entry->recv_cq);
  if (queue == nullptr || cq == nullptr) return false;
  destination->recv_queue = Ring(queue);
  destination->recv_cq = Ring(cq);
  return true;
}

// The receive QP an RC, UC or XRC send QP is connected to (the one whose RNR timer it waits).
const Destination& ConnectedPeer(const SoftQp* qp) {
  return qp->ex.qp_base.qp_type == IBV_QPT_XRC_SEND ? qp->xrc_target : qp->connected;
}

uint64_t StallIntervalNs(const SoftQp* qp, StallReason reason) {
  if (reason == StallReason::kNoReceive) {
    const Destination& peer = ConnectedPeer(qp);
    uint32_t timer = peer.entry ? peer.entry->min_rnr_timer.load(std::memory_order_relaxed) : 0;
    return uint64_t{kRnrTimerUs[timer & 31]} * 1000;
  }
  if (qp->attr.timeout == 0) return kInfiniteTimeoutPollNs;
  return kTimeoutUnitNs << qp->attr.timeout;
}

bool RetriesForever(const SoftQp* qp, StallReason reason) {
  return reason == StallReason::kNoReceive ? qp->attr.rnr_retry == kRnrRetryForever
                                           : qp->attr.timeout == 0;
}

void FlushPendingLocked(SoftQp* qp) {
  while (!qp->pending.empty()) {
    StoredWorkRequest stored = std::move(qp->pending.front());
    qp->pending.pop_front();
    CompleteSend(qp, stored.wr, stored.slot, IBV_WC_WR_FLUSH_ERR, 0);
  }
  qp->stall = StallReason::kNone;
}

uint32_t NextRandom() {
  thread_local uint64_t state = NowNs() | 1;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<uint32_t>(state);
}

// The peer `qpn` (of table type `type`) on `device`, through the cache entry `destination`
// (refilled when it holds another peer, or this one is gone).
Destination* ResolveIn(Runtime* runtime, SoftQp* qp, uint32_t device, uint32_t qpn, uint32_t type,
                       Destination* destination) {
  const FabricHeader& fabric = *runtime->fabric();
  bool cached = destination->entry != nullptr && destination->qpn == qpn &&
                destination->device == device;
  if (!cached || destination->entry->qpn.load(std::memory_order_acquire) != qpn) {
    *destination = Destination{};
    if (!MapDestination(runtime, device, qpn, type, destination)) {
      *destination = Destination{};
      return nullptr;
    }
    if (qp->ex.qp_base.qp_type == IBV_QPT_UD) destination->grh = MakeGrh(fabric, qp->device_index, device);
  }
  return Usable(fabric, *destination) ? destination : nullptr;
}

}  // namespace

void LockQp(SoftQp* qp) { LockQpInline(qp); }
void UnlockQp(SoftQp* qp) { UnlockQpInline(qp); }

Destination* ResolveDestination(Runtime* runtime, SoftQp* qp, const WorkRequest& wr) {
  if (qp->ex.qp_base.qp_type == IBV_QPT_UD) {
    if (wr.ah->device < 0) return nullptr;
    return ResolveUdDestination(runtime, qp, uint32_t(wr.ah->device), wr.remote_qpn & kQpnMask);
  }
  if (qp->dest_device < 0) return nullptr;
  if (qp->ex.qp_base.qp_type == IBV_QPT_XRC_SEND) {
    return ResolveIn(runtime, qp, uint32_t(qp->dest_device), qp->attr.dest_qp_num, IBV_QPT_XRC_RECV,
                     &qp->xrc_target);
  }
  return ResolveIn(runtime, qp, uint32_t(qp->dest_device), qp->attr.dest_qp_num, qp->ex.qp_base.qp_type,
                   &qp->connected);
}

Destination* ResolveUdDestination(Runtime* runtime, SoftQp* qp, uint32_t device, uint32_t qpn) {
  return ResolveIn(runtime, qp, device, qpn, IBV_QPT_UD, &qp->ud_cache[UdDestinationSlot(qpn, device)]);
}

Destination* ResolveXrcSrq(Runtime* runtime, SoftQp* qp, uint32_t device, uint32_t srqn) {
  return ResolveIn(runtime, qp, device, srqn & kQpnMask, kXrcSrqEntryType, &qp->xrc_srq);
}

uint32_t EffectiveQkey(const SoftQp* qp, const WorkRequest& wr) {
  // A qkey with the high bit set means "use the QP's own qkey" (IB spec 10.2.5).
  return (wr.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr.remote_qkey;
}

void ApplyFaultDelay(const DeviceEntry& local, const DeviceEntry& remote) {
  uint32_t delay_us = local.faults.delay_us.load(std::memory_order_relaxed) +
                      remote.faults.delay_us.load(std::memory_order_relaxed);
  if (delay_us == 0) return;
  uint64_t until = NowNs() + uint64_t{delay_us} * 1000;
  while (NowNs() < until) __builtin_ia32_pause();
}

bool FaultDrops(const DeviceEntry& local, const DeviceEntry& remote) {
  uint32_t ppm = local.faults.drop_ppm.load(std::memory_order_relaxed) +
                 remote.faults.drop_ppm.load(std::memory_order_relaxed);
  return ppm != 0 && (ppm >= kPpm || NextRandom() % kPpm < ppm);
}

void CopyWorkRequest(const WorkRequest& wr, StoredWorkRequest* stored) {
  stored->wr = wr;
  stored->sges.assign(wr.sg_list, wr.sg_list + wr.num_sge);
  if (wr.send_flags & IBV_SEND_INLINE) {
    // Inline data belongs to the caller only until post returns: keep a copy.
    size_t total = 0;
    for (const ibv_sge& sge : stored->sges) total += sge.length;
    stored->inline_bytes.resize(total);
    size_t offset = 0;
    for (ibv_sge& sge : stored->sges) {
      std::memcpy(stored->inline_bytes.data() + offset, reinterpret_cast<const void*>(sge.addr), sge.length);
      sge.addr = reinterpret_cast<uintptr_t>(stored->inline_bytes.data() + offset);
      offset += sge.length;
    }
  }
  stored->wr.sg_list = stored->sges.data();
}

void StorePending(SoftQp* qp, const WorkRequest& wr, uint32_t slot) {
  for (WriteRoute& route : qp->write_routes) route.Clear();  // later WRs queue behind this one
  qp->pending.emplace_back();
  StoredWorkRequest& stored = qp->pending.back();
  CopyWorkRequest(wr, &stored);
  stored.slot = slot;
}

void BeginStall(SoftQp* qp, StallReason reason) {
  qp->stall = reason;
  qp->stall_retries_left = reason == StallReason::kNoReceive ? qp->attr.rnr_retry : qp->attr.retry_cnt;
  qp->stall_next_try_ns = NowNs() + StallIntervalNs(qp, reason);
  if (reason == StallReason::kNoReceive) Count(Runtime::Get()->counters(qp->device_index), kRnrRetries);
  Runtime::Get()->AddStalled(qp);
}

bool ProgressQpLocked(SoftQp* qp) {
  while (!qp->pending.empty()) {
    if (qp->entry->state.load(std::memory_order_acquire) == IBV_QPS_ERR) {
      FlushPendingLocked(qp);
      return false;
    }
    uint64_t now = NowNs();
    if (qp->stall != StallReason::kNone && now < qp->stall_next_try_ns) return true;
    StoredWorkRequest& head = qp->pending.front();
    Outcome outcome = Execute(qp, head.wr);
    if (outcome.kind == Outcome::kStall) {
      CounterBlock& counters = Runtime::Get()->counters(qp->device_index);
      if (outcome.reason != qp->stall) {
        BeginStall(qp, outcome.reason);
        return true;
      }
      if (!RetriesForever(qp, outcome.reason)) {
        if (qp->stall_retries_left == 0) {
          bool rnr = outcome.reason == StallReason::kNoReceive;
          Count(counters, kRetryExceeded);
          StoredWorkRequest failed = std::move(head);
          qp->pending.pop_front();
          Finish(qp, failed.wr, failed.slot,
                 Outcome{Outcome::kComplete, rnr ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR,
                         0, StallReason::kNone});
          return false;
        }
        --qp->stall_retries_left;
      }
      if (outcome.reason == StallReason::kNoReceive) Count(counters, kRnrRetries);
      qp->stall_next_try_ns = now + StallIntervalNs(qp, outcome.reason);
      return true;
    }
    qp->stall = StallReason::kNone;
    StoredWorkRequest done = std::move(head);
    qp->pending.pop_front();
    Finish(qp, done.wr, done.slot, outcome);
  }
  qp->stall = StallReason::kNone;
  return false;
}

void SetQpErrorLocked(SoftQp* qp) {
  SetQpStateError(qp);
  FlushPendingLocked(qp);
  FlushRecvQueue(qp);
}

}  // namespace softnic
