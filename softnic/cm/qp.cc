// QPs on rdma_cm ids (created in INIT, moved to RTS by the exchange, to ERR on
// disconnect), endpoints (rdma_create_ep) and rdma_getaddrinfo.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "softnic/cm/internal.h"

namespace softnic::cm {
namespace {

constexpr uint8_t kRnrTimer = 12;      // 0.64 ms, rdma_cm's default min_rnr_timer
constexpr uint8_t kMaxRdAtomic = 16;
constexpr uint8_t kUdHopLimit = 64;

int Fail(int error_number) {
  errno = error_number;
  return -1;
}

ibv_ah_attr PeerAh(const Message& remote) {
  ibv_ah_attr ah{};
  ah.dlid = remote.lid;
  ah.port_num = 1;
  if (GetDevices()->ethernet) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    ah.grh.hop_limit = kUdHopLimit;
  }
  return ah;
}

void CopyAddressIfMissing(const sockaddr* from, sockaddr** to, socklen_t* length) {
  if (*to != nullptr || from == nullptr || from->sa_family != AF_INET) return;
  auto* copy = static_cast<sockaddr_in*>(std::calloc(1, sizeof(sockaddr_in)));
  std::memcpy(copy, from, sizeof(sockaddr_in));
  *to = reinterpret_cast<sockaddr*>(copy);
  *length = sizeof(sockaddr_in);
}

int ModifyToInit(ibv_qp* qp, ibv_qp_type type) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.pkey_index = 0;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (type == IBV_QPT_UD) {
    attr.qkey = kDefaultUdQkey;
    mask |= IBV_QP_QKEY;
  } else {
    attr.qp_access_flags = 0;  // set at RTR from the negotiated resources, as the kernel's CM does
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  return ibv_modify_qp(qp, &attr, mask);
}

// A UD QP needs no peer: rdma_create_qp takes it to RTS at once, as librdmacm does.
int ModifyUdToRts(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE); rc != 0) return rc;
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

}  // namespace

// As IB CM: the REQ's retry count serves both sides, each side's RNR retry count is the
// one its peer sent (a REQ's for the passive side, a REP's for the active one).
int MoveQpToRts(Id* id, const Message& remote, bool active) {
  ibv_qp* qp = id->id.qp;
  const Message& mine = id->local;
  ibv_port_attr port{};
  ibv_query_port(id->id.verbs, 1, &port);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = port.active_mtu;
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = std::min(mine.responder_resources, kMaxRdAtomic);
  attr.min_rnr_timer = kRnrTimer;
  attr.ah_attr = PeerAh(remote);
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (attr.max_dest_rd_atomic > 0) attr.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  int rc = ibv_modify_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return Fail(rc);
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = id->ack_timeout;
  attr.retry_cnt = active ? mine.retry_count : remote.retry_count;
  attr.rnr_retry = remote.rnr_retry_count;
  attr.sq_psn = 0;
  attr.max_rd_atomic = std::min(mine.initiator_depth, kMaxRdAtomic);
  rc = ibv_modify_qp(qp, &attr,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  return rc == 0 ? 0 : Fail(rc);
}

void MoveQpToError(Id* id) {
  if (id->id.qp == nullptr) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->id.qp, &attr, IBV_QP_STATE);
}

}  // namespace softnic::cm

using namespace softnic::cm;

