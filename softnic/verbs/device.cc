// Device discovery, contexts, and the query verbs.
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "softnic/fabric/object.h"
#include "softnic/verbs/internal.h"
#include "softnic/verbs/planted_fault.h"

#undef ibv_get_device_list
#undef ibv_query_port

namespace softnic {
namespace {

constexpr uint64_t kMaxMrBytes = 1ull << 40;
constexpr uint32_t kMaxMessageBytes = 1u << 31;
constexpr uint8_t kActiveWidth4x = 2;
constexpr uint8_t kActiveSpeedEdr = 32;  // 25 Gb/s per lane: 100 Gb/s at 4x
constexpr uint8_t kPhysStateLinkUp = 5;
constexpr uint32_t kPortCapabilities = IBV_PORT_CM_SUP;
// Room for several GIDs per port, as a NIC has (one per address of its netdev); only
// index 0 is populated, so programs and rdma-core's tests meet empty entries too.
constexpr uint32_t kGidTableLength = 16;
constexpr uint32_t kPopulatedGids = 1;
static_assert(kPopulatedGids <= kGidTableLength);
constexpr int kAsyncWaitSliceMs = 10;
constexpr int kSysfsGidTypeIbOrRoceV1 = 0;  // rdma-core's IBV_GID_TYPE_SYSFS_* numbering
constexpr int kSysfsGidTypeRoceV2 = 1;
// An IEEE-style vendor id of softnic's own ("SNC"), so that no program takes a softnic
// device for a vendor's hardware (UCX and others pick device quirks by vendor id).
constexpr uint32_t kVendorId = 0x534e43;
constexpr uint32_t kVendorPartId = 1;

std::once_flag g_devices_once;
std::vector<SoftDevice*>* g_devices = nullptr;

std::vector<SoftDevice*>& Devices() {
  std::call_once(g_devices_once, [] {
    g_devices = new std::vector<SoftDevice*>;
    Runtime* runtime = Runtime::Get();
    if (runtime == nullptr) return;
    for (uint32_t i = 0; i < runtime->fabric()->device_count; ++i) {
      auto* device = new SoftDevice{};
      device->index = i;
      device->device.node_type = IBV_NODE_CA;
      device->device.transport_type = IBV_TRANSPORT_IB;
      std::snprintf(device->device.name, sizeof(device->device.name), "%s",
                    runtime->fabric()->devices[i].name);
      std::snprintf(device->device.dev_name, sizeof(device->device.dev_name), "uverbs%u", i);
      std::snprintf(device->device.dev_path, sizeof(device->device.dev_path),
                    "%s/uverbs%u", runtime->directory().c_str(), i);
      std::snprintf(device->device.ibdev_path, sizeof(device->device.ibdev_path), "%s/%s",
                    runtime->directory().c_str(), device->device.name);
      g_devices->push_back(device);
    }
  });
  return *g_devices;
}

SoftDevice* ToSoftDevice(ibv_device* device) { return reinterpret_cast<SoftDevice*>(device); }

void FillPortAttributes(const FabricHeader& fabric, const DeviceEntry& device, ibv_port_attr* attr) {
  std::memset(attr, 0, sizeof(*attr));
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = kGidTableLength;
  attr->port_cap_flags = kPortCapabilities;
  attr->max_msg_sz = kMaxMessageBytes;
  attr->pkey_tbl_len = 1;
  attr->max_vl_num = 1;
  attr->subnet_timeout = 18;
  attr->active_width = kActiveWidth4x;
  attr->active_speed = kActiveSpeedEdr;
  attr->phys_state = kPhysStateLinkUp;
  if (fabric.link_layer == LinkLayer::kInfiniBand) {
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    attr->lid = device.lid;
    attr->sm_lid = 1;
  } else {
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  }
  if (device.faults.down.load(std::memory_order_relaxed) != 0) {
    attr->state = IBV_PORT_DOWN;
    attr->phys_state = 3;  // disabled
  }
}

int QueryPortOp(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t attr_bytes) {
  if (port != kPortNumber) return EINVAL;
  ibv_port_attr full;
  SoftContext* soft = ToSoft(context);
  FillPortAttributes(*Runtime::Get()->fabric(), *soft->device, &full);
  std::memcpy(attr, &full, std::min(attr_bytes, sizeof(full)));
  return 0;
}

int QueryDeviceExOp(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_bytes) {
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  ibv_device_attr_ex full;
  std::memset(&full, 0, sizeof(full));
  int rc = ibv_query_device(context, &full.orig_attr);
  if (rc != 0) return rc;
  full.max_dm_size = 0;
  full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
  std::memcpy(attr, &full, std::min(attr_bytes, sizeof(full)));
  return 0;
}

}  // namespace

void PostAsyncEvent(SoftContext* context, const ibv_async_event& event) {
  {
    std::lock_guard<std::mutex> lock(context->async.mutex);
    context->async.events.push_back(event);
  }
  Runtime::Get()->SignalChannel(context->async_fifo_id);
}

void InstallContextOps(SoftContext* context) {
  verbs_context& vctx = context->vctx;
  vctx.query_port = QueryPortOp;
  vctx.query_device_ex = QueryDeviceExOp;
  ibv_context_ops* ops = &vctx.context.ops;
  InstallCqOps(ops, &vctx);
  InstallQpOps(ops, &vctx);
  InstallRecvOps(ops, &vctx);
  InstallSendOps(ops, &vctx);
  InstallXrcOps(&vctx);
}

}  // namespace softnic

