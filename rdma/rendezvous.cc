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
#include <cstdio>
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

bool RendezvousClient::ClosedByServer(int wait_ms) const {
  if (fd_ < 0) return true;
  pollfd watched{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&watched, 1, wait_ms) <= 0) return false;
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void RendezvousClient::Bye() {
  Call({{"op", "bye"}}, 0);
  close(fd_);
  fd_ = -1;
}

// ---- server ---------------------------------------------------------------------------
// Answers exactly as harness/rendezvous.py does, refusals worded alike (docs/contracts.md,
// contract 2; tests/python/test_rendezvous_replay.py replays recorded exchanges against both).

namespace {

constexpr std::size_t kMaxLineBytes = 1 << 20;  // as harness/rendezvous.py: a QP-info value is a few hundred bytes
constexpr std::uint64_t kDefaultWaitMs = 60'000;  // a get or barrier without timeout_ms
constexpr const char* kOps = "hello, put, get, barrier, bye, fail";

json Field(const json& request, const char* name) {
  const auto found = request.find(name);
  return found == request.end() ? json() : *found;
}

// How Python's repr() shows a JSON value, so that refusals naming a bad field read the same from both servers.
std::string PyRepr(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "None";
    case json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      const char quote = text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
      std::string out(1, quote);
      for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == quote || c == '\\') {
          out += '\\';
          out += c;
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c == '\t') {
          out += "\\t";
        } else if (byte < 0x20 || byte == 0x7f) {
          char escaped[5];
          std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
          out += escaped;
        } else {
          out += c;
        }
      }
      return out + quote;
    }
    case json::value_t::array: {
      std::string out = "[";
      for (const auto& item : value) out += (out.size() > 1 ? ", " : "") + PyRepr(item);
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{";
      for (const auto& [key, item] : value.items()) {
        out += (out.size() > 1 ? ", " : "") + PyRepr(key) + ": " + PyRepr(item);
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

// Python's type(value).__name__ for a parsed JSON value.
const char* PyTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "NoneType";
    case json::value_t::boolean: return "bool";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "int";
    case json::value_t::number_float: return "float";
    case json::value_t::string: return "str";
    case json::value_t::array: return "list";
    default: return "dict";
  }
}

std::uint64_t DeadlineAfterWaitMs(std::uint64_t timeout_ms) {
  const std::uint64_t now = MonotonicNs();
  const std::uint64_t limit = (~std::uint64_t{0} - now) / 1'000'000ull;
  return now + std::min(timeout_ms, limit) * 1'000'000ull;
}

// A request's timeout_ms (60 s when absent); false when it is not a non-negative integer.
bool TimeoutMs(const json& request, std::uint64_t& timeout_ms) {
  const json value = request.contains("timeout_ms") ? request.at("timeout_ms") : json(kDefaultWaitMs);
  if (!value.is_number_unsigned()) return false;
  timeout_ms = value.get<std::uint64_t>();
  return true;
}

}  // namespace

struct RendezvousServer::State {
  struct Participant {
    std::string name;  // ROLE/INDEX once hello'd
    std::string buffer;
    bool left = false;     // bye, fail, refused or gone: nothing more is read or answered
    bool eof = false;      // the participant closed its end; the lines it sent before still count
    bool waiting = false;  // a get or barrier is unanswered: later requests wait, replies stay in order
  };
  struct Waiter {
    int fd;
    std::string key;  // get: key; barrier: name
    std::uint64_t deadline_ns;
    std::uint64_t timeout_ms;
  };
  struct Barrier {
    std::uint64_t count;  // every participant at the barrier gave it
    std::vector<Waiter> waiters;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, Participant> participants;
  std::map<std::string, json> values;
  std::map<std::string, std::string> owners;  // key -> ROLE/INDEX that put it
  std::vector<Waiter> gets;
  std::map<std::string, Barrier> barriers;  // only those someone waits at
  std::string failure;
  bool stopping = false;
  int hellos = 0;
  int departures = 0;

  explicit State(std::string server_token) : token(std::move(server_token)) {}

