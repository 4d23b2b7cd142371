#include "rdma/connect.h"

#include <algorithm>
#include <cstring>

#include "rdma/error.h"

namespace rdmalab {
namespace {

constexpr std::uint8_t kRcTimeoutExponent = 14;  // 4.096 us * 2^14 = 67 ms per try
constexpr std::uint8_t kRetryCount = 7;
constexpr std::uint8_t kRnrRetryInfinite = 7;
constexpr std::uint8_t kMinRnrTimer = 12;  // 0.64 ms
constexpr std::uint8_t kHopLimit = 64;

void Modify(ibv_qp* qp, ibv_qp_attr& attr, int mask, const char* state) {
  const int error_number = ibv_modify_qp(qp, &attr, mask);
  if (error_number != 0) {
    Fail("ibv_modify_qp(QP ", qp->qp_num, " ", TransportName(qp->qp_type), " -> ", state,
         "): ", std::strerror(error_number));
  }
}

ibv_ah_attr AddressVector(const Device& device, const PortAddress& local, const PortAddress& remote) {
  ibv_ah_attr ah{};
  ah.port_num = device.port();
  ah.dlid = remote.lid;
  if (device.ethernet() || local.gid_index >= 0) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    ah.grh.sgid_index = static_cast<std::uint8_t>(std::max(local.gid_index, 0));
    ah.grh.hop_limit = kHopLimit;
  }
  return ah;
}

void ToInit(ibv_qp* qp, const Device& device) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device.port();
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (qp->qp_type == IBV_QPT_UD) {
    attr.qkey = kUdQkey;
    mask |= IBV_QP_QKEY;
  } else {
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (qp->qp_type == IBV_QPT_RC) attr.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  Modify(qp, attr, mask, "INIT");
}

}  // namespace

PortAddress LocalAddress(const Device& device, int gid_index) {
  PortAddress address;
  address.lid = device.port_attr().lid;
  address.mtu = device.port_attr().active_mtu;
  if (gid_index < 0 && device.ethernet()) gid_index = 0;
  if (gid_index >= 0) {
    if (gid_index >= device.port_attr().gid_tbl_len) {
      Fail("GID index ", gid_index, " is outside ", device.name(), " port ", int{device.port()},
           "'s table: valid 0..", device.port_attr().gid_tbl_len - 1);
    }
    ibv_gid gid{};
    if (ibv_query_gid(device.context(), device.port(), gid_index, &gid) != 0) {
      FailErrno("ibv_query_gid(index " + std::to_string(gid_index) + ")", errno);
    }
    std::memcpy(address.gid.data(), gid.raw, sizeof(gid.raw));
    address.gid_index = gid_index;
  }
  return address;
}

nlohmann::json ToJson(const Endpoint& endpoint) {
  return {{"qpn", endpoint.qpn},
          {"psn", endpoint.psn},
          {"lid", endpoint.address.lid},
          {"gid", endpoint.address.gid},
          {"gid_index", endpoint.address.gid_index},
          {"mtu", static_cast<int>(endpoint.address.mtu)}};
}

Endpoint EndpointFromJson(const nlohmann::json& json) {
  try {
    Endpoint endpoint;
    endpoint.qpn = json.at("qpn").get<std::uint32_t>();
    endpoint.psn = json.at("psn").get<std::uint32_t>();
    endpoint.address.lid = json.at("lid").get<std::uint16_t>();
    endpoint.address.gid = json.at("gid").get<std::array<std::uint8_t, 16>>();
    endpoint.address.gid_index = json.at("gid_index").get<int>();
    endpoint.address.mtu = static_cast<ibv_mtu>(json.at("mtu").get<int>());
    return endpoint;
  } catch (const nlohmann::json::exception& error) {
    Fail("malformed QP endpoint from peer (", error.what(), "): ", json.dump());
  }
}

std::uint32_t PathMtuBytes(const PortAddress& local, const PortAddress& remote) {
  return MtuBytes(std::min(local.mtu, remote.mtu));
}

void ConnectQp(ibv_qp* qp, const Device& device, const PortAddress& local, const Endpoint& remote,
               std::uint32_t local_psn, std::uint8_t max_rd_atomic) {
  ToInit(qp, device);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(local.mtu, remote.address.mtu);
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.ah_attr = AddressVector(device, local, remote.address);
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  const bool rc = qp->qp_type == IBV_QPT_RC;
  if (rc) {
    attr.max_dest_rd_atomic = max_rd_atomic;
    attr.min_rnr_timer = kMinRnrTimer;
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  Modify(qp, attr, mask, "RTR");
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc) {
    attr.timeout = kRcTimeoutExponent;
    attr.retry_cnt = kRetryCount;
    attr.rnr_retry = kRnrRetryInfinite;
    attr.max_rd_atomic = max_rd_atomic;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  Modify(qp, attr, mask, "RTS");
}

void ActivateUdQp(ibv_qp* qp, const Device& device, std::uint32_t local_psn) {
  ToInit(qp, device);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  Modify(qp, attr, IBV_QP_STATE, "RTR");
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn;
  Modify(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

AhPtr CreateAh(ibv_pd* pd, const Device& device, const PortAddress& local, const PortAddress& remote) {
  ibv_ah_attr attr = AddressVector(device, local, remote);
  AhPtr ah(ibv_create_ah(pd, &attr));
  if (!ah) FailErrno("ibv_create_ah(dlid " + std::to_string(remote.lid) + ")", errno);
  return ah;
}

}  // namespace rdmalab
