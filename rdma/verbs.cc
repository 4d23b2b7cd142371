#include "rdma/verbs.h"

#include <dlfcn.h>
#include <link.h>
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "rdma/error.h"

namespace rdmalab {

void FailErrno(const std::string& what, int error_number) {
  Fail(what, ": ", std::strerror(error_number));
}

std::vector<std::string> ListDevices() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  std::vector<std::string> names;
  if (list == nullptr) return names;
  for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined.empty() ? "none" : joined;
}

}  // namespace

Device Device::Open(const std::string& name, std::uint8_t port) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) FailErrno("ibv_get_device_list", errno);
  ibv_device* chosen = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.emplace_back(ibv_get_device_name(list[i]));
    if (chosen == nullptr && (name.empty() || names.back() == name)) chosen = list[i];
  }
  Device device;
  if (chosen == nullptr) {
    ibv_free_device_list(list);
    Fail("RDMA device '", name, "' not found; devices: ", Join(names));
  }
  device.name_ = ibv_get_device_name(chosen);
  device.context_.reset(ibv_open_device(chosen));
  const int open_errno = errno;
  ibv_free_device_list(list);
  if (!device.context_) FailErrno("ibv_open_device(" + device.name_ + ")", open_errno);
  if (ibv_query_device(device.context(), &device.attr_) != 0) FailErrno("ibv_query_device", errno);
  if (port < 1 || port > device.attr_.phys_port_cnt) {
    Fail("port ", int{port}, " does not exist on ", device.name_, ": valid ports are 1..",
         int{device.attr_.phys_port_cnt});
  }
  device.port_ = port;
  if (ibv_query_port(device.context(), port, &device.port_attr_) != 0) FailErrno("ibv_query_port", errno);
  if (device.port_attr_.state != IBV_PORT_ACTIVE) {
    Fail("port ", int{port}, " of ", device.name_, " is ", ibv_port_state_str(device.port_attr_.state),
         ", not ACTIVE");
  }
  return device;
}

std::string Device::ProviderLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "unknown";
}

PdPtr AllocatePd(const Device& device) {
  PdPtr pd(ibv_alloc_pd(device.context()));
  if (!pd) FailErrno("ibv_alloc_pd on " + device.name(), errno);
  return pd;
}

MrPtr RegisterMemory(ibv_pd* pd, void* address, std::size_t bytes, int access) {
  MrPtr mr(ibv_reg_mr(pd, address, bytes, access));
  if (!mr) FailErrno("ibv_reg_mr of " + std::to_string(bytes) + " bytes", errno);
  return mr;
}

CqPtr CreateCq(const Device& device, int depth, ibv_comp_channel* channel) {
  if (depth < 1 || depth > device.attr().max_cqe) {
    Fail("CQ depth ", depth, " is outside what ", device.name(), " allows: 1..", device.attr().max_cqe);
  }
  CqPtr cq(ibv_create_cq(device.context(), depth, nullptr, channel, 0));
  if (!cq) FailErrno("ibv_create_cq(depth " + std::to_string(depth) + ")", errno);
  if (channel != nullptr) {
    const int error_number = ibv_req_notify_cq(cq.get(), 0);
    if (error_number != 0) FailErrno("ibv_req_notify_cq on a new CQ of " + device.name(), error_number);
  }
  return cq;
}

CompChannelPtr CreateCompChannel(const Device& device) {
  CompChannelPtr channel(ibv_create_comp_channel(device.context()));
  if (!channel) FailErrno("ibv_create_comp_channel on " + device.name(), errno);
  return channel;
}

bool AwaitCqEvent(ibv_comp_channel* channel, int timeout_ms) {
  pollfd fd{channel->fd, POLLIN, 0};
  const int ready = poll(&fd, 1, timeout_ms);
  if (ready < 0 && errno != EINTR) FailErrno("poll on a completion channel", errno);
  if (ready <= 0) return false;
  ibv_cq* cq = nullptr;
  void* cq_context = nullptr;
  if (ibv_get_cq_event(channel, &cq, &cq_context) != 0) FailErrno("ibv_get_cq_event", errno);
  ibv_ack_cq_events(cq, 1);
  const int error_number = ibv_req_notify_cq(cq, 0);
  if (error_number != 0) FailErrno("ibv_req_notify_cq (re-arming)", error_number);
  return true;
}

std::string TransportName(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    default: return "QP type " + std::to_string(static_cast<int>(type));
  }
}

QpPtr CreateQp(const Device& device, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const QpCaps& caps) {
  const auto& attr = device.attr();
  const auto max_wr = static_cast<std::uint32_t>(attr.max_qp_wr);
  if (caps.send_depth > max_wr || caps.recv_depth > max_wr) {
    FailUnsupported("queue depth ", std::max(caps.send_depth, caps.recv_depth), " exceeds ", device.name(),
                    "'s max_qp_wr ", max_wr);
  }
  if (caps.send_sges > static_cast<std::uint32_t>(attr.max_sge)) {
    FailUnsupported(caps.send_sges, " SGEs per WR exceed ", device.name(), "'s max_sge ", attr.max_sge);
  }
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = caps.type;
  init.cap.max_send_wr = caps.send_depth;
  init.cap.max_recv_wr = caps.recv_depth;
  init.cap.max_send_sge = caps.send_sges;
  init.cap.max_recv_sge = caps.recv_sges;
  init.cap.max_inline_data = caps.inline_bytes;
  QpPtr qp(ibv_create_qp(pd, &init));
  if (!qp) {
    const int error_number = errno;
    Fail("ibv_create_qp(", TransportName(caps.type), ", send depth ", caps.send_depth, ", recv depth ",
         caps.recv_depth, ", ", caps.send_sges, " SGEs, inline ", caps.inline_bytes, " B) on ", device.name(),
         ": ", std::strerror(error_number),
         error_number == EINVAL && caps.inline_bytes > 0
             ? "; the inline size is the likely cause (devices cap it, e.g. at 256 B or 512 B): lower --inline_size"
             : "");
  }
  if (init.cap.max_inline_data < caps.inline_bytes) {
    FailUnsupported("inline size ", caps.inline_bytes, " B exceeds what ", device.name(), " grants: ",
                    init.cap.max_inline_data, " B");
  }
  return qp;
}

}  // namespace rdmalab
