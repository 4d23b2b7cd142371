// The receive side: posting RECVs to a QP or an SRQ (shared rings that senders in any
// process consume), SRQs, and address handles for UD.
#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "softnic/fabric/object.h"
#include "softnic/verbs/internal.h"
#include "softnic/verbs/multicast.h"

namespace softnic {
namespace {

constexpr uint32_t kMaxWrsPerClaim = 64;

[[gnu::always_inline]] inline void WriteRecvWqe(void* payload, const ibv_recv_wr* wr, uint32_t max_sge) {
  auto* wqe = static_cast<RecvWqe*>(payload);
  wqe->wr_id = wr->wr_id;
  uint32_t used = uint32_t(wr->num_sge);
  if (max_sge == 1 && used == 1) {
    wqe->sge[0] = wr->sg_list[0];
  } else {
    std::memcpy(wqe->sge, wr->sg_list, sizeof(ibv_sge) * used);
    std::memset(&wqe->sge[used], 0, sizeof(ibv_sge) * (max_sge - used));
  }
}

// Appends a chain of receive WRs to a ring of `max_sge` SGEs per WQE, each run of good WRs
// with one claim (a refill of many RECVs costs one atomic, not one per WQE). Stops at the
// first bad WR (EINVAL for too many SGEs, ENOMEM when the ring is full), like a NIC's
// post_recv.
[[gnu::noinline]] int PostListToRing(Ring& ring, uint32_t max_sge, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  while (wr != nullptr) {
    uint32_t run = 0;
    for (const ibv_recv_wr* w = wr; w != nullptr && run < kMaxWrsPerClaim; w = w->next, ++run) {
      if (w->num_sge < 0 || uint32_t(w->num_sge) > max_sge) break;
    }
    if (run == 0) {
      *bad_wr = wr;
      return EINVAL;
    }
    ibv_recv_wr* next = wr;
    uint32_t pushed = ring.TryPushMany(run, [&](uint32_t, void* payload) {
      WriteRecvWqe(payload, next, max_sge);
      next = next->next;
    });
    if (pushed < run) {
      *bad_wr = next;
      return ENOMEM;
    }
    wr = next;
  }
  return 0;
}

// One WR, the common re-post, with one push; a list, or a bad WR, takes PostListToRing (out
// of line, so that its loop does not widen this frame).
int PostToRing(Ring& ring, uint32_t max_sge, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (wr == nullptr || wr->next != nullptr || wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge) {
    return PostListToRing(ring, max_sge, wr, bad_wr);
  }
  if (ring.TryPush([&](void* payload) { WriteRecvWqe(payload, wr, max_sge); })) return 0;
  *bad_wr = wr;
  return ENOMEM;
}

void FlushRecvWr(SoftQp* qp, uint64_t wr_id) {
  Cqe cqe{};
  cqe.wr_id = wr_id;
  cqe.status = IBV_WC_WR_FLUSH_ERR;
  cqe.opcode = IBV_WC_RECV;
  cqe.qp_num = qp->ex.qp_base.qp_num;
  PushCqe(qp->recv_cq->ring, cqe, qp->device_index, false);
}

int PostRecvOp(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  SoftQp* qp = ToSoft(ibqp);
  if (qp->srq != nullptr || IsXrc(ibqp->qp_type)) {  // XRC receives go to XRC SRQs
    *bad_wr = wr;
    return EINVAL;
  }
  uint32_t state = qp->entry->state.load(std::memory_order_acquire);
  if (state == IBV_QPS_RESET) {
    *bad_wr = wr;
    return EINVAL;
  }
  if (state == IBV_QPS_ERR) {
    for (; wr != nullptr; wr = wr->next) FlushRecvWr(qp, wr->wr_id);
    return 0;
  }
  if (qp->cap.max_recv_wr == 0) {  // created without a receive queue
    *bad_wr = wr;
    return ENOMEM;
  }
  return PostToRing(qp->recv_ring, std::max<uint32_t>(qp->cap.max_recv_sge, 1), wr, bad_wr);
}

int PostSrqRecvOp(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  SoftSrq* srq = ToSoft(ibsrq);
  return PostToRing(srq->ring, srq->max_sge, wr, bad_wr);
}

}  // namespace

void FlushRecvQueue(SoftQp* qp) {
  if (qp->recv_object.id == 0) return;  // no receive ring of its own
  RecvWqe head;
  while (qp->recv_ring.TryPop(&head, sizeof(head))) FlushRecvWr(qp, head.wr_id);
}

// An SRQ's ring, in this process's list for its async events; the caller adds what its
// type needs (XRC: the table entry). Null with errno.
SoftSrq* NewSrq(ibv_pd* pd, ibv_srq_attr* attr, void* srq_context) {
  Runtime* runtime = Runtime::Get();
  const DeviceAttributes& limits = runtime->fabric()->attributes;
  if (attr->max_wr == 0 || attr->max_wr > limits.max_srq_wr ||
      attr->max_sge == 0 || attr->max_sge > limits.max_sge) {
    errno = EINVAL;
    return nullptr;
  }
  auto* srq = new SoftSrq{};
  uint32_t capacity = RoundUpPowerOfTwo(attr->max_wr);
  uint32_t payload = RecvWqeBytes(attr->max_sge);
  if (!runtime->CreateRing(capacity, payload, &srq->object, &srq->ring)) {
    int err = errno;
    delete srq;
    errno = err;
    return nullptr;
  }
  srq->ring.header()->srq_limit.store(attr->srq_limit, std::memory_order_relaxed);
  srq->ring.header()->async_channel_id = ToSoft(pd->context)->async_fifo_id;
  srq->max_sge = attr->max_sge;
  srq->max_wr = capacity;
  srq->context = ToSoft(pd->context);
  srq->srq.context = pd->context;
  srq->srq.srq_context = srq_context;
  srq->srq.pd = pd;
  pthread_mutex_init(&srq->srq.mutex, nullptr);
  pthread_cond_init(&srq->srq.cond, nullptr);
  attr->max_wr = capacity;
  {
    std::lock_guard<std::mutex> lock(srq->context->objects_mutex);
    srq->context->srqs.push_back(srq);
  }
  return srq;
}

void InstallRecvOps(ibv_context_ops* ops, verbs_context*) {
  ops->post_recv = PostRecvOp;
  ops->post_srq_recv = PostSrqRecvOp;
}

}  // namespace softnic

