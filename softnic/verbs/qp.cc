// Queue pairs: creation, the state machine of ibv_modify_qp, queries, destruction.
#include <cerrno>
#include <cstring>

#include "softnic/fabric/object.h"
#include "softnic/verbs/internal.h"
#include "softnic/verbs/multicast.h"

namespace softnic {
namespace {

constexpr uint32_t kMaxTimeoutExponent = 31;
constexpr uint32_t kMaxRetryCount = 7;
constexpr uint32_t kMaxRnrTimer = 31;
constexpr uint64_t kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

enum TypeIndex { kRc, kUc, kUd, kXrcSend, kXrcRecv, kTypeCount };

struct TransitionMasks {
  int required[kTypeCount];
  int optional[kTypeCount];
};

// The attribute masks of each legal transition (IB spec, "QP state transition" table; the
// kernel's for the XRC send and receive QPs). A mask bit outside required|optional, or a
// required bit missing, is EINVAL.
const TransitionMasks* Transition(ibv_qp_state from, ibv_qp_state to) {
  constexpr int kInitRequired = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  constexpr int kInitOptional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  constexpr int kRtrConnected = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  constexpr int kRtrResponder = kRtrConnected | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  constexpr int kRtrOptional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
  constexpr int kRtsRequester =
      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  constexpr int kRtsOptional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
  static const TransitionMasks reset_to_init = {
      {kInitRequired, kInitRequired, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, kInitRequired,
       kInitRequired},
      {0, 0, 0, 0, 0}};
  static const TransitionMasks init_to_init = {
      {IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE},
      {kInitOptional, kInitOptional, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, kInitOptional, kInitOptional}};
  static const TransitionMasks init_to_rtr = {
      {kRtrResponder, kRtrConnected, IBV_QP_STATE, kRtrConnected, kRtrResponder},
      {kRtrOptional, kRtrOptional, IBV_QP_PKEY_INDEX | IBV_QP_QKEY, kRtrOptional, kRtrOptional}};
  static const TransitionMasks rtr_to_rts = {
      {kRtsRequester, IBV_QP_STATE | IBV_QP_SQ_PSN, IBV_QP_STATE | IBV_QP_SQ_PSN, kRtsRequester,
       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT},
      {kRtsOptional | IBV_QP_MIN_RNR_TIMER, kRtsOptional, IBV_QP_CUR_STATE | IBV_QP_QKEY, kRtsOptional,
       kRtsOptional | IBV_QP_MIN_RNR_TIMER}};
  static const TransitionMasks rts_to_rts = {
      {IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE},
      {kRtsOptional | IBV_QP_MIN_RNR_TIMER, kRtsOptional, IBV_QP_CUR_STATE | IBV_QP_QKEY, kRtsOptional,
       kRtsOptional | IBV_QP_MIN_RNR_TIMER}};
  static const TransitionMasks to_reset_or_error = {
      {IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE}, {0, 0, 0, 0, 0}};
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return &to_reset_or_error;
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) return &reset_to_init;
  if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) return &init_to_init;
  if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) return &init_to_rtr;
  if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) return &rtr_to_rts;
  if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) return &rts_to_rts;
  return nullptr;
}

// The attributes the kernel drops from an XRC QP's mask before checking it (uverbs'
// modify_qp_mask): a send QP answers no READ and sends no RNR NAK, a receive QP sends
// nothing to retry. perftest passes them for both.
int WithoutIgnoredAttributes(ibv_qp_type type, int mask) {
  if (type == IBV_QPT_XRC_SEND) return mask & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (type == IBV_QPT_XRC_RECV) return mask & ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
  return mask;
}

TypeIndex IndexOf(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return kRc;
    case IBV_QPT_UC: return kUc;
    case IBV_QPT_XRC_SEND: return kXrcSend;
    case IBV_QPT_XRC_RECV: return kXrcRecv;
    default: return kUd;
  }
}

// A QP's own receive ring for at least max_wr WQEs of max_sge SGEs; *max_wr becomes what it
// holds (the ring is a power of two, and reported as such, as mlx5 and rxe report theirs).
// A QP created without receive WRs keeps 0, and its post_recv fails. False with errno.
bool CreateRecvRing(Runtime* runtime, uint32_t* max_wr, uint32_t max_sge, ObjectRef* object, Ring* ring) {
  uint32_t capacity = RoundUpPowerOfTwo(std::max<uint32_t>(*max_wr, 1));
  if (!runtime->CreateRing(capacity, RecvWqeBytes(std::max<uint32_t>(max_sge, 1)), object, ring)) return false;
  if (*max_wr != 0) *max_wr = capacity;
  return true;
}

