// UD multicast: which addresses name a group, and which attachments (layout.h) a SEND to
// a group reaches. Control path and the general send engine only; the fast paths never
// see a group address (its address handle names no device).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

#include "softnic/fabric/layout.h"

namespace softnic {

constexpr uint16_t kFirstMulticastLid = 0xc000;
constexpr uint16_t kPermissiveLid = 0xffff;
constexpr uint32_t kMulticastQpn = 0xffffff;

// ff00::/8, or an IPv4-mapped address in 224.0.0.0/4 (RoCEv2's groups for IPv4), as the
// kernel's rdma_is_multicast_addr.
inline bool IsMulticastGid(const uint8_t gid[16]) {
  static constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (gid[0] == 0xff) return true;
  return std::memcmp(gid, kV4MappedPrefix, sizeof(kV4MappedPrefix)) == 0 && (gid[12] & 0xf0) == 0xe0;
}

inline bool IsMulticastLid(uint16_t lid) { return lid >= kFirstMulticastLid && lid != kPermissiveLid; }

// Whether a UD SEND through an address handle with `attr` goes to a group.
inline bool IsMulticastAddress(const ibv_ah_attr& attr) {
  return attr.is_global ? IsMulticastGid(attr.grh.dgid.raw) : IsMulticastLid(attr.dlid);
}

// Whether `attachment` (read after its qpn) is of the group a SEND to `attr` reaches: by
// MGID when the address is global (always on RoCE), else by MLID, as an IB switch routes.
inline bool ReachesAttachment(const ibv_ah_attr& attr, const MulticastAttachment& attachment) {
  if (attr.is_global) return std::memcmp(attr.grh.dgid.raw, attachment.mgid, sizeof(attachment.mgid)) == 0;
  return attr.dlid == attachment.mlid;
}

// Removes every attachment of the QP `qpn` on `device` (its destruction; as the kernel
// detaches a destroyed QP from its groups).
void DetachAllOf(FabricHeader* fabric, uint32_t device, uint32_t qpn);

}  // namespace softnic