using namespace softnic;

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  SoftSrq* srq = NewSrq(pd, &attr->attr, attr->srq_context);
  return srq != nullptr ? &srq->srq : nullptr;
}

int ibv_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
  SoftSrq* srq = ToSoft(ibsrq);
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  // The ring cannot grow under the senders that have it mapped.
  if ((mask & IBV_SRQ_MAX_WR) && attr->max_wr > srq->max_wr) return EINVAL;
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > srq->max_wr) return EINVAL;
    srq->ring.header()->srq_limit.store(attr->srq_limit, std::memory_order_release);
  }
  return 0;
}

int ibv_query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr) {
  SoftSrq* srq = ToSoft(ibsrq);
  attr->max_wr = srq->max_wr;
  attr->max_sge = srq->max_sge;
  attr->srq_limit = srq->ring.header()->srq_limit.load(std::memory_order_relaxed);
  return 0;
}

int ibv_destroy_srq(ibv_srq* ibsrq) {
  SoftSrq* srq = ToSoft(ibsrq);
  if (srq->entry != nullptr) ForgetXrcSrq(srq);
  {
    std::lock_guard<std::mutex> lock(srq->context->objects_mutex);
    std::erase(srq->context->srqs, srq);
  }
  RemoveObject(Runtime::Get()->directory(), srq->object.id);
  delete srq;
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  const FabricHeader& fabric = *Runtime::Get()->fabric();
  if ((attr->port_num != 0 && attr->port_num != kPortNumber) ||
      (fabric.link_layer == LinkLayer::kEthernet && !attr->is_global)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* ah = new SoftAh{};
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  ah->attr = *attr;
  ah->multicast = IsMulticastAddress(*attr);
  ah->device = ah->multicast ? -1 : FindDeviceByAddress(fabric, *attr);
  return &ah->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  delete ToSoft(ah);
  return 0;
}

int ibv_init_ah_from_wc(ibv_context*, uint8_t port_num, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (wc->wc_flags & IBV_WC_GRH) {
    if (grh == nullptr) return EINVAL;
    ah_attr->is_global = 1;
    ah_attr->grh.dgid = grh->sgid;
    ah_attr->grh.sgid_index = 0;
    ah_attr->grh.hop_limit = 0xff;
    uint32_t flow = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = flow & 0xfffff;
    ah_attr->grh.traffic_class = uint8_t((flow >> 20) & 0xff);
  }
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  return ibv_create_ah(pd, &attr);
}

}  // extern "C"