bool ValidCaps(const FabricHeader& fabric, const ibv_qp_init_attr_ex& attr) {
  const DeviceAttributes& limits = fabric.attributes;
  const ibv_qp_cap& cap = attr.cap;
  bool recv_ok = attr.srq != nullptr || attr.qp_type == IBV_QPT_XRC_SEND ||
                 (cap.max_recv_wr <= limits.max_qp_wr && cap.max_recv_sge <= limits.max_sge);
  return recv_ok && cap.max_send_wr <= limits.max_qp_wr && cap.max_send_sge <= limits.max_sge &&
         cap.max_inline_data <= limits.max_inline_bytes;
}

// What each type must name: an XRC receive QP its domain only (it has no PD, CQ or queue
// of its own: its messages complete in the CQs of the SRQs they name); an XRC send QP a PD
// and a send CQ (no receive side); the others a PD and both CQs.
bool NamesWhatItNeeds(const ibv_qp_init_attr_ex& attr) {
  if (attr.qp_type == IBV_QPT_XRC_RECV) return (attr.comp_mask & IBV_QP_INIT_ATTR_XRCD) && attr.xrcd != nullptr;
  if (!(attr.comp_mask & IBV_QP_INIT_ATTR_PD) || attr.pd == nullptr || attr.send_cq == nullptr) return false;
  return attr.qp_type == IBV_QPT_XRC_SEND || attr.recv_cq != nullptr;
}

// The receive side of a new QP: its SRQ's ring, a ring of its own, or none (XRC). False with errno.
bool SetUpReceiveSide(Runtime* runtime, SoftQp* qp, ibv_qp_type type, QpEntry& entry) {
  entry.xrcd_id = 0;
  entry.recv_queue = ObjectRef{};
  entry.recv_cq = ObjectRef{};
  entry.recv_sge_capacity = 0;
  entry.uses_srq = 0;
  if (IsXrc(type)) {
    qp->cap.max_recv_wr = 0;
    qp->cap.max_recv_sge = 0;
    if (type == IBV_QPT_XRC_RECV) entry.xrcd_id = qp->xrcd->id;
    return true;
  }
  entry.recv_cq = qp->recv_cq->object;
  if (qp->srq) {
    qp->cap.max_recv_wr = 0;
    qp->cap.max_recv_sge = 0;
    entry.recv_queue = qp->srq->object;
    entry.recv_sge_capacity = qp->srq->max_sge;
    entry.uses_srq = 1;
    return true;
  }
  if (!CreateRecvRing(runtime, &qp->cap.max_recv_wr, qp->cap.max_recv_sge, &qp->recv_object, &qp->recv_ring)) {
    return false;
  }
  entry.recv_queue = qp->recv_object;
  entry.recv_sge_capacity = std::max<uint32_t>(qp->cap.max_recv_sge, 1);
  return true;
}

