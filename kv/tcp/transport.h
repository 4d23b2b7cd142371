// The client core's transport (client_core.h) over TCP, for any codec (codec.h). With
// --pipeline the window's W requests share one connection and their replies come back in
// order; without it each window slot has a connection of its own with one request in
// flight, as W independent clients would. Sockets are non-blocking with TCP_NODELAY.
//
// Hot path (Issue, Poll): no allocation (buffers sized at setup for the window's requests
// and replies), no lock, and no syscall but send, recv and epoll_wait. Requests pipelined
// on one connection are sent by the next Poll, so the requests a Poll's replies released
// leave in one send; a connection of one slot sends at once, having nothing to batch.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "kv/core/client_core.h"
#include "kv/core/options.h"
#include "kv/tcp/codec.h"
#include "kv/tcp/socket.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {

template <typename Codec>
class TcpTransport {
 public:
  static constexpr bool kLosesMessages = false;
  TcpTransport(const Endpoint& endpoint, const Options& o);

  void Issue(const Request& request) {
    Connection& c = connections_[pipeline_ ? 0 : SlotOf(request.id)];
    if (c.pending_count == c.pending.size()) Overfull(request);
    if (c.out_tail + request_bytes_ > c.out.size()) {
      std::memmove(c.out.data(), c.out.data() + c.out_head, c.out_tail - c.out_head);
      c.out_tail -= c.out_head;
      c.out_head = 0;
    }
    std::uint8_t* at = c.out.data() + c.out_tail;
    c.out_tail += request.get ? Codec::EncodeGet(at, request.key_index, key_bytes_)
                              : Codec::EncodeSet(at, request.key_index, key_bytes_, request.value, request.value_bytes);
    c.pending[(c.pending_head + c.pending_count) % c.pending.size()] = {request.id, request.get, request.key_index};
    ++c.pending_count;
    if (!pipeline_) Flush(c);
  }

  // TCP delivers what it accepted, in order, or the connection fails and the run with it:
  // the request is still on its way or answered, and sending it again would only put a
  // second reply where the next request's belongs (kLosesMessages: the core never calls this).
  void Resend(const Request&) {}

  int Poll(Response* out, int max) {
    // The values the previous Poll handed out have been read: their bytes may go.
    for (auto& c : connections_) {
      if (c.in_head == 0) continue;
      std::memmove(c.in.data(), c.in.data() + c.in_head, c.in_tail - c.in_head);
      c.in_tail -= c.in_head;
      c.in_head = 0;
    }
    if (pipeline_) {
      Connection& c = connections_.front();
      if (c.out_tail != c.out_head) Flush(c);
      if (c.pending_count != 0) Receive(c);
      return Parse(c, out, max);
    }
    const int ready = epoll_wait(epoll_.get(), events_.data(), static_cast<int>(events_.size()), 0);
    if (ready < 0 && errno != EINTR) SocketFailed(connections_.front(), "epoll_wait");
    for (int i = 0; i < ready; ++i) Receive(connections_[events_[i].data.u32]);
    int n = 0;
    for (auto& c : connections_) {
      if (n == max) break;
      if (c.in_tail != c.in_head) n += Parse(c, out + n, max - n);
    }
    return n;
  }

 private:
  struct Pending {
    std::uint32_t id;
    bool get;
    std::uint64_t key_index;
  };
  struct Connection {
    FileDescriptor fd;
    std::vector<std::uint8_t> out, in;
    std::size_t out_head = 0, out_tail = 0, in_head = 0, in_tail = 0;
    std::vector<Pending> pending;  // a ring, in the order the requests were encoded
    std::size_t pending_head = 0, pending_count = 0;
  };

