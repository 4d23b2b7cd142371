// rdma_join_multicast(_ex) and rdma_leave_multicast over softnic's verbs multicast. A join
// needs no subnet manager: the group's MGID and MLID follow from its IPv4 address the way
// the kernel's CM forms them (so every member computes the same), the id's QP is attached
// at once (as librdmacm attaches it on the join event), and MULTICAST_JOIN carries the
// address handle attributes, QPN 0xFFFFFF and QKEY a sender needs.
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "softnic/cm/internal.h"

namespace softnic::cm {
namespace {

constexpr uint16_t kFirstMulticastLid = 0xc000;
constexpr uint16_t kMulticastLidSpan = 0x3fff;  // 0xC000..0xFFFE: 0xFFFF is permissive
constexpr uint32_t kMulticastQpn = 0xffffff;

int Fail(int error_number) {
  errno = error_number;
  return -1;
}

bool IsMulticastIpv4(const sockaddr* addr) {
  return addr != nullptr && addr->sa_family == AF_INET &&
         IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr));
}

// IB: ff12:401b:ffff::<low 28 bits of the address> with rdma_cm's signature (ip_ib_mc_map
// and cma_set_mgid). RoCE: the IPv4-mapped address (cma_iboe_set_mgid).
ibv_gid GroupGid(in_addr_t address, bool ethernet) {
  ibv_gid gid{};
  const uint32_t host = ntohl(address);
  if (ethernet) {
    gid.raw[10] = gid.raw[11] = 0xff;
  } else {
    const uint8_t prefix[6] = {0xff, 0x12, 0x40, 0x01, 0xff, 0xff};
    std::memcpy(gid.raw, prefix, sizeof(prefix));
  }
  gid.raw[12] = static_cast<uint8_t>(ethernet ? host >> 24 : (host >> 24) & 0x0f);
  gid.raw[13] = static_cast<uint8_t>(host >> 16);
  gid.raw[14] = static_cast<uint8_t>(host >> 8);
  gid.raw[15] = static_cast<uint8_t>(host);
  return gid;
}

// What the SA would assign; on RoCE there are no LIDs.
uint16_t GroupLid(in_addr_t address, bool ethernet) {
  return ethernet ? 0 : static_cast<uint16_t>(kFirstMulticastLid + ntohl(address) % kMulticastLidSpan);
}

rdma_ud_param JoinParam(const Id* id, const Membership& group) {
  rdma_ud_param param{};
  param.private_data = group.context;  // librdmacm hands the join's context back here
  param.qp_num = kMulticastQpn;
  param.qkey = kDefaultUdQkey;
  ibv_ah_attr& ah = param.ah_attr;
  ah.dlid = group.mlid;
  ah.port_num = id->id.port_num;
  ah.is_global = 1;
  ah.grh.dgid = group.mgid;
  ah.grh.hop_limit = 1;
  return param;
}

}  // namespace

void LeaveAllMulticast(Id* id) {
  for (const Membership& group : id->groups) {
    if (group.attached && id->id.qp != nullptr) ibv_detach_mcast(id->id.qp, &group.mgid, group.mlid);
  }
  id->groups.clear();
}

}  // namespace softnic::cm

using namespace softnic::cm;

extern "C" {

int rdma_join_multicast_ex(rdma_cm_id* cm_id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (cm_id == nullptr || attr == nullptr || (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) == 0) {
    return Fail(EINVAL);
  }
  if (attr->comp_mask & ~uint32_t(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)) return Fail(EINVAL);
  const uint32_t flags = (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ? attr->join_flags : 0;
  if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) return Fail(EINVAL);
  if (attr->addr == nullptr || attr->addr->sa_family != AF_INET) return Fail(EAFNOSUPPORT);
  if (!IsMulticastIpv4(attr->addr)) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  if (id->device < 0 || (cm_id->ps != RDMA_PS_UDP && cm_id->ps != RDMA_PS_IPOIB)) return Fail(EINVAL);
  const in_addr_t address = reinterpret_cast<const sockaddr_in*>(attr->addr)->sin_addr.s_addr;
  {
    std::lock_guard<std::mutex> pump(id->owner->pump);
    if (std::any_of(id->groups.begin(), id->groups.end(), [&](const Membership& g) { return g.address == address; })) {
      return Fail(EADDRINUSE);
    }
    const bool ethernet = GetDevices()->ethernet;
    Membership group{address, GroupGid(address, ethernet), GroupLid(address, ethernet), context, false};
    // A send-only member sends to the group without receiving from it.
    if (cm_id->qp != nullptr && flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
      const int rc = ibv_attach_mcast(cm_id->qp, &group.mgid, group.mlid);
      if (rc != 0) return Fail(rc);
      group.attached = true;
    }
    id->groups.push_back(group);
    const rdma_ud_param param = JoinParam(id, group);
    Push(id->owner, id, RDMA_CM_EVENT_MULTICAST_JOIN, 0, nullptr, nullptr, &param);
  }
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}

int rdma_join_multicast(rdma_cm_id* cm_id, sockaddr* addr, void* context) {
  rdma_cm_join_mc_attr_ex attr{};
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  attr.addr = addr;
  return rdma_join_multicast_ex(cm_id, &attr, context);
}

int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr || addr->sa_family != AF_INET) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  const in_addr_t address = reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr;
  std::lock_guard<std::mutex> pump(id->owner->pump);
  auto it = std::find_if(id->groups.begin(), id->groups.end(), [&](const Membership& g) { return g.address == address; });
  if (it == id->groups.end()) return Fail(EADDRNOTAVAIL);
  if (it->attached && cm_id->qp != nullptr) ibv_detach_mcast(cm_id->qp, &it->mgid, it->mlid);
  id->groups.erase(it);
  return 0;
}

}  // extern "C"
