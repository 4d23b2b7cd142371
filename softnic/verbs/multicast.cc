// ibv_attach_mcast / ibv_detach_mcast: a QP's membership of a multicast group, kept in the
// fabric so that a sender in any process finds every member (send.cc delivers).
#include "softnic/verbs/multicast.h"

#include <cerrno>

#include "softnic/fabric/process.h"
#include "softnic/verbs/internal.h"

namespace softnic {
namespace {

bool QpStillHolds(const FabricHeader& fabric, const MulticastAttachment& attachment, uint32_t qpn) {
  const QpEntry& entry = fabric.devices[attachment.device].qps[qpn & (kMaxQpsPerDevice - 1)];
  return entry.qpn.load(std::memory_order_acquire) == qpn;
}

bool SameMember(const MulticastAttachment& attachment, uint32_t qpn, uint32_t device, const uint8_t mgid[16]) {
  return attachment.qpn.load(std::memory_order_acquire) == qpn && attachment.device == device &&
         std::memcmp(attachment.mgid, mgid, sizeof(attachment.mgid)) == 0;
}

// The rules ib_attach_mcast applies before any provider sees the call.
bool ValidMembership(const FabricHeader& fabric, const ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (qp->qp_type != IBV_QPT_UD || gid == nullptr || !IsMulticastGid(gid->raw)) return false;
  return fabric.link_layer == LinkLayer::kEthernet || IsMulticastLid(lid);
}

}  // namespace

void DetachAllOf(FabricHeader* fabric, uint32_t device, uint32_t qpn) {
  AdminLock admin(fabric);
  const uint32_t in_use = fabric->multicast_in_use.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < in_use; ++i) {
    MulticastAttachment& attachment = fabric->multicast[i];
    if (attachment.qpn.load(std::memory_order_relaxed) == qpn && attachment.device == device) {
      attachment.qpn.store(0, std::memory_order_release);
    }
  }
}

}  // namespace softnic

using namespace softnic;

extern "C" {

int ibv_attach_mcast(ibv_qp* ibqp, const union ibv_gid* gid, uint16_t lid) {
  SoftQp* qp = ToSoft(ibqp);
  FabricHeader* fabric = Runtime::Get()->fabric();
  if (!ValidMembership(*fabric, ibqp, gid, lid)) return EINVAL;
  const uint32_t qpn = ibqp->qp_num;
  AdminLock admin(fabric);
  const uint32_t in_use = fabric->multicast_in_use.load(std::memory_order_relaxed);
  MulticastAttachment* free_entry = nullptr;
  for (uint32_t i = 0; i < in_use; ++i) {
    MulticastAttachment& attachment = fabric->multicast[i];
    if (SameMember(attachment, qpn, qp->device_index, gid->raw)) return 0;  // already a member
    const uint32_t holder = attachment.qpn.load(std::memory_order_relaxed);
    if (free_entry == nullptr && (holder == 0 || !QpStillHolds(*fabric, attachment, holder))) {
      free_entry = &attachment;
    }
  }
  if (free_entry == nullptr) {
    if (in_use == kMaxMulticastAttachments) return ENOMEM;
    free_entry = &fabric->multicast[in_use];
    fabric->multicast_in_use.store(in_use + 1, std::memory_order_release);
  }
  free_entry->qpn.store(kEntryReserved, std::memory_order_relaxed);
  free_entry->device = static_cast<uint16_t>(qp->device_index);
  free_entry->mlid = lid;
  std::memcpy(free_entry->mgid, gid->raw, sizeof(free_entry->mgid));
  free_entry->qpn.store(qpn, std::memory_order_release);
  return 0;
}

int ibv_detach_mcast(ibv_qp* ibqp, const union ibv_gid* gid, uint16_t lid) {
  SoftQp* qp = ToSoft(ibqp);
  FabricHeader* fabric = Runtime::Get()->fabric();
  if (!ValidMembership(*fabric, ibqp, gid, lid)) return EINVAL;
  AdminLock admin(fabric);
  const uint32_t in_use = fabric->multicast_in_use.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < in_use; ++i) {
    MulticastAttachment& attachment = fabric->multicast[i];
    if (SameMember(attachment, ibqp->qp_num, qp->device_index, gid->raw)) {
      attachment.qpn.store(0, std::memory_order_release);
      return 0;
    }
  }
  return EINVAL;  // not a member (rxe answers so)
}

}  // extern "C"