ibv_qp* CreateQpExOp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  Runtime* runtime = Runtime::Get();
  const uint32_t known_mask =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  ibv_qp_type type = attr->qp_type;
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && !IsXrc(type)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags != 0) {
    Warn("ibv_create_qp_ex: create_flags %#x: softnic implements none of enum ibv_qp_create_flags (0 is valid)",
         attr->create_flags);
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & ~known_mask) != 0 ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
       (attr->send_ops_flags & ~kSupportedSendOps) != 0)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  bool xrc_recv = type == IBV_QPT_XRC_RECV;
  if (!NamesWhatItNeeds(*attr) || (!xrc_recv && !ValidCaps(*runtime->fabric(), *attr))) {
    errno = EINVAL;
    return nullptr;
  }
  SoftContext* soft_context = ToSoft(context);
  DeviceEntry* device = soft_context->device;
  int32_t index = ClaimQpIndex(device);
  if (index < 0) {
    errno = ENOMEM;
    return nullptr;
  }
  QpEntry& entry = device->qps[index];
  auto* qp = new SoftQp{};
  qp->context = soft_context;
  qp->device_index = soft_context->device_index;
  qp->entry = &entry;
  qp->index = uint32_t(index);
  // An XRC receive QP has no send queue and no CQ; no XRC QP has a receive queue or an SRQ.
  qp->send_cq = xrc_recv ? nullptr : ToSoft(attr->send_cq);
  qp->recv_cq = IsXrc(type) ? nullptr : ToSoft(attr->recv_cq);
  qp->srq = attr->srq && !IsXrc(type) ? ToSoft(attr->srq) : nullptr;
  qp->xrcd = xrc_recv ? ToSoft(attr->xrcd) : nullptr;
  qp->cap = xrc_recv ? ibv_qp_cap{} : attr->cap;
  qp->signal_all = attr->sq_sig_all != 0;
  // Threads may race to post on this QP unless the process said they never do: until a route
  // is filled, an unlocked reader could see one half-written.
  for (WriteRoute& route : qp->write_routes) route.needs_lock = !runtime->single_threaded();
  qp->dest_device = -1;
  if (!SetUpReceiveSide(runtime, qp, type, entry)) {
    int err = errno;
    entry.qpn.store(0, std::memory_order_release);
    delete qp;
    errno = err;
    return nullptr;
  }
  entry.type = type;
  entry.owner_slot = runtime->self().slot;
  entry.owner_incarnation = runtime->self().incarnation;
  entry.pd_id = xrc_recv ? 0 : ToSoft(attr->pd)->pd_id;
  entry.qp_access_flags.store(0, std::memory_order_relaxed);
  entry.qkey.store(0, std::memory_order_relaxed);
  entry.min_rnr_timer.store(0, std::memory_order_relaxed);
  entry.state.store(IBV_QPS_RESET, std::memory_order_relaxed);
  uint32_t qpn = NewQpNumber(runtime, uint32_t(index));
  entry.qpn.store(qpn, std::memory_order_release);

  ibv_qp& base = qp->ex.qp_base;
  base.context = context;
  base.qp_context = attr->qp_context;
  base.pd = xrc_recv ? nullptr : attr->pd;
  base.send_cq = qp->send_cq != nullptr ? attr->send_cq : nullptr;
  base.recv_cq = qp->recv_cq != nullptr ? attr->recv_cq : nullptr;
  base.srq = qp->srq != nullptr ? attr->srq : nullptr;
  base.handle = uint32_t(index);
  base.qp_num = qpn;
  base.state = IBV_QPS_RESET;
  base.qp_type = attr->qp_type;
  pthread_mutex_init(&base.mutex, nullptr);
  pthread_cond_init(&base.cond, nullptr);
  qp->attr.qp_state = IBV_QPS_RESET;
  qp->attr.path_mtu = IBV_MTU_4096;
  SetPathMtu(qp, runtime->fabric()->attributes.active_mtu_bytes);
  qp->attr.port_num = kPortNumber;
  InstallQpExOps(qp);
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) qp->ex.comp_mask = 0;
  if (qp->xrcd != nullptr) UseXrcd(qp->xrcd);
  for (SoftCq* cq : {qp->send_cq, qp->recv_cq}) {
    if (cq != nullptr) cq->users.fetch_add(1, std::memory_order_relaxed);
  }
  runtime->LocalQp(qp->device_index, index) = qp;
  attr->cap = qp->cap;  // what the QP holds, as providers report it
  return &base;
}

}  // namespace

int32_t ClaimQpIndex(DeviceEntry* device) {
  for (uint32_t i = 0; i < kMaxQpsPerDevice; ++i) {
    uint32_t expected = 0;
    if (device->qps[i].qpn.compare_exchange_strong(expected, kEntryReserved)) return int32_t(i);
  }
  return -1;
}

uint32_t NewQpNumber(Runtime* runtime, uint32_t index) {
  uint32_t qpn;
  do {
    qpn = ((runtime->RandomBits() << kQpIndexBits) | index) & kQpnMask;
  } while (qpn <= 1);  // QP0 and QP1 are the management QPs on a real port
  return qpn;
}

void SetPathMtu(SoftQp* qp, uint32_t path_mtu_bytes) {
  qp->path_mtu_bytes = path_mtu_bytes;
  LinkLayer link_layer = Runtime::Get()->fabric()->link_layer;
  model::Transport transport = ModeledTransport(qp->ex.qp_base.qp_type);
  qp->write_key_base = MessageKeyBase(model::Opcode::kWrite, transport, 1, path_mtu_bytes, link_layer);
  qp->send_key_base = MessageKeyBase(model::Opcode::kSend, transport, 1, path_mtu_bytes, link_layer);
}