extern "C" {

int rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (cm_id == nullptr || qp_init_attr == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  if (cm_id->verbs == nullptr) return Fail(EINVAL);  // not bound to a device yet
  if (pd == nullptr) pd = cm_id->pd != nullptr ? cm_id->pd : GetDevices()->pds[static_cast<size_t>(id->device)];
  if (pd->context != cm_id->verbs) return Fail(EINVAL);
  ibv_qp_init_attr attr = *qp_init_attr;
  attr.qp_type = cm_id->qp_type;
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr) {
    // As librdmacm: CQs with a completion channel each, for rdma_get_send_comp/recv_comp.
    cm_id->recv_cq_channel = ibv_create_comp_channel(cm_id->verbs);
    cm_id->send_cq_channel = ibv_create_comp_channel(cm_id->verbs);
    cm_id->recv_cq = ibv_create_cq(cm_id->verbs, std::max<int>(1, attr.cap.max_recv_wr), cm_id,
                                   cm_id->recv_cq_channel, 0);
    cm_id->send_cq = ibv_create_cq(cm_id->verbs, std::max<int>(1, attr.cap.max_send_wr), cm_id,
                                   cm_id->send_cq_channel, 0);
    if (cm_id->recv_cq == nullptr || cm_id->send_cq == nullptr) {
      const int saved = errno;
      if (cm_id->recv_cq) ibv_destroy_cq(cm_id->recv_cq);
      if (cm_id->send_cq) ibv_destroy_cq(cm_id->send_cq);
      if (cm_id->recv_cq_channel) ibv_destroy_comp_channel(cm_id->recv_cq_channel);
      if (cm_id->send_cq_channel) ibv_destroy_comp_channel(cm_id->send_cq_channel);
      cm_id->recv_cq = cm_id->send_cq = nullptr;
      cm_id->recv_cq_channel = cm_id->send_cq_channel = nullptr;
      return Fail(saved);
    }
    attr.send_cq = cm_id->send_cq;
    attr.recv_cq = cm_id->recv_cq;
    id->own_cqs = true;
  }
  if (attr.srq == nullptr) attr.srq = cm_id->srq;
  ibv_qp* qp = ibv_create_qp(pd, &attr);
  if (qp == nullptr) return -1;
  int rc = ModifyToInit(qp, attr.qp_type);
  if (rc == 0 && attr.qp_type == IBV_QPT_UD) rc = ModifyUdToRts(qp);
  if (rc != 0) {
    ibv_destroy_qp(qp);
    return Fail(rc);
  }
  qp_init_attr->cap = attr.cap;
  cm_id->qp = qp;
  cm_id->pd = pd;
  return 0;
}

int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  if ((attr->comp_mask & ~uint32_t{IBV_QP_INIT_ATTR_PD}) != 0) return Fail(EOPNOTSUPP);
  ibv_qp_init_attr plain{};
  plain.qp_context = attr->qp_context;
  plain.send_cq = attr->send_cq;
  plain.recv_cq = attr->recv_cq;
  plain.srq = attr->srq;
  plain.cap = attr->cap;
  plain.qp_type = attr->qp_type;
  plain.sq_sig_all = attr->sq_sig_all;
  const int rc = rdma_create_qp(cm_id, (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr, &plain);
  attr->cap = plain.cap;
  return rc;
}

void rdma_destroy_qp(rdma_cm_id* cm_id) {
  Id* id = ToId(cm_id);
  if (cm_id->qp != nullptr) ibv_destroy_qp(cm_id->qp);
  cm_id->qp = nullptr;
  if (!id->own_cqs) return;
  ibv_destroy_cq(cm_id->send_cq);
  ibv_destroy_cq(cm_id->recv_cq);
  ibv_destroy_comp_channel(cm_id->send_cq_channel);
  ibv_destroy_comp_channel(cm_id->recv_cq_channel);
  cm_id->send_cq = cm_id->recv_cq = nullptr;
  cm_id->send_cq_channel = cm_id->recv_cq_channel = nullptr;
  id->own_cqs = false;
}

int rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (cm_id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  ibv_port_attr port{};
  ibv_query_port(cm_id->verbs, 1, &port);
  switch (qp_attr->qp_state) {
    case IBV_QPS_INIT:
      qp_attr->port_num = 1;
      qp_attr->pkey_index = 0;
      *qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (cm_id->qp_type == IBV_QPT_UD) {
        qp_attr->qkey = kDefaultUdQkey;
        *qp_attr_mask |= IBV_QP_QKEY;
      } else {
        qp_attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                   IBV_ACCESS_REMOTE_ATOMIC;
        *qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      qp_attr->path_mtu = port.active_mtu;
      qp_attr->dest_qp_num = id->peer.qp_num;
      qp_attr->rq_psn = 0;
      qp_attr->max_dest_rd_atomic = kMaxRdAtomic;
      qp_attr->min_rnr_timer = kRnrTimer;
      qp_attr->ah_attr = PeerAh(id->peer);
      *qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      qp_attr->timeout = id->ack_timeout;
      qp_attr->retry_cnt = 7;
      qp_attr->rnr_retry = 7;
      qp_attr->sq_psn = 0;
      qp_attr->max_rd_atomic = kMaxRdAtomic;
      *qp_attr_mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return Fail(EINVAL);
  }
}

int rdma_create_srq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (cm_id == nullptr || attr == nullptr || cm_id->verbs == nullptr) return Fail(EINVAL);
  if (pd == nullptr) pd = GetDevices()->pds[static_cast<size_t>(ToId(cm_id)->device)];
  cm_id->srq = ibv_create_srq(pd, attr);
  return cm_id->srq == nullptr ? -1 : 0;
}

