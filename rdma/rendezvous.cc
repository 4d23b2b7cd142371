#include "rdma/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "rdma/clock.h"
#include "rdma/error.h"

namespace rdmalab {
namespace {

using nlohmann::json;

constexpr int kConnectRetryMs = 20;
constexpr int kIoSlackMs = 2000;  // a reply may take this long beyond the wait it answers

std::uint64_t DeadlineAfterMs(int timeout_ms) { return MonotonicNs() + std::uint64_t(timeout_ms) * 1'000'000ull; }
int MsUntil(std::uint64_t deadline_ns) {
  const std::uint64_t now = MonotonicNs();
  return now >= deadline_ns ? 0 : static_cast<int>((deadline_ns - now + 999'999) / 1'000'000);
}

bool WriteAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads one line into `line`; false on timeout or EOF (errno_out says which).
bool ReadLine(int fd, std::string& buffer, std::string& line, std::uint64_t deadline_ns, const char*& why) {
  for (;;) {
    const auto newline = buffer.find('\n');
    if (newline != std::string::npos) {
      line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      return true;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, MsUntil(deadline_ns));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      why = "no reply before the deadline";
      return false;
    }
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = "the rendezvous server closed the connection";
      return false;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

int ConnectOnce(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0) Fail("cannot resolve rendezvous host '", host, "': ", gai_strerror(status));
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

std::pair<std::string, std::uint16_t> ParseHostPort(const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    Fail("bad rendezvous address '", value, "': expected HOST:PORT, e.g. 10.0.0.1:7000");
  }
  try {
    std::size_t used = 0;
    const int port = std::stoi(value.substr(colon + 1), &used);
    if (used != value.size() - colon - 1 || port < 1 || port > 65535) throw std::out_of_range(value);
    std::string host = value.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return {host, static_cast<std::uint16_t>(port)};
  } catch (const std::logic_error&) {
    Fail("bad port in rendezvous address '", value, "': expected 1..65535");
  }
}

RendezvousClient RendezvousClient::Connect(const std::string& host, std::uint16_t port, const std::string& token,
                                           const std::string& role, int index, int timeout_ms) {
  const std::uint64_t deadline = DeadlineAfterMs(timeout_ms);
  int fd = ConnectOnce(host, port);
  while (fd < 0 && MonotonicNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kConnectRetryMs));
    fd = ConnectOnce(host, port);
  }
  if (fd < 0) Fail("cannot reach the rendezvous/server at ", host, ":", port, " within ", timeout_ms, " ms");
  RendezvousClient client(fd);
  client.Call({{"op", "hello"}, {"token", token}, {"role", role}, {"index", index}}, 0);
  return client;
}

RendezvousClient::~RendezvousClient() {
  if (fd_ >= 0) close(fd_);
}

json RendezvousClient::Call(const json& request, int timeout_ms) {
  if (fd_ < 0) Fail("rendezvous connection already closed");
  if (!WriteAll(fd_, request.dump() + "\n")) Fail("rendezvous server connection lost while sending ", request.at("op"));
  std::string line;
  const char* why = nullptr;
  if (!ReadLine(fd_, pending_, line, DeadlineAfterMs(timeout_ms + kIoSlackMs), why)) {
    Fail("rendezvous ", request.at("op").get<std::string>(), ": ", why);
  }
  json reply = json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) Fail("rendezvous server sent a malformed reply: ", line);
  if (!reply.value("ok", false)) Fail(reply.value("error", std::string("rendezvous request refused")));
  return reply;
}

void RendezvousClient::Put(const std::string& key, const json& value) {
  Call({{"op", "put"}, {"key", key}, {"value", value}}, 0);
}

json RendezvousClient::Get(const std::string& key, int timeout_ms) {
  return Call({{"op", "get"}, {"key", key}, {"timeout_ms", timeout_ms}}, timeout_ms).at("value");
}

void RendezvousClient::Barrier(const std::string& name, int count, int timeout_ms) {
  Call({{"op", "barrier"}, {"name", name}, {"count", count}, {"timeout_ms", timeout_ms}}, timeout_ms);
}

void RendezvousClient::ReportFailure(const std::string& reason) noexcept {
  if (fd_ < 0) return;
  WriteAll(fd_, json({{"op", "fail"}, {"reason", reason}}).dump() + "\n");
  close(fd_);
  fd_ = -1;
}

void RendezvousClient::Bye() {
  Call({{"op", "bye"}}, 0);
  close(fd_);
  fd_ = -1;
}

// ---- server ---------------------------------------------------------------------------

struct RendezvousServer::State {
  struct Participant {
    std::string name;  // ROLE/INDEX once hello'd
    std::string buffer;
    bool left = false;
  };
  struct Waiter {
    int fd;
    std::string key;  // get: key; barrier: name
    std::uint64_t deadline_ns;
    int timeout_ms;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, Participant> participants;
  std::map<std::string, json> values;
  std::vector<Waiter> gets;
  std::map<std::string, std::vector<Waiter>> barriers;
  std::map<std::string, int> barrier_counts;
  std::string failure;
  bool stopping = false;
  int hellos = 0;
  int departures = 0;
};

RendezvousServer::RendezvousServer(const std::string& bind_address, std::uint16_t port, std::string token)
    : token_(std::move(token)), state_(std::make_unique<State>()) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) FailErrno("socket", errno);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, bind_address.c_str(), &address.sin_addr) != 1) {
    close(listen_fd_);
    Fail("bad bind address '", bind_address, "': expected an IPv4 address such as 0.0.0.0");
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(listen_fd_, 128) != 0) {
    const int error_number = errno;
    close(listen_fd_);
    Fail("cannot listen on ", bind_address, ":", port, ": ", std::strerror(error_number),
         " (is another server using the port? choose one with -p/--port)");
  }
  socklen_t length = sizeof(address);
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) FailErrno("getsockname", errno);
  port_ = ntohs(address.sin_port);
  if (pipe2(wake_pipe_, O_CLOEXEC) != 0) FailErrno("pipe2", errno);
  thread_ = std::thread([this] { Serve(); });
}

