// Multi-process tests: both the test and its helper processes open a device, make an RC QP
// and a buffer, and swap a Hello over their socketpair (see process.h).
#pragma once

#include <memory>
#include <string>

#include "process.h"
#include "verbs_fixture.h"

namespace conformance {

constexpr std::chrono::milliseconds kHandshakeTimeoutMs{20'000};

struct Hello {
  QpInfo qp;
  RemoteMr mr;
};

struct Side {
  std::unique_ptr<Device> device;
  std::unique_ptr<Endpoint> ep;
  Buffer buffer;  // declared after ep: deregistered before the QP goes
  Hello remote;
};

// Opens `device_name`, creates an RC QP and a `bytes` buffer (all remote access), sends
// our Hello, receives the other side's and connects. False with *error on any failure.
bool OpenAndConnect(const std::string& device_name, size_t bytes, const ConnectConfig& connect, Channel& channel,
                    Side* side, std::string* error);

// Parent side of a multi-process test. Nothing is opened in SetUp: helpers are spawned
// before the test opens any device.
class ProcessTest : public testing::TestWithParam<DevicePair> {
 protected:
  void SetUp() override;
  // Spawns helper `name`; fails the test on error.
  void Spawn(std::unique_ptr<Child>* out, const std::string& name, const std::vector<std::string>& args);
  // Opens this process's device `name` and one endpoint of `config` on it; fails the test on error.
  void OpenEndpoint(const std::string& name, const QpConfig& config, std::unique_ptr<Device>* device,
                    std::unique_ptr<Endpoint>* ep);
  // Waits for a helper to exit 0.
  void ExpectCleanExit(Child& child, std::chrono::milliseconds timeout = kCompletionTimeoutMs);
  const std::string& local_name() const { return GetParam().local; }
  const std::string& peer_name() const { return GetParam().peer; }
};

}  // namespace conformance
