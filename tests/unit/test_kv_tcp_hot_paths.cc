// The TCP transport's hot path (Issue, Poll) allocates nothing, in either connection mode:
// this file counts operator new on the test's thread while a small memcached stand-in
// (text protocol, GET and SET only) answers on another.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "kv/tcp/memcached.h"
#include "kv/tcp/transport.h"

namespace {
thread_local bool counting = false;
thread_local std::uint64_t allocations = 0;
}  // namespace

// GCC pairs operator new with operator delete, not with malloc/free, and sees through the
// vectors inlined below to a free() of "new" memory: a false alarm for a replacement pair.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t bytes) {
  if (counting) ++allocations;
  if (void* memory = std::malloc(bytes == 0 ? 1 : bytes)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

namespace rdmalab::kv::tcp {
namespace {

constexpr std::uint32_t kValueBytes = 32;

// Answers "get" lines with a miss and "set" commands (whose data holds no newline) with STORED.
class FakeMemcached {
 public:
  FakeMemcached() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listener_, 64), 0);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeMemcached() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }

 private:
  struct Client {
    int fd;
    std::string input;
    bool in_set_data = false;
  };
  void Serve() {
    std::vector<Client> clients;
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& c : clients) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 10) <= 0) continue;
      if (fds[0].revents & POLLIN) clients.push_back({accept(listener_, nullptr, nullptr), ""});
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        Client& c = clients[i - 1];
        char chunk[4096];
        const ssize_t n = recv(c.fd, chunk, sizeof(chunk), 0);
        if (n <= 0) continue;
        c.input.append(chunk, static_cast<std::size_t>(n));
        std::string replies;
        for (std::size_t end; (end = c.input.find('\n')) != std::string::npos; c.input.erase(0, end + 1)) {
          if (c.in_set_data) {
            c.in_set_data = false;
            replies += "STORED\r\n";
          } else if (c.input.rfind("set ", 0) == 0) {
            c.in_set_data = true;
          } else {
            replies += "END\r\n";
          }
        }
        send(c.fd, replies.data(), replies.size(), MSG_NOSIGNAL);
      }
    }
    for (const auto& c : clients) close(c.fd);
  }
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void RunWindow(bool pipeline) {
  FakeMemcached store;
  Options o;
  o.window = 4;
  o.pipeline = pipeline;
  o.value_size = kValueBytes;
  TcpTransport<MemcachedText> transport(Endpoint{"memcached", "127.0.0.1", store.port()}, o);
  std::vector<std::uint8_t> value(kValueBytes, 'x');
  std::uint32_t sequence = 1;
  const auto issue = [&](std::uint32_t slot) {
    Request r;
    r.id = (sequence << kSlotBits) | slot;
    r.get = sequence % 3 != 0;
    r.key_index = sequence++;
    r.value = r.get ? nullptr : value.data();
    r.value_bytes = r.get ? 0 : kValueBytes;
    transport.Issue(r);
  };
  for (std::uint32_t slot = 0; slot < 4; ++slot) issue(slot);
  Response responses[16];
  std::uint64_t answered = 0;
  counting = true;
  while (answered < 20'000) {
    const int n = transport.Poll(responses, 16);
    for (int i = 0; i < n; ++i) issue(SlotOf(responses[i].id));
    answered += static_cast<std::uint64_t>(n);
  }
  counting = false;
  EXPECT_EQ(allocations, 0u) << (pipeline ? "pipelined" : "one connection per slot");
  allocations = 0;
}

TEST(KvTcpHotPaths, PipelinedAllocatesNothing) { RunWindow(true); }
TEST(KvTcpHotPaths, ConnectionPerSlotAllocatesNothing) { RunWindow(false); }

}  // namespace
}  // namespace rdmalab::kv::tcp
