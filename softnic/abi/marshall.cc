// Conversions between the kernel's uverbs/SA structs (<rdma/ib_user_*.h>) and the
// libibverbs ones. softnic itself never talks to the kernel, but librdmacm calls these
// on replies of the kernel's rdma_cm, and it links against whichever libibverbs.so.1
// is loaded, so they must convert for real here too.
#include <cstring>

#include "softnic/abi/private_api.h"

namespace {

constexpr size_t kGidBytes = sizeof(ibv_gid::raw);
static_assert(sizeof ib_uverbs_global_route::dgid == kGidBytes);
static_assert(sizeof ib_user_path_rec::dgid == kGidBytes && sizeof ib_user_path_rec::sgid == kGidBytes);

// The two path-record layouts hold the same fields (both keep LIDs, P_Key and flow
// label in network order), so one template serves both directions.
template <typename Dst, typename Src>
void copy_path_rec_fields(Dst* dst, const Src* src) {
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
  dst->packet_life_time_selector = src->packet_life_time_selector;
}

}  // namespace

extern "C" void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, kGidBytes);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

extern "C" void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src) {
  dst->qp_state = static_cast<ibv_qp_state>(src->qp_state);
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;

  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;

  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

extern "C" void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, kGidBytes);
  std::memcpy(dst->sgid.raw, src->sgid, kGidBytes);
  copy_path_rec_fields(dst, src);
}

extern "C" void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, kGidBytes);
  std::memcpy(dst->sgid, src->sgid.raw, kGidBytes);
  copy_path_rec_fields(dst, src);
}