namespace {

bool ValidateValues(SoftQp* qp, const ibv_qp_attr& attr, int mask) {
  if ((mask & IBV_QP_CUR_STATE) && attr.cur_qp_state != qp->attr.qp_state) return false;
  if ((mask & IBV_QP_PKEY_INDEX) && attr.pkey_index != 0) return false;
  if ((mask & IBV_QP_PORT) && attr.port_num != kPortNumber) return false;
  if ((mask & IBV_QP_PATH_MTU) && MtuBytes(attr.path_mtu) == 0) return false;
  if ((mask & IBV_QP_TIMEOUT) && attr.timeout > kMaxTimeoutExponent) return false;
  if ((mask & IBV_QP_RETRY_CNT) && attr.retry_cnt > kMaxRetryCount) return false;
  if ((mask & IBV_QP_RNR_RETRY) && attr.rnr_retry > kMaxRetryCount) return false;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > kMaxRnrTimer) return false;
  uint32_t max_rd_atom = Runtime::Get()->fabric()->attributes.max_qp_rd_atom;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > max_rd_atom) return false;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > max_rd_atom) return false;
  if ((mask & IBV_QP_DEST_QPN) && attr.dest_qp_num > kQpnMask) return false;
  if ((mask & IBV_QP_AV) && attr.ah_attr.port_num != 0 && attr.ah_attr.port_num != kPortNumber) {
    return false;
  }
  if ((mask & IBV_QP_AV) && Runtime::Get()->fabric()->link_layer == LinkLayer::kEthernet &&
      !attr.ah_attr.is_global) {
    return false;  // RoCE addresses are GIDs
  }
  return true;
}

void ForgetPeer(SoftQp* qp) {
  qp->connected = Destination{};
  qp->xrc_target = Destination{};
  qp->xrc_srq = Destination{};
}

// Both bracket their change with AdvanceControlEpoch: cached checks (SoftQp::write_routes)
// read the entry's state and flags, and this QP's own destination.
void ApplyAttributes(SoftQp* qp, const ibv_qp_attr& attr, int mask) {
  FabricHeader& fabric = *Runtime::Get()->fabric();
  AdvanceControlEpoch(fabric);
  ibv_qp_attr& mine = qp->attr;
  if (mask & IBV_QP_PKEY_INDEX) mine.pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) mine.port_num = attr.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) {
    mine.qp_access_flags = attr.qp_access_flags;
    qp->entry->qp_access_flags.store(attr.qp_access_flags, std::memory_order_release);
  }
  if (mask & IBV_QP_QKEY) {
    mine.qkey = attr.qkey;
    qp->entry->qkey.store(attr.qkey, std::memory_order_relaxed);
  }
  if (mask & IBV_QP_PATH_MTU) {
    mine.path_mtu = attr.path_mtu;
    SetPathMtu(qp, MtuBytes(attr.path_mtu));
  }
  if (mask & IBV_QP_AV) {
    mine.ah_attr = attr.ah_attr;
    qp->dest_device = FindDeviceByAddress(*Runtime::Get()->fabric(), attr.ah_attr);
    ForgetPeer(qp);
  }
  if (mask & IBV_QP_DEST_QPN) {
    mine.dest_qp_num = attr.dest_qp_num;
    ForgetPeer(qp);
  }
  if (mask & IBV_QP_RQ_PSN) mine.rq_psn = attr.rq_psn;
  if (mask & IBV_QP_SQ_PSN) mine.sq_psn = attr.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) mine.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) mine.max_rd_atomic = attr.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) {
    mine.min_rnr_timer = attr.min_rnr_timer;
    qp->entry->min_rnr_timer.store(attr.min_rnr_timer, std::memory_order_relaxed);
  }
  if (mask & IBV_QP_TIMEOUT) mine.timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) mine.retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) mine.rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_ALT_PATH) mine.alt_ah_attr = attr.alt_ah_attr;
  if (mask & IBV_QP_PATH_MIG_STATE) mine.path_mig_state = attr.path_mig_state;
  AdvanceControlEpoch(fabric);
}

void SetState(SoftQp* qp, ibv_qp_state state) {
  qp->attr.qp_state = state;
  qp->attr.cur_qp_state = state;
  qp->ex.qp_base.state = state;
  ChangeBetweenControlEpochs(*Runtime::Get()->fabric(),
                             [&] { qp->entry->state.store(state, std::memory_order_release); });
}