using namespace softnic;

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  std::string error;
  if (Runtime::Get(&error) == nullptr) {
    errno = ENODEV;
    if (num_devices) *num_devices = 0;
    return nullptr;
  }
  std::vector<SoftDevice*>& devices = Devices();
  auto** list = static_cast<ibv_device**>(calloc(devices.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->device;
  if (num_devices) *num_devices = static_cast<int>(devices.size());
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device->name; }

__be64 ibv_get_device_guid(ibv_device* device) {
  return htobe64(Runtime::Get()->fabric()->devices[ToSoftDevice(device)->index].node_guid);
}

int ibv_get_device_index(ibv_device* device) { return static_cast<int>(ToSoftDevice(device)->index); }

ibv_context* ibv_open_device(ibv_device* device) {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) {
    errno = ENODEV;
    return nullptr;
  }
  if (std::string error; !runtime->EnsureOwnProcess(&error)) {
    Warn("%s", error.c_str());
    errno = ENOSPC;
    return nullptr;
  }
  auto* context = new SoftContext{};
  context->device_index = ToSoftDevice(device)->index;
  context->device = &runtime->fabric()->devices[context->device_index];
  verbs_context& vctx = context->vctx;
  vctx.sz = sizeof(verbs_context);
  ibv_context& base = vctx.context;
  base.device = device;
  // softnic has no kernel command channel, but programs dup cmd_fd (to import the context
  // elsewhere, which then fails with EOPNOTSUPP): it must be a descriptor.
  base.cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (base.cmd_fd < 0) {
    int err = errno;
    delete context;
    errno = err;
    return nullptr;
  }
  context->async_fifo_id = runtime->NewObjectId();
  base.async_fd = CreateFifoObject(runtime->directory(), context->async_fifo_id);
  base.num_comp_vectors = 1;
  base.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&base.mutex, nullptr);
  if (base.async_fd < 0) {
    int err = errno;
    close(base.cmd_fd);
    delete context;
    errno = err;
    return nullptr;
  }
  InstallContextOps(context);
  if (std::string error; !InstallPlantedFault(&base.ops, &error)) {
    Warn("%s", error.c_str());
    ibv_close_device(&base);
    errno = EINVAL;
    return nullptr;
  }
  return &base;
}

int ibv_close_device(ibv_context* context) {
  SoftContext* soft = ToSoft(context);
  close(context->cmd_fd);
  close(context->async_fd);
  RemoveObject(Runtime::Get()->directory(), soft->async_fifo_id);
  delete soft;
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  Runtime* runtime = Runtime::Get();
  const FabricHeader& fabric = *runtime->fabric();
  const DeviceAttributes& limits = fabric.attributes;
  const DeviceEntry& device = *ToSoft(context)->device;
  std::memset(attr, 0, sizeof(*attr));
  std::snprintf(attr->fw_ver, sizeof(attr->fw_ver), "softnic-%u", kFabricLayoutVersion);
  attr->node_guid = htobe64(device.node_guid);
  attr->sys_image_guid = htobe64(device.node_guid);
  attr->max_mr_size = kMaxMrBytes;
  attr->page_size_cap = kPageBytes;
  attr->hw_ver = 1;
  attr->vendor_id = kVendorId;
  attr->vendor_part_id = kVendorPartId;
  attr->max_qp = kMaxQpsPerDevice;
  attr->max_qp_wr = static_cast<int>(limits.max_qp_wr);
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                           IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_XRC;
  attr->max_sge = static_cast<int>(limits.max_sge);
  attr->max_sge_rd = static_cast<int>(limits.max_sge);
  attr->max_cq = 1 << 16;
  attr->max_cqe = static_cast<int>(limits.max_cqe);
  attr->max_mr = kMaxMrsPerDevice;
  attr->max_pd = static_cast<int>(limits.max_pd);
  attr->max_qp_rd_atom = static_cast<int>(limits.max_qp_rd_atom);
  attr->max_qp_init_rd_atom = static_cast<int>(limits.max_qp_rd_atom);
  attr->max_res_rd_atom = static_cast<int>(limits.max_qp_rd_atom * kMaxQpsPerDevice);
  attr->atomic_cap = IBV_ATOMIC_HCA;
  attr->max_srq = 1 << 16;
  attr->max_srq_wr = static_cast<int>(limits.max_srq_wr);
  attr->max_srq_sge = static_cast<int>(limits.max_sge);
  attr->max_pkeys = 1;
  attr->max_mcast_grp = static_cast<int>(kMaxMulticastAttachments);  // a group has a member
  attr->max_mcast_qp_attach = static_cast<int>(kMaxMulticastAttachments);
  attr->max_total_mcast_qp_attach = static_cast<int>(kMaxMulticastAttachments);
  attr->local_ca_ack_delay = 16;
  attr->phys_port_cnt = 1;
  return 0;
}

