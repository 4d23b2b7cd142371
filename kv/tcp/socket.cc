#include "kv/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rdma/clock.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {
namespace {

struct Resolved {
  addrinfo* list = nullptr;
  ~Resolved() {
    if (list != nullptr) freeaddrinfo(list);
  }
};

void Resolve(const std::string& host, int port, int flags, Resolved& out, const char* what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  const int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &out.list);
  if (status != 0) Fail("cannot resolve ", what, " '", host, "': ", gai_strerror(status));
}

int MsLeft(std::uint64_t deadline_ns) {
  const std::uint64_t now = MonotonicNs();
  return now >= deadline_ns ? 0 : static_cast<int>((deadline_ns - now + 999'999) / 1'000'000);
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) close(fd_);
}

FileDescriptor TryConnect(const Endpoint& endpoint) {
  Resolved resolved;
  Resolve(endpoint.host, endpoint.port, 0, resolved, (endpoint.store + "'s host").c_str());
  int error_number = ECONNREFUSED;
  for (addrinfo* a = resolved.list; a != nullptr; a = a->ai_next) {
    FileDescriptor fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0 || connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      error_number = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  errno = error_number;  // for the caller's message; the closes above may have changed it
  return FileDescriptor();
}

FileDescriptor Connect(const Endpoint& endpoint) {
  FileDescriptor fd = TryConnect(endpoint);
  if (fd.get() < 0) Fail("cannot connect to ", endpoint.Describe(), ": ", std::strerror(errno));
  return fd;
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) FailErrno("fcntl(O_NONBLOCK) on a TCP socket", errno);
}

int FreeTcpPort(const std::string& bind_address) {
  Resolved resolved;
  Resolve(bind_address, 0, AI_PASSIVE, resolved, "--bind address");
  FileDescriptor fd(socket(resolved.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || bind(fd.get(), resolved.list->ai_addr, resolved.list->ai_addrlen) != 0) {
    Fail("cannot bind a TCP socket to --bind ", bind_address, ": ", std::strerror(errno),
         " (give an address of this host, e.g. 127.0.0.1 or an IPoIB interface's)");
  }
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return address.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }

void SendAll(int fd, const std::uint8_t* data, std::size_t bytes, const Endpoint& endpoint, int timeout_ms) {
  const std::uint64_t deadline = MonotonicNs() + std::uint64_t(timeout_ms) * 1'000'000;
  for (std::size_t sent = 0; sent < bytes;) {
    pollfd pfd{fd, POLLOUT, 0};
    const int ready = poll(&pfd, 1, MsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) Fail(endpoint.Describe(), " took no data for ", timeout_ms, " ms");
    const ssize_t n = send(fd, data + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) Fail("sending to ", endpoint.Describe(), ": ", std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
}

std::size_t ReceiveSome(int fd, std::uint8_t* buffer, std::size_t size, std::size_t capacity, const Endpoint& endpoint,
                        int timeout_ms) {
  const std::uint64_t deadline = MonotonicNs() + std::uint64_t(timeout_ms) * 1'000'000;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, MsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) Fail(endpoint.Describe(), " did not answer within ", timeout_ms, " ms");
    const ssize_t n = recv(fd, buffer + size, capacity - size, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) Fail("receiving from ", endpoint.Describe(), ": ", std::strerror(errno));
    if (n == 0) Fail(endpoint.Describe(), " closed the connection");
    return size + static_cast<std::size_t>(n);
  }
}

}  // namespace rdmalab::kv::tcp
