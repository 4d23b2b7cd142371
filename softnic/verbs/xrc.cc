// XRC (eXtended Reliable Connection): domains, XRC SRQs and their numbers. The QPs are in
// qp.cc and the transfers in send.cc. An XRC send QP is connected to one XRC receive QP at
// the responder, and each message names the SRQ there (by its number) whose RECV it takes;
// the SRQ must belong to the receive QP's domain. A domain opened through a file is the
// same domain in every process that opens that file on the device, as the kernel keys its
// XRC domains by inode, so processes share receive QPs' SRQs through it.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <mutex>

#include "softnic/fabric/process.h"
#include "softnic/verbs/internal.h"

namespace softnic {
namespace {

constexpr uint32_t kKnownXrcdMask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
constexpr uint32_t kKnownSrqMask =
    IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;

// How many times this process has each shared domain open: its holder bit in the fabric
// goes with the last close.
std::mutex local_opens_mutex;
uint32_t local_opens[kMaxSharedXrcds];

// The shared domain of (device, file), opened or created by `oflags` as the kernel does:
// an existing one with O_EXCL is EINVAL, a missing one without O_CREAT EAGAIN. Caller
// holds admin. -1 with errno.
int32_t OpenShared(FabricHeader& fabric, uint32_t device, const struct stat& file, int oflags, uint32_t slot) {
  int32_t found = -1;
  int32_t free_index = -1;
  for (uint32_t i = 0; i < kMaxSharedXrcds; ++i) {
    const XrcdEntry& entry = fabric.xrcds[i];
    if (entry.id == 0) {
      if (free_index < 0) free_index = int32_t(i);
    } else if (entry.device == device && entry.file_device == file.st_dev && entry.file_inode == file.st_ino) {
      found = int32_t(i);
    }
  }
  if (found >= 0 && (oflags & O_EXCL)) {
    errno = EINVAL;
    return -1;
  }
  if (found < 0) {
    if (!(oflags & O_CREAT)) {
      errno = EAGAIN;
      return -1;
    }
    if (free_index < 0) {
      Warn("ibv_open_xrcd: all %u XRC domains opened through files are in use in this fabric", kMaxSharedXrcds);
      errno = ENOMEM;
      return -1;
    }
    XrcdEntry& entry = fabric.xrcds[free_index];
    entry = XrcdEntry{};
    entry.id = fabric.next_xrcd_id.fetch_add(1, std::memory_order_relaxed) + 1;
    entry.device = device;
    entry.file_device = file.st_dev;
    entry.file_inode = file.st_ino;
    found = free_index;
  }
  fabric.xrcds[found].Hold(slot);
  return found;
}

ibv_xrcd* OpenXrcdOp(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if ((attr->comp_mask & ~kKnownXrcdMask) != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & kKnownXrcdMask) != kKnownXrcdMask || (attr->oflags & ~(O_CREAT | O_EXCL)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  Runtime* runtime = Runtime::Get();
  FabricHeader& fabric = *runtime->fabric();
  auto* xrcd = new SoftXrcd{};
  xrcd->xrcd.context = context;
  xrcd->shared = -1;
  if (attr->fd == -1) {
    xrcd->id = fabric.next_xrcd_id.fetch_add(1, std::memory_order_relaxed) + 1;
    return &xrcd->xrcd;
  }
  struct stat file;
  if (fstat(attr->fd, &file) != 0) {
    int err = errno;
    delete xrcd;
    errno = err;
    return nullptr;
  }
  uint32_t slot = runtime->self().slot;
  std::lock_guard<std::mutex> local(local_opens_mutex);
  AdminLock admin(&fabric);
  int32_t index = OpenShared(fabric, ToSoft(context)->device_index, file, attr->oflags, slot);
  if (index < 0) {
    int err = errno;
    delete xrcd;
    errno = err;
    return nullptr;
  }
  ++local_opens[index];
  xrcd->shared = index;
  xrcd->id = fabric.xrcds[index].id;
  return &xrcd->xrcd;
}

// Fails with EBUSY while an SRQ or receive QP of this process is in the domain, as the
// kernel refuses to free a domain still in use.
int CloseXrcdOp(ibv_xrcd* ibxrcd) {
  SoftXrcd* xrcd = ToSoft(ibxrcd);
  if (xrcd->users.load(std::memory_order_relaxed) != 0) return EBUSY;
  if (xrcd->shared >= 0) {
    Runtime* runtime = Runtime::Get();
    FabricHeader& fabric = *runtime->fabric();
    uint32_t slot = runtime->self().slot;
    std::lock_guard<std::mutex> local(local_opens_mutex);
    AdminLock admin(&fabric);
    if (--local_opens[xrcd->shared] == 0) fabric.xrcds[xrcd->shared].Release(slot);
  }
  delete xrcd;
  return 0;
}

// Publishes an XRC SRQ in its device's QP table, so that senders find it by number.
bool PublishXrcSrq(SoftSrq* srq, SoftCq* cq, uint32_t pd_id) {
  Runtime* runtime = Runtime::Get();
  int32_t index = ClaimQpIndex(srq->context->device);
  if (index < 0) {
    errno = ENOMEM;
    return false;
  }
  QpEntry& entry = srq->context->device->qps[index];
  entry.type = kXrcSrqEntryType;
  entry.owner_slot = runtime->self().slot;
  entry.owner_incarnation = runtime->self().incarnation;
  entry.pd_id = pd_id;
  entry.xrcd_id = srq->xrcd->id;
  entry.qp_access_flags.store(0, std::memory_order_relaxed);
  entry.qkey.store(0, std::memory_order_relaxed);
  entry.min_rnr_timer.store(0, std::memory_order_relaxed);
  entry.recv_sge_capacity = srq->max_sge;
  entry.uses_srq = 1;
  entry.recv_queue = srq->object;
  entry.recv_cq = cq->object;
  entry.state.store(IBV_QPS_RTS, std::memory_order_relaxed);
  srq->srqn = NewQpNumber(runtime, uint32_t(index));
  srq->entry = &entry;
  entry.qpn.store(srq->srqn, std::memory_order_release);
  return true;
}

ibv_srq* CreateSrqExOp(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  if ((attr->comp_mask & ~kKnownSrqMask) != 0) {
    errno = EOPNOTSUPP;  // tag matching (IBV_SRQ_INIT_ATTR_TM) among others
    return nullptr;
  }
  ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if (type == IBV_SRQT_TM) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  bool xrc = type == IBV_SRQT_XRC;
  if ((type != IBV_SRQT_BASIC && !xrc) || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr ||
      attr->pd->context != context ||
      (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || attr->xrcd == nullptr ||
               !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || attr->cq == nullptr))) {
    errno = EINVAL;
    return nullptr;
  }
  SoftSrq* srq = NewSrq(attr->pd, &attr->attr, attr->srq_context);
  if (srq == nullptr || !xrc) return srq != nullptr ? &srq->srq : nullptr;
  srq->xrcd = ToSoft(attr->xrcd);
  if (!PublishXrcSrq(srq, ToSoft(attr->cq), ToSoft(attr->pd)->pd_id)) {
    int err = errno;
    srq->xrcd = nullptr;
    ibv_destroy_srq(&srq->srq);
    errno = err;
    return nullptr;
  }
  UseXrcd(srq->xrcd);
  return &srq->srq;
}

int GetSrqNumOp(ibv_srq* ibsrq, uint32_t* srq_num) {
  SoftSrq* srq = ToSoft(ibsrq);
  if (srq->entry == nullptr) return EINVAL;  // only XRC SRQs have a number senders name
  *srq_num = srq->srqn;
  return 0;
}

}  // namespace

void ForgetXrcSrq(SoftSrq* srq) {
  ChangeBetweenControlEpochs(*Runtime::Get()->fabric(), [&] { srq->entry->qpn.store(0, std::memory_order_release); });
  srq->entry = nullptr;
  ReleaseXrcd(srq->xrcd);
}

void InstallXrcOps(verbs_context* vctx) {
  vctx->open_xrcd = OpenXrcdOp;
  vctx->close_xrcd = CloseXrcdOp;
  vctx->create_srq_ex = CreateSrqExOp;
  vctx->get_srq_num = GetSrqNumOp;
}

}  // namespace softnic