int rdma_create_srq_ex(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  if ((attr->comp_mask & ~uint32_t{IBV_SRQ_INIT_ATTR_PD}) != 0) return Fail(EOPNOTSUPP);
  ibv_srq_init_attr plain{};
  plain.srq_context = attr->srq_context;
  plain.attr = attr->attr;
  return rdma_create_srq(cm_id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : nullptr, &plain);
}

void rdma_destroy_srq(rdma_cm_id* cm_id) {
  if (cm_id->srq != nullptr) ibv_destroy_srq(cm_id->srq);
  cm_id->srq = nullptr;
}

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  // Neither node nor service: the hints' addresses alone, as librdmacm answers them
  // (rdma-core's tests name a multicast group so; libfabric's verbs provider its peers).
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr)) return Fail(EINVAL);
  const bool passive = hints != nullptr && (hints->ai_flags & RAI_PASSIVE);
  sockaddr_in* address = nullptr;
  if (node != nullptr || service != nullptr) {
    addrinfo want{};
    want.ai_family = AF_INET;
    want.ai_socktype = SOCK_STREAM;
    want.ai_flags = (passive ? AI_PASSIVE : 0) | ((hints && (hints->ai_flags & RAI_NUMERICHOST)) ? AI_NUMERICHOST : 0);
    addrinfo* found = nullptr;
    if (getaddrinfo(node, service, &want, &found) != 0 || found == nullptr) return Fail(EADDRNOTAVAIL);
    address = static_cast<sockaddr_in*>(std::calloc(1, sizeof(sockaddr_in)));
    std::memcpy(address, found->ai_addr, sizeof(sockaddr_in));
    freeaddrinfo(found);
  }
  auto* rai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  rai->ai_flags = hints != nullptr ? hints->ai_flags : 0;
  rai->ai_family = AF_INET;
  rai->ai_port_space = hints != nullptr && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  rai->ai_qp_type = hints != nullptr && hints->ai_qp_type ? hints->ai_qp_type
                    : rai->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  if (address != nullptr) {
    (passive ? rai->ai_src_addr : rai->ai_dst_addr) = reinterpret_cast<sockaddr*>(address);
    (passive ? rai->ai_src_len : rai->ai_dst_len) = sizeof(sockaddr_in);
  }
  if (hints != nullptr) {  // what node and service did not give, the hints' addresses do
    CopyAddressIfMissing(hints->ai_src_addr, &rai->ai_src_addr, &rai->ai_src_len);
    CopyAddressIfMissing(hints->ai_dst_addr, &rai->ai_dst_addr, &rai->ai_dst_len);
  }
  *res = rai;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || res == nullptr) return Fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0) return -1;
  auto fail = [&] {
    const int saved = errno;
    rdma_destroy_id(cm_id);
    return Fail(saved);
  };
  if (res->ai_flags & RAI_PASSIVE) {
    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return fail();
    if (qp_init_attr != nullptr) ToId(cm_id)->ep_qp_init = new ibv_qp_init_attr(*qp_init_attr);
    if (pd != nullptr) cm_id->pd = pd;
    *id = cm_id;
    return 0;
  }
  if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return fail();
  if (rdma_resolve_route(cm_id, 2000) != 0) return fail();
  if (qp_init_attr != nullptr && rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return fail();
  *id = cm_id;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (id->qp != nullptr) rdma_destroy_qp(id);
  if (id->srq != nullptr) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

}  // extern "C"