  // Serve's steps, each under `mutex`.
  void Reply(int fd, const json& message) { WriteAll(fd, message.dump() + "\n"); }
  void Error(int fd, const std::string& text) { Reply(fd, {{"ok", false}, {"error", text}}); }
  void Answer(int fd, const json& message);
  void AbortPoint(const std::string& who, const std::string& reason);
  void EndConnection(int fd, bool clean);
  void Hello(int fd, const json& request);
  void Put(int fd, const json& request);
  void Get(int fd, const json& request);
  void Meet(int fd, const json& request);
  void Handle(int fd, const std::string& line);
  bool Drain(int fd);
  int Expire();
  int Settle();
  void WatchReadable(std::vector<pollfd>& fds) const;
  void Accept(int listen_fd);
  void Receive(int fd);

  const std::string token;
};

RendezvousServer::RendezvousServer(const std::string& bind_address, std::uint16_t port, std::string token)
    : state_(std::make_unique<State>(std::move(token))) {
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


// Answers the wait of `fd`; its next request may run.
void RendezvousServer::State::Answer(int fd, const json& message) {
  Reply(fd, message);
  participants.at(fd).waiting = false;
}

void RendezvousServer::State::AbortPoint(const std::string& who, const std::string& reason) {
  if (failure.empty()) failure = "participant " + who + " failed: " + reason;
  for (auto& waiter : gets) Answer(waiter.fd, {{"ok", false}, {"error", failure}});
  gets.clear();
  for (auto& [name, barrier] : barriers) {
    for (auto& waiter : barrier.waiters) Answer(waiter.fd, {{"ok", false}, {"error", failure}});
  }
  barriers.clear();
}

// Ends a connection after its last reply; one that was a participant and ends unclean aborts the point.
void RendezvousServer::State::EndConnection(int fd, bool clean) {
  auto& participant = participants.at(fd);
  if (participant.left) return;
  participant.left = true;
  shutdown(fd, SHUT_RDWR);
  if (!participant.name.empty()) {
    ++departures;
    if (!clean) AbortPoint(participant.name, "disconnected");
  }
  changed.notify_all();
}

void RendezvousServer::State::Hello(int fd, const json& request) {
  auto& participant = participants.at(fd);
  const json token_field = Field(request, "token"), role = Field(request, "role"), index = Field(request, "index");
  std::string refusal;
  std::string name;
  if (!token_field.is_string() || token_field.get_ref<const std::string&>() != token) {
    refusal = "bad token";
  } else if (!role.is_string() || role.get_ref<const std::string&>().empty()) {
    refusal = "hello needs a non-empty string role, got " + PyRepr(role);
  } else if (!index.is_number_unsigned()) {
    refusal = "hello needs a non-negative integer index, got " + PyRepr(index);
  } else {
    name = role.get<std::string>() + "/" + index.dump();
    for (auto& [other_fd, other] : participants) {
      if (other.name == name) refusal = "duplicate participant " + name;
    }
  }
  if (!refusal.empty()) {
    Error(fd, refusal);
    EndConnection(fd, true);  // not a participant: nothing to abort
    return;
  }
  participant.name = name;
  ++hellos;
  Reply(fd, {{"ok", true}});
}

void RendezvousServer::State::Put(int fd, const json& request) {
  const json key = Field(request, "key");
  if (!key.is_string()) return Error(fd, "put needs a string key, got " + PyRepr(key));
  const std::string& k = key.get_ref<const std::string&>();
  if (!request.contains("value")) return Error(fd, "put of key " + k + " has no value");
  if (!failure.empty()) return Error(fd, failure);
  if (values.count(k) != 0) return Error(fd, "key " + k + " already put by " + owners[k]);
  values[k] = request.at("value");
  owners[k] = participants.at(fd).name;
  Reply(fd, {{"ok", true}});
  for (auto it = gets.begin(); it != gets.end();) {
    if (it->key == k) {
      Answer(it->fd, {{"ok", true}, {"value", values[k]}});
      it = gets.erase(it);
    } else {
      ++it;
    }
  }
}

void RendezvousServer::State::Get(int fd, const json& request) {
  const json key = Field(request, "key");
  if (!key.is_string()) return Error(fd, "get needs a string key, got " + PyRepr(key));
  std::uint64_t timeout_ms = 0;
  if (!TimeoutMs(request, timeout_ms)) {
    return Error(fd, "timeout_ms must be a non-negative integer, got " + PyRepr(Field(request, "timeout_ms")));
  }
  if (!failure.empty()) return Error(fd, failure);
  const std::string& k = key.get_ref<const std::string&>();
  if (auto found = values.find(k); found != values.end()) {
    return Reply(fd, {{"ok", true}, {"value", found->second}});
  }
  gets.push_back({fd, k, DeadlineAfterWaitMs(timeout_ms), timeout_ms});
  participants.at(fd).waiting = true;
}

// A barrier request: waits until `count` participants have met at the name.
void RendezvousServer::State::Meet(int fd, const json& request) {
  const json name_field = Field(request, "name"), count_field = Field(request, "count");
  if (!name_field.is_string()) return Error(fd, "barrier needs a string name, got " + PyRepr(name_field));
  const std::string& name = name_field.get_ref<const std::string&>();
  if (!count_field.is_number_unsigned() || count_field.get<std::uint64_t>() < 1) {
    return Error(fd, "barrier " + name + " needs a positive integer count, got " + PyRepr(count_field));
  }
  const std::uint64_t count = count_field.get<std::uint64_t>();
  std::uint64_t timeout_ms = 0;
  if (!TimeoutMs(request, timeout_ms)) {
    return Error(fd, "timeout_ms must be a non-negative integer, got " + PyRepr(Field(request, "timeout_ms")));
  }
  if (!failure.empty()) return Error(fd, failure);
  auto [it, fresh] = barriers.try_emplace(name, Barrier{count, {}});
  auto& at = it->second;
  if (!fresh && at.count != count) {
    return Error(fd, "barrier " + name + ": count " + std::to_string(count) + " differs from " +
                         std::to_string(at.count) + " given by the others");
  }
  if (at.waiters.size() + 1 >= count) {  // the last arrival opens this generation; the name can be met again
    for (auto& waiter : at.waiters) Answer(waiter.fd, {{"ok", true}});
    barriers.erase(it);
    return Reply(fd, {{"ok", true}});
  }
  at.waiters.push_back({fd, name, DeadlineAfterWaitMs(timeout_ms), timeout_ms});
  participants.at(fd).waiting = true;
}

void RendezvousServer::State::Handle(int fd, const std::string& line) {
  auto& participant = participants.at(fd);
  const json request = json::parse(line, nullptr, false);
  if (request.is_discarded()) return Error(fd, "bad JSON: expected one JSON object per line");
  if (!request.is_object()) return Error(fd, std::string("expected a JSON object, got ") + PyTypeName(request));
  const json op = Field(request, "op");
  if (participant.name.empty() && op != "hello") {
    Error(fd, "first message must be hello, got op " + PyRepr(op));
    return EndConnection(fd, true);
  }
  if (op == "hello") {
    if (!participant.name.empty()) return Error(fd, "second hello on the connection of " + participant.name);
    return Hello(fd, request);
  }
  if (op == "bye") {
    Reply(fd, {{"ok", true}});
    return EndConnection(fd, true);
  }
  if (op == "fail") {
    const json reason = Field(request, "reason");
    std::string why = reason.is_string() ? reason.get<std::string>() : PyRepr(reason);  // Python's str()
    if (!request.contains("reason")) why = "no reason given";
    AbortPoint(participant.name, why);
    Reply(fd, {{"ok", true}});
    return EndConnection(fd, true);
  }
  if (op == "put") return Put(fd, request);
  if (op == "get") return Get(fd, request);
  if (op == "barrier") return Meet(fd, request);
  Error(fd, "unknown op " + PyRepr(op) + "; valid: " + kOps);
}

// Runs the requests a connection has sent, one at a time: each waits until the one before is answered.
bool RendezvousServer::State::Drain(int fd) {
  auto& participant = participants.at(fd);
  bool progressed = false;
  while (!participant.left && !participant.waiting) {
    auto newline = participant.buffer.find('\n');
    if ((newline == std::string::npos ? participant.buffer.size() : newline) > kMaxLineBytes) {
      Error(fd, "line longer than " + std::to_string(kMaxLineBytes) + " bytes");
      EndConnection(fd, false);
      return true;
    }
    if (newline == std::string::npos) {
      if (!participant.eof) break;
      if (participant.buffer.empty()) {
        EndConnection(fd, false);
        return true;
      }
      newline = participant.buffer.size();  // a last line without its newline still counts
      participant.buffer += '\n';
    }
    const std::string line = participant.buffer.substr(0, newline);
    participant.buffer.erase(0, newline + 1);
    Handle(fd, line);
    progressed = true;
  }
  return progressed;
}

// Refuses the gets and barrier waits past their deadline; returns the ms until the next one.
int RendezvousServer::State::Expire() {
  const std::uint64_t now = MonotonicNs();
  std::uint64_t next = now + 1'000'000'000ull;
  for (auto it = gets.begin(); it != gets.end();) {
    if (it->deadline_ns <= now) {
      Answer(it->fd, {{"ok", false},
                      {"error", "timeout after " + std::to_string(it->timeout_ms) + " ms waiting for key " + it->key}});
      it = gets.erase(it);
    } else {
      next = std::min(next, it->deadline_ns);
      ++it;
    }
  }
  for (auto it = barriers.begin(); it != barriers.end();) {
    auto& waiters = it->second.waiters;
    for (auto w = waiters.begin(); w != waiters.end();) {
      if (w->deadline_ns <= now) {
        Answer(w->fd, {{"ok", false},
                       {"error", "timeout after " + std::to_string(w->timeout_ms) + " ms at barrier " + it->first +
                                     ": " + std::to_string(waiters.size()) + " of " +
                                     std::to_string(it->second.count) + " arrived"}});
        w = waiters.erase(w);
      } else {
        next = std::min(next, w->deadline_ns);
        ++w;
      }
    }
    it = waiters.empty() ? barriers.erase(it) : std::next(it);
  }
  return MsUntil(next);
}

// Answers what is due and runs what can run, until nothing changes; returns the ms until the next deadline.
int RendezvousServer::State::Settle() {
  for (;;) {
    const int wait_ms = Expire();
    bool progressed = false;
    for (auto& [fd, participant] : participants) progressed = Drain(fd) || progressed;
    if (!progressed) return wait_ms;
  }
}

// A waiting connection's next lines queue up to one line's worth, as the Python server's reader does.
void RendezvousServer::State::WatchReadable(std::vector<pollfd>& fds) const {
  for (auto& [fd, participant] : participants) {
    if (!participant.left && !participant.eof && participant.buffer.size() <= kMaxLineBytes) {
      fds.push_back({fd, POLLIN, 0});
    }
  }
}

void RendezvousServer::State::Accept(int listen_fd) {
  const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  participants[fd] = {};
}

void RendezvousServer::State::Receive(int fd) {
  auto& participant = participants.at(fd);
  char chunk[4096];
  const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    // Gone. Lines it sent before still run (Settle); with none left a waiting participant's
    // end aborts the point now, not at its deadline.
    participant.eof = true;
    if (participant.buffer.empty()) EndConnection(fd, false);
    return;
  }
  participant.buffer.append(chunk, static_cast<std::size_t>(n));
}

void RendezvousServer::Serve() {
  State& s = *state_;
  for (;;) {
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int wait_ms;
    {
      std::lock_guard lock(s.mutex);
      if (s.stopping) return;
      wait_ms = s.Settle();
      s.WatchReadable(fds);
    }
    if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) return;
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    if (fds[1].revents & POLLIN) s.Accept(listen_fd_);
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) s.Receive(fds[i].fd);
    }
  }
}

}  // namespace rdmalab
