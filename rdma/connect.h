// Connecting QPs: what a peer needs to reach one of our QPs (an Endpoint, exchanged as
// JSON through the rendezvous), and the INIT -> RTR -> RTS transitions for RC, UC and UD
// on IB (LID routing) and RoCE (GID routing, index chosen by -x) link layers.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>

#include "rdma/verbs.h"

namespace rdmalab {

// Where our port is on the fabric: LID for IB, GID (at gid_index) for RoCE.
struct PortAddress {
  std::uint16_t lid = 0;
  std::array<std::uint8_t, 16> gid{};
  int gid_index = -1;  // -1: route by LID (IB without GRH)
  ibv_mtu mtu = IBV_MTU_1024;
};

// gid_index -1 picks: none on IB, index 0 on Ethernet (RoCE needs a GID).
PortAddress LocalAddress(const Device& device, int gid_index);

struct Endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  PortAddress address;
};

nlohmann::json ToJson(const Endpoint& endpoint);
Endpoint EndpointFromJson(const nlohmann::json& json);

constexpr std::uint32_t kUdQkey = 0x11111111;

// Moves an RC or UC QP to RTS connected to `remote`.
void ConnectQp(ibv_qp* qp, const Device& device, const PortAddress& local, const Endpoint& remote,
               std::uint32_t local_psn, std::uint8_t max_rd_atomic);
// Moves a UD QP to RTS.
void ActivateUdQp(ibv_qp* qp, const Device& device, std::uint32_t local_psn);
// Address handle to reach `remote` from a UD QP.
AhPtr CreateAh(ibv_pd* pd, const Device& device, const PortAddress& local, const PortAddress& remote);

// IBV_MTU_256 (1) .. IBV_MTU_4096 (5) in bytes.
constexpr std::uint32_t MtuBytes(ibv_mtu mtu) { return 128u << mtu; }

// The smaller MTU of the two ends, in bytes.
std::uint32_t PathMtuBytes(const PortAddress& local, const PortAddress& remote);

}  // namespace rdmalab