// The IBVERBS_1.1 entry point takes the old, shorter port struct; new callers go through
// verbs_context::query_port with the full size.
int ibv_query_port(ibv_context* context, uint8_t port, struct _compat_ibv_port_attr* attr) {
  return QueryPortOp(context, port, reinterpret_cast<ibv_port_attr*>(attr),
                     offsetof(ibv_port_attr, link_layer) + sizeof(uint8_t));
}

// An empty entry reads as the zero GID, as rdma-core's ibv_query_gid answers ENODATA.
int ibv_query_gid(ibv_context* context, uint8_t port, int index, union ibv_gid* gid) {
  if (port != kPortNumber || index < 0 || index >= int(kGidTableLength)) {
    errno = EINVAL;
    return -1;
  }
  if (index >= int(kPopulatedGids)) {
    std::memset(gid->raw, 0, sizeof(gid->raw));
    return 0;
  }
  std::memcpy(gid->raw, ToSoft(context)->device->gid, sizeof(gid->raw));
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_bytes) {
  if (flags != 0 || port != kPortNumber || entry_bytes < sizeof(ibv_gid_entry)) return EINVAL;
  if (index >= kGidTableLength) return EINVAL;
  if (index >= kPopulatedGids) return ENODATA;
  std::memset(entry, 0, sizeof(*entry));
  std::memcpy(entry->gid.raw, ToSoft(context)->device->gid, sizeof(entry->gid.raw));
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = Runtime::Get()->fabric()->link_layer == LinkLayer::kInfiniBand
                        ? IBV_GID_TYPE_IB
                        : IBV_GID_TYPE_ROCE_V2;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_bytes) {
  if (flags != 0 || entry_bytes < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < kPopulatedGids) return -EINVAL;
  for (uint32_t index = 0; index < kPopulatedGids; ++index) {
    auto* entry = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + index * entry_bytes);
    int rc = _ibv_query_gid_ex(context, kPortNumber, index, entry, 0, entry_bytes);
    if (rc != 0) return -rc;
  }
  return ssize_t{kPopulatedGids};
}

// rdma-core's private helper for providers: the sysfs GID type of an entry.
int ibv_query_gid_type(ibv_context* context, uint8_t port, unsigned int index, int* type) {
  ibv_gid_entry entry;
  int rc = _ibv_query_gid_ex(context, port, index, &entry, 0, sizeof(entry));
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  *type = entry.gid_type == IBV_GID_TYPE_IB ? kSysfsGidTypeIbOrRoceV1 : kSysfsGidTypeRoceV2;
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != kPortNumber || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  return (port == kPortNumber && be16toh(pkey) == 0xffff) ? 0 : -1;
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  SoftContext* soft = ToSoft(context);
  bool nonblocking = (fcntl(context->async_fd, F_GETFL) & O_NONBLOCK) != 0;
  for (;;) {
    // Conditions raised by peers (SRQ limit, CQ overrun) become queued events here.
    CheckAsyncConditions(soft);
    {
      std::lock_guard<std::mutex> lock(soft->async.mutex);
      if (!soft->async.events.empty()) {
        *event = soft->async.events.front();
        soft->async.events.pop_front();
        // The fd's bytes are wake-ups: it stays readable while events are queued.
        if (soft->async.events.empty()) DrainFifo(context->async_fd);
        return 0;
      }
    }
    pollfd fd{context->async_fd, POLLIN, 0};
    int ready = poll(&fd, 1, nonblocking ? 0 : kAsyncWaitSliceMs);
    if (ready == 0 && nonblocking) {
      errno = EAGAIN;
      return -1;
    }
    if (ready > 0) DrainFifo(context->async_fd);
  }
}

void ibv_ack_async_event(ibv_async_event*) {}

}  // extern "C"
