#include "process_fixture.h"

#include <cstring>

namespace conformance {

bool OpenAndConnect(const std::string& device_name, size_t bytes, const ConnectConfig& connect, Channel& channel,
                    Side* side, std::string* error) {
  side->device = Device::Open(device_name, error);
  if (!side->device) return false;
  int err = 0;
  side->ep = Endpoint::Create(*side->device, {.type = IBV_QPT_RC, .send_wr = 256}, &err, error);
  if (!side->ep) return false;
  side->buffer = Buffer::Make(side->device->pd(), bytes, kAllRemoteAccess, error);
  if (!side->buffer) return false;
  Hello hello{side->ep->info(), {side->buffer.addr(), side->buffer.rkey(), 0, bytes}};
  if (!channel.SendValue(hello) || !channel.RecvValue(&side->remote, kHandshakeTimeoutMs)) {
    *error = "handshake over the socketpair failed or timed out";
    return false;
  }
  if (int rc = Connect(*side->ep, side->remote.qp, connect); rc != 0) {
    *error = "connecting the RC QP on " + device_name + ": " + strerror(rc);
    return false;
  }
  return true;
}

void ProcessTest::SetUp() {
  if (GetParam().local.empty()) GTEST_SKIP() << "no RDMA device: ibv_get_device_list lists none";
}

void ProcessTest::Spawn(std::unique_ptr<Child>* out, const std::string& name, const std::vector<std::string>& args) {
  std::string error;
  *out = Child::Spawn(name, args, &error);
  ASSERT_TRUE(*out != nullptr) << "spawning helper " << name << ": " << error;
}

void ProcessTest::OpenEndpoint(const std::string& name, const QpConfig& config, std::unique_ptr<Device>* device,
                               std::unique_ptr<Endpoint>* ep) {
  std::string error;
  *device = Device::Open(name, &error);
  ASSERT_TRUE(*device != nullptr) << error;
  int err = 0;
  *ep = Endpoint::Create(**device, config, &err, &error);
  ASSERT_TRUE(*ep != nullptr) << error;
}

void ProcessTest::ExpectCleanExit(Child& child, std::chrono::milliseconds timeout) {
  std::optional<int> status = child.Wait(timeout);
  ASSERT_TRUE(status.has_value()) << "helper " << child.pid() << " still running after " << timeout.count() << " ms";
  EXPECT_EQ(*status, 0) << "helper " << child.pid() << " failed (exit code, or -signal)";
}

}  // namespace conformance