void ResetQueues(SoftQp* qp) {
  PurgeCompletions(qp);
  if (qp->recv_object.id != 0) {
    uint64_t discarded_wr_id;
    while (qp->recv_ring.TryPop(&discarded_wr_id, sizeof(discarded_wr_id))) {
    }
  }
  qp->pending.clear();
  Runtime::Get()->RemoveStalled(qp);
  qp->stall = StallReason::kNone;
  qp->sq_posted = 0;
  qp->sq_retired.store(0, std::memory_order_relaxed);
}

}  // namespace

void SetQpStateError(SoftQp* qp) { SetState(qp, IBV_QPS_ERR); }

void InstallQpOps(ibv_context_ops*, verbs_context* vctx) { vctx->create_qp_ex = CreateQpExOp; }

}  // namespace softnic

using namespace softnic;

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof(*attr));
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_qp* qp = CreateQpExOp(pd->context, &ex);
  if (qp != nullptr) attr->cap = ex.cap;
  return qp;
}

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  SoftQp* qp = ToSoft(ibqp);
  mask = WithoutIgnoredAttributes(ibqp->qp_type, mask);
  // Serialize with post_send and the progress thread, which read what this changes.
  LockQp(qp);
  ibv_qp_state from = qp->attr.qp_state;
  ibv_qp_state to = (mask & IBV_QP_STATE) ? attr->qp_state : from;
  const TransitionMasks* transition = Transition(from, to);
  int rc = 0;
  if (transition == nullptr) {
    rc = EINVAL;
  } else {
    TypeIndex type = IndexOf(ibqp->qp_type);
    int effective = mask | IBV_QP_STATE;
    int allowed = transition->required[type] | transition->optional[type];
    if ((effective & transition->required[type]) != transition->required[type] ||
        (effective & ~allowed) != 0 || !ValidateValues(qp, *attr, mask)) {
      rc = EINVAL;
    }
  }
  if (rc == 0) {
    ApplyAttributes(qp, *attr, mask);
    if (to == IBV_QPS_RESET) ResetQueues(qp);
    if (to == IBV_QPS_ERR && from != IBV_QPS_ERR) {
      SetQpErrorLocked(qp);
    } else {
      SetState(qp, to);
    }
  }
  UnlockQp(qp);
  return rc;
}

int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  SoftQp* qp = ToSoft(ibqp);
  *attr = qp->attr;
  attr->qp_state = static_cast<ibv_qp_state>(qp->entry->state.load(std::memory_order_acquire));
  attr->cur_qp_state = attr->qp_state;
  attr->cap = qp->cap;
  std::memset(init_attr, 0, sizeof(*init_attr));
  init_attr->qp_context = ibqp->qp_context;
  init_attr->send_cq = ibqp->send_cq;
  init_attr->recv_cq = ibqp->recv_cq;
  init_attr->srq = ibqp->srq;
  init_attr->cap = qp->cap;
  init_attr->qp_type = ibqp->qp_type;
  init_attr->sq_sig_all = qp->signal_all;
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t flags) {
  // The requester places a message front to back, its last 8 bytes last (send.cc).
  return flags == 0 ? 1 : 0;
}

int ibv_destroy_qp(ibv_qp* ibqp) {
  SoftQp* qp = ToSoft(ibqp);
  Runtime* runtime = Runtime::Get();
  LockQp(qp);
  runtime->RemoveStalled(qp);
  if (ibqp->qp_type == IBV_QPT_UD) DetachAllOf(runtime->fabric(), qp->device_index, ibqp->qp_num);
  ChangeBetweenControlEpochs(*runtime->fabric(), [&] { qp->entry->qpn.store(0, std::memory_order_release); });
  // As mlx5 cleans a destroyed QP's entries out of its CQs: a consumer that polls on after
  // destroying a QP must not meet completions whose wr_id names what it freed with the QP
  // (libfabric's rxm closes a connection's endpoint, then drains the shared CQ and reposted
  // a receive through the freed endpoint).
  PurgeCompletions(qp);
  for (SoftCq* cq : {qp->send_cq, qp->recv_cq}) {
    if (cq != nullptr) cq->users.fetch_sub(1, std::memory_order_relaxed);
  }
  runtime->LocalQp(qp->device_index, qp->index) = nullptr;
  if (qp->recv_object.id != 0) RemoveObject(runtime->directory(), qp->recv_object.id);
  if (qp->xrcd != nullptr) ReleaseXrcd(qp->xrcd);
  delete qp;
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return &ToSoft(qp)->ex; }

}  // extern "C"