RendezvousServer::~RendezvousServer() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  const char byte = 0;
  [[maybe_unused]] const ssize_t ignored = write(wake_pipe_[1], &byte, 1);
  thread_.join();
  for (auto& [fd, participant] : state_->participants) close(fd);
  close(listen_fd_);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

bool RendezvousServer::WaitUntilAllLeft(int timeout_ms) {
  std::unique_lock lock(state_->mutex);
  return state_->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                  [&] { return state_->departures == state_->hellos; });
}

void RendezvousServer::Serve() {
  State& s = *state_;
  auto reply = [](int fd, const json& message) { WriteAll(fd, message.dump() + "\n"); };
  auto error = [&](int fd, const std::string& text) { reply(fd, {{"ok", false}, {"error", text}}); };
  auto fail_all = [&](const std::string& text) {
    if (s.failure.empty()) s.failure = text;
    for (auto& waiter : s.gets) error(waiter.fd, s.failure);
    s.gets.clear();
    for (auto& [name, waiters] : s.barriers) {
      for (auto& waiter : waiters) error(waiter.fd, s.failure);
    }
    s.barriers.clear();
  };
  auto depart = [&](int fd, bool clean) {
    auto& participant = s.participants.at(fd);
    if (!participant.left && !participant.name.empty()) {
      participant.left = true;
      ++s.departures;
      if (!clean) fail_all("participant " + participant.name + " failed: disconnected");
    }
    s.changed.notify_all();
  };
  auto handle = [&](int fd, const json& request) {
    auto& participant = s.participants.at(fd);
    const std::string op = request.value("op", "");
    if (participant.name.empty()) {
      if (op != "hello" || request.value("token", "") != token_) {
        error(fd, op == "hello" ? "bad token" : "first request must be hello");
        return false;
      }
      std::string name = request.value("role", "?") + "/" + std::to_string(request.value("index", -1));
      for (auto& [other_fd, other] : s.participants) {
        if (other.name == name) {
          error(fd, "duplicate participant " + name);
          return false;
        }
      }
      participant.name = name;
      ++s.hellos;
      reply(fd, {{"ok", true}});
      return true;
    }
    if (op == "bye") {
      reply(fd, {{"ok", true}});
      depart(fd, true);
      return true;
    }
    if (op == "fail") {
      depart(fd, true);
      fail_all("participant " + participant.name + " failed: " + request.value("reason", "unknown"));
      return true;
    }
    if (!s.failure.empty()) {
      error(fd, s.failure);
      return true;
    }
    const int timeout_ms = request.value("timeout_ms", 0);
    if (op == "put") {
      const std::string key = request.value("key", "");
      if (!s.values.emplace(key, request.value("value", json())).second) {
        error(fd, "key " + key + " was already put");
        return true;
      }
      reply(fd, {{"ok", true}});
      for (auto it = s.gets.begin(); it != s.gets.end();) {
        if (it->key == key) {
          reply(it->fd, {{"ok", true}, {"value", s.values[key]}});
          it = s.gets.erase(it);
        } else {
          ++it;
        }
      }
    } else if (op == "get") {
      const std::string key = request.value("key", "");
      if (auto found = s.values.find(key); found != s.values.end()) {
        reply(fd, {{"ok", true}, {"value", found->second}});
      } else {
        s.gets.push_back({fd, key, DeadlineAfterMs(timeout_ms), timeout_ms});
      }
    } else if (op == "barrier") {
      const std::string name = request.value("name", "");
      auto& waiters = s.barriers[name];
      waiters.push_back({fd, name, DeadlineAfterMs(timeout_ms), timeout_ms});
      s.barrier_counts[name] = request.value("count", 1);
      if (static_cast<int>(waiters.size()) >= s.barrier_counts[name]) {
        for (auto& waiter : waiters) reply(waiter.fd, {{"ok", true}});
        s.barriers.erase(name);
      }
    } else {
      error(fd, "unknown op '" + op + "': valid ops are hello, put, get, barrier, fail, bye");
    }
    return true;
  };
  auto expire = [&] {
    const std::uint64_t now = MonotonicNs();
    std::uint64_t next = now + 1'000'000'000ull;
    for (auto it = s.gets.begin(); it != s.gets.end();) {
      if (it->deadline_ns <= now) {
        error(it->fd, "timeout after " + std::to_string(it->timeout_ms) + " ms waiting for key " + it->key);
        it = s.gets.erase(it);
      } else {
        next = std::min(next, it->deadline_ns);
        ++it;
      }
    }
    for (auto it = s.barriers.begin(); it != s.barriers.end();) {
      auto& waiters = it->second;
      for (auto w = waiters.begin(); w != waiters.end();) {
        if (w->deadline_ns <= now) {
          error(w->fd, "timeout after " + std::to_string(w->timeout_ms) + " ms at barrier " + it->first + ": " +
                           std::to_string(waiters.size()) + " of " + std::to_string(s.barrier_counts[it->first]) +
                           " arrived");
          w = waiters.erase(w);
        } else {
          next = std::min(next, w->deadline_ns);
          ++w;
        }
      }
      it = waiters.empty() ? s.barriers.erase(it) : std::next(it);
    }
    return MsUntil(next);
  };

  for (;;) {
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int wait_ms;
    {
      std::lock_guard lock(s.mutex);
      if (s.stopping) return;
      for (auto& [fd, participant] : s.participants) {
        if (!participant.left) fds.push_back({fd, POLLIN, 0});
      }
      wait_ms = expire();
    }
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) return;
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    if (fds[1].revents & POLLIN) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s.participants[fd] = {};
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      auto& participant = s.participants.at(fd);
      char chunk[4096];
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        depart(fd, false);
        continue;
      }
      participant.buffer.append(chunk, static_cast<std::size_t>(n));
      for (auto newline = participant.buffer.find('\n'); newline != std::string::npos && !participant.left;
           newline = participant.buffer.find('\n')) {
        const json request = json::parse(participant.buffer.substr(0, newline), nullptr, false);
        participant.buffer.erase(0, newline + 1);
        if (request.is_discarded() || !request.is_object()) {
          error(fd, "malformed request: expected one JSON object per line");
          continue;
        }
        if (!handle(fd, request)) {
          participant.left = true;  // refused hello: not a participant, just drop it
          shutdown(fd, SHUT_RDWR);
        }
      }
    }
  }
}

}  // namespace rdmalab