  void Flush(Connection& c) {
    const ssize_t n = send(c.fd.get(), c.out.data() + c.out_head, c.out_tail - c.out_head, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) SocketFailed(c, "send");
      return;
    }
    c.out_head += static_cast<std::size_t>(n);
    if (c.out_head == c.out_tail) c.out_head = c.out_tail = 0;
  }

  void Receive(Connection& c) {
    const ssize_t n = recv(c.fd.get(), c.in.data() + c.in_tail, c.in.size() - c.in_tail, 0);
    if (n > 0) {
      c.in_tail += static_cast<std::size_t>(n);
    } else if (n == 0) {
      Closed(c);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      SocketFailed(c, "recv");
    }
  }

  int Parse(Connection& c, Response* out, int max) {
    int n = 0;
    while (n < max && c.in_head != c.in_tail) {
      if (c.pending_count == 0) Unexpected(c);
      const Pending& p = c.pending[c.pending_head];
      const Reply reply = Codec::Parse(c.in.data() + c.in_head, c.in_tail - c.in_head, p.get);
      if (reply.status == ReplyStatus::kIncomplete) {
        if (c.in_head == 0 && c.in_tail == c.in.size()) BadReply(c, p, "a reply longer than the receive buffer: ");
        break;
      }
      if (reply.status == ReplyStatus::kError) BadReply(c, p, "");
      Response& r = out[n++];
      r.id = p.id;
      r.found = reply.status == ReplyStatus::kHit || reply.status == ReplyStatus::kStored;
      r.value = reply.value;
      r.value_bytes = reply.value_bytes;
      c.in_head += reply.bytes;
      c.pending_head = (c.pending_head + 1) % c.pending.size();
      --c.pending_count;
    }
    return n;
  }

  [[noreturn, gnu::cold, gnu::noinline]] void BadReply(const Connection& c, const Pending& p, const char* what) {
    Fail(endpoint_.Describe(), " answered the ", p.get ? "GET" : "SET", " of key '",
         KeyText(p.key_index, key_bytes_), "' with ", what, Codec::Describe(c.in.data() + c.in_head, c.in_tail - c.in_head),
         " (", Codec::kName, ")");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void Unexpected(const Connection& c) {
    Fail(endpoint_.Describe(), " sent ", Codec::Describe(c.in.data() + c.in_head, c.in_tail - c.in_head),
         " with no request outstanding (", Codec::kName, ")");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void Closed(const Connection& c) {
    Fail(endpoint_.Describe(), " closed a connection with ", c.pending_count, " requests unanswered");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void SocketFailed(const Connection&, const char* call) {
    Fail(call, " on a connection to ", endpoint_.Describe(), ": ", std::strerror(errno));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void Overfull(const Request& request) {
    Fail("request ", request.id, " issued while its connection already holds ", connections_.size() == 1 ? window_ : 1,
         " unanswered (more than the window)");
  }

  Endpoint endpoint_;
  std::uint32_t key_bytes_;
  std::uint32_t window_;
  bool pipeline_;
  std::size_t request_bytes_;
  std::vector<Connection> connections_;
  FileDescriptor epoll_;
  std::vector<epoll_event> events_;
};

template <typename Codec>
TcpTransport<Codec>::TcpTransport(const Endpoint& endpoint, const Options& o)
    : endpoint_(endpoint),
      key_bytes_(static_cast<std::uint32_t>(o.key_size)),
      window_(static_cast<std::uint32_t>(o.window)),
      pipeline_(o.pipeline) {
  const std::uint32_t value_bytes = static_cast<std::uint32_t>(o.value_size);
  const std::size_t per_connection = pipeline_ ? window_ : 1;
  request_bytes_ = Codec::RequestBytes(key_bytes_, value_bytes);
  connections_.resize(pipeline_ ? 1 : window_);
  if (!pipeline_) {
    epoll_ = FileDescriptor(epoll_create1(EPOLL_CLOEXEC));
    if (epoll_.get() < 0) FailErrno("epoll_create1", errno);
    events_.resize(connections_.size());
  }
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    Connection& c = connections_[i];
    c.fd = Connect(endpoint_);
    SetNonBlocking(c.fd.get());
    c.out.resize(per_connection * request_bytes_);
    c.in.resize(per_connection * Codec::ReplyBytes(key_bytes_, value_bytes) + kMaxReplyLineBytes);
    c.pending.resize(per_connection);
    if (!pipeline_) {
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u32 = static_cast<std::uint32_t>(i);
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &event) != 0) FailErrno("epoll_ctl(ADD)", errno);
    }
  }
}

}  // namespace rdmalab::kv::tcp
