// TCP sockets for the memcached and Redis baselines: an owning descriptor, connecting
// with an error that names the server, and the blocking exchanges of setup (preload,
// statistics). The clients' hot path uses only send/recv/epoll_wait on non-blocking sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rdmalab::kv::tcp {

class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Where a TCP store listens, and its name for messages ("memcached at 127.0.0.1:11211").
struct Endpoint {
  std::string store;
  std::string host;
  int port = 0;
  std::string Describe() const { return store + " at " + host + ":" + std::to_string(port); }
};

// One connection attempt; an invalid descriptor when nothing listens (yet). Fails on a
// host that does not resolve.
FileDescriptor TryConnect(const Endpoint& endpoint);
// Connects or fails naming the endpoint and the reason; TCP_NODELAY on.
FileDescriptor Connect(const Endpoint& endpoint);
void SetNonBlocking(int fd);
// A port nobody listens on at `bind_address` now (the kernel's pick for port 0).
int FreeTcpPort(const std::string& bind_address);
// Is `host` a wildcard address (0.0.0.0, ::), which clients cannot connect to from another host?
bool IsWildcard(const std::string& host);

// Blocking exchanges with a deadline (setup and teardown only).
void SendAll(int fd, const std::uint8_t* data, std::size_t bytes, const Endpoint& endpoint, int timeout_ms);
// Appends what arrives to buffer[size..capacity) and returns the new size; fails on EOF,
// error or timeout.
std::size_t ReceiveSome(int fd, std::uint8_t* buffer, std::size_t size, std::size_t capacity, const Endpoint& endpoint,
                        int timeout_ms);

}  // namespace rdmalab::kv::tcp
