// RAII ownership of libibverbs objects, and constructors whose errors say which object,
// with which parameters, failed and what the device allows. Setup-time code only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rdmalab {

template <auto Destroy>
struct VerbsDeleter {
  template <typename T>
  void operator()(T* object) const noexcept {
    if (object != nullptr) Destroy(object);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, VerbsDeleter<ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_dealloc_pd>>;
using MrPtr = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_dereg_mr>>;
using CqPtr = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_destroy_qp>>;
using AhPtr = std::unique_ptr<ibv_ah, VerbsDeleter<ibv_destroy_ah>>;
// Destroy a channel's CQs (unique_ptrs declared after it) before the channel.
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_destroy_comp_channel>>;

// Names of the devices libibverbs lists, in its order.
std::vector<std::string> ListDevices();

// An open device with its attributes and those of one port. An empty name opens the first
// device; an unknown one fails listing the devices that exist.
class Device {
 public:
  static Device Open(const std::string& name, std::uint8_t port);

  ibv_context* context() const noexcept { return context_.get(); }
  const std::string& name() const noexcept { return name_; }
  const ibv_device_attr& attr() const noexcept { return attr_; }
  const ibv_port_attr& port_attr() const noexcept { return port_attr_; }
  std::uint8_t port() const noexcept { return port_; }
  bool ethernet() const noexcept { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  std::string firmware() const { return attr_.fw_ver; }
  // The path of the libibverbs.so.1 this process loaded (softnic's or the system one).
  static std::string ProviderLibrary();

 private:
  ContextPtr context_;
  std::string name_;
  ibv_device_attr attr_{};
  ibv_port_attr port_attr_{};
  std::uint8_t port_ = 1;
};

PdPtr AllocatePd(const Device& device);
MrPtr RegisterMemory(ibv_pd* pd, void* address, std::size_t bytes, int access);
// With a channel, the CQ starts armed (ibv_req_notify_cq) and reports to it.
CqPtr CreateCq(const Device& device, int depth, ibv_comp_channel* channel = nullptr);
CompChannelPtr CreateCompChannel(const Device& device);
// Sleeps on `channel` for up to timeout_ms for one completion event; takes it, acks it and
// re-arms its CQ. False when nothing came in time. A CQ polled empty after the re-arm
// gets an event for its next completion, so poll -> AwaitCqEvent -> poll loses none.
bool AwaitCqEvent(ibv_comp_channel* channel, int timeout_ms);

struct QpCaps {
  ibv_qp_type type = IBV_QPT_RC;
  std::uint32_t send_depth = 128;
  std::uint32_t recv_depth = 128;
  std::uint32_t send_sges = 1;
  std::uint32_t recv_sges = 1;
  std::uint32_t inline_bytes = 0;
};
QpPtr CreateQp(const Device& device, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const QpCaps& caps);

std::string TransportName(ibv_qp_type type);

}  // namespace rdmalab
