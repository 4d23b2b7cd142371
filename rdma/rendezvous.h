// The rendezvous protocol (harness/README.md): one TCP connection per process, one JSON
// object per line, used at setup and teardown only (QP info, barriers, results). The
// harness runs the server for coordinated runs; a standalone (perftest-style) server
// process embeds RendezvousServer so that both ways share one client code path.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace rdmalab {

class RendezvousClient {
 public:
  // Connects (retrying until `timeout_ms`, so a client may start before its server) and
  // says hello. Fails with the server's error, e.g. "bad token".
  static RendezvousClient Connect(const std::string& host, std::uint16_t port, const std::string& token,
                                  const std::string& role, int index, int timeout_ms);
  RendezvousClient(RendezvousClient&& other) noexcept : fd_(other.fd_), pending_(std::move(other.pending_)) {
    other.fd_ = -1;
  }
  RendezvousClient& operator=(RendezvousClient&&) = delete;
  ~RendezvousClient();

  void Put(const std::string& key, const nlohmann::json& value);
  nlohmann::json Get(const std::string& key, int timeout_ms);
  void Barrier(const std::string& name, int count, int timeout_ms);
  // Tells every participant this process failed; best effort, never throws.
  void ReportFailure(const std::string& reason) noexcept;
  void Bye();
  // Waits up to `wait_ms` for the server to end the connection while no request is
  // outstanding (it sends nothing unasked, so anything readable is its end). True once it has:
  // a standalone server's process is gone. Only for a watcher while no one else uses it.
  bool ClosedByServer(int wait_ms) const;

 private:
  explicit RendezvousClient(int fd) : fd_(fd) {}
  nlohmann::json Call(const nlohmann::json& request, int timeout_ms);
  int fd_ = -1;
  std::string pending_;
};

// Splits "HOST:PORT"; fails naming the value when it is not that shape.
std::pair<std::string, std::uint16_t> ParseHostPort(const std::string& value);

class RendezvousServer {
 public:
  // Listens on `bind_address`:`port` (0: a free port the kernel picks) and serves until destroyed.
  RendezvousServer(const std::string& bind_address, std::uint16_t port, std::string token);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Waits until every participant that said hello has said bye or gone, up to timeout_ms.
  bool WaitUntilAllLeft(int timeout_ms);

  std::uint16_t port() const { return port_; }

 private:
  struct State;
  void Serve();
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  int wake_pipe_[2] = {-1, -1};
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace rdmalab
