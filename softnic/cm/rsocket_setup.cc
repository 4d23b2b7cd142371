// rsockets: descriptors, addresses, connection setup and teardown, options (rsocket.h).
// Control path: runs once per connection, never per message.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "softnic/cm/rsocket.h"

namespace softnic::cm::rs {
namespace {

// Indexed by descriptor: the entry points look a socket up with one load.
std::atomic<Socket*> g_sockets[kMaxDescriptors];

Socket* NewSocket(int domain, rdma_event_channel* channel) {
  if (channel->fd >= kMaxDescriptors) {
    std::fprintf(stderr, "softnic rsockets: descriptor %d is above the %d rsockets can name\n", channel->fd,
                 kMaxDescriptors);
    rdma_destroy_event_channel(channel);
    errno = EMFILE;
    return nullptr;
  }
  const int flags = fcntl(channel->fd, F_GETFL);
  fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK);  // the socket's own waits poll() it
  auto* s = new Socket;
  s->fd = channel->fd;
  s->domain = domain;
  s->channel = channel;
  return s;
}

void Publish(Socket* s) { g_sockets[s->fd].store(s, std::memory_order_release); }

}  // namespace

int CreateCompletions(Socket* s, ibv_context* context, int depth) {
  s->completions = ibv_create_comp_channel(context);
  if (s->completions == nullptr) return -1;
  fcntl(s->completions->fd, F_SETFL, fcntl(s->completions->fd, F_GETFL) | O_NONBLOCK);
  s->cq = ibv_create_cq(context, depth, s, s->completions, 0);
  return s->cq == nullptr ? -1 : 0;
}

ibv_qp_init_attr SocketQpAttr(const Socket* s, ibv_qp_type type, uint32_t send_wrs, uint32_t recv_wrs) {
  ibv_qp_init_attr attr{};
  attr.send_cq = s->cq;
  attr.recv_cq = s->cq;
  attr.qp_type = type;
  attr.cap.max_send_wr = send_wrs;
  attr.cap.max_recv_wr = recv_wrs;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = kInlineBytes;
  return attr;
}

int PostSlotRecv(const Socket* s, ibv_qp* qp, uint32_t slot, const void* at, uint32_t bytes) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(at), bytes, s->mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

namespace {

// The connection's CQ, QP and buffer, its receives posted; credits from the peer's info.
int SetUpConnection(Socket* s, const ConnectInfo* peer) {
  if (CreateCompletions(s, s->id->verbs, kCqDepth) != 0) return -1;
  ibv_qp_init_attr attr = SocketQpAttr(s, IBV_QPT_RC, kSqDepth, kPostedRecvs);
  if (rdma_create_qp(s->id, s->id->pd, &attr) != 0) return -1;
  s->buffer_bytes = (kSendSlots + kPostedRecvs) * kSlotBytes;
  void* buffer = mmap(nullptr, s->buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return -1;
  s->buffer = static_cast<uint8_t*>(buffer);
  s->mr = ibv_reg_mr(s->id->pd, s->buffer, s->buffer_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (s->mr == nullptr) return -1;
  for (uint32_t slot = 0; slot < kPostedRecvs; ++slot) {
    if (PostRecv(s, slot) != 0) return -1;
  }
  if (peer != nullptr) s->credits = peer->posted_recvs;
  return 0;
}

bool ValidInfo(const void* data, uint8_t length, ConnectInfo* info) {
  if (data == nullptr || length < sizeof(ConnectInfo)) return false;
  std::memcpy(info, data, sizeof(*info));
  return info->magic == kConnectMagic && info->slot_bytes == kSlotBytes && info->posted_recvs >= kControlRecvs + 1;
}

rdma_conn_param ConnParam(const ConnectInfo* info) {
  rdma_conn_param param{};
  param.private_data = info;
  param.private_data_len = sizeof(*info);
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // a control message that finds no receive waits for one
  return param;
}

void TearDown(Socket* s) {
  for (IoMap& map : s->local_maps) ibv_dereg_mr(map.mr);
  s->local_maps.clear();
  if (s->id != nullptr && s->id->qp != nullptr) rdma_destroy_qp(s->id);
  if (s->mr != nullptr) ibv_dereg_mr(s->mr);
  if (s->buffer != nullptr) munmap(s->buffer, s->buffer_bytes);
  if (s->cq != nullptr) ibv_destroy_cq(s->cq);
  if (s->completions != nullptr) ibv_destroy_comp_channel(s->completions);
  s->mr = nullptr;
  s->buffer = nullptr;
  s->cq = nullptr;
  s->completions = nullptr;
}

// Ends an unaccepted request: the peer's connect fails as if refused.
void Refuse(rdma_cm_event* request) {
  rdma_cm_id* child = request->id;
  rdma_reject(child, nullptr, 0);
  rdma_ack_cm_event(request);
  rdma_destroy_id(child);
}

void Destroy(Socket* s) {
  g_sockets[s->fd].store(nullptr, std::memory_order_release);
  for (rdma_cm_event* request : s->backlog) Refuse(request);
  s->backlog.clear();
  if (s->dgram) {
    DgramTearDown(s);
  } else {
    TearDown(s);
  }
  if (s->id != nullptr) rdma_destroy_id(s->id);
  rdma_destroy_event_channel(s->channel);
  delete s;
}

int WaitConnected(Socket* s, std::unique_lock<std::mutex>& lock) {
  const int64_t deadline = NowMs() + kConnectWaitMs;
  while (s->phase == Phase::kConnecting) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) {
      s->phase = Phase::kFailed;
      s->so_error = ETIMEDOUT;
      break;
    }
    lock.unlock();
    pollfd p{s->fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(left));
    lock.lock();
    PumpEvents(s);
  }
  if (s->phase == Phase::kConnected) return 0;
  const int error = s->so_error != 0 ? s->so_error : ECONNREFUSED;
  s->so_error = 0;
  return Fail(error);
}

int SockoptInt(const void* value, socklen_t length, int* out) {
  if (value == nullptr || length < sizeof(int)) return Fail(EINVAL);
  std::memcpy(out, value, sizeof(int));
  return 0;
}

int SockoptTimeout(const void* value, socklen_t length, int64_t* out_ms) {
  if (value == nullptr || length < sizeof(timeval)) return Fail(EINVAL);
  timeval t;
  std::memcpy(&t, value, sizeof(t));
  if (t.tv_sec < 0 || t.tv_usec < 0 || t.tv_usec >= 1000000) {
    std::fprintf(stderr, "softnic rsockets: socket timeout {%ld s, %ld us} is not valid\n", static_cast<long>(t.tv_sec),
                 static_cast<long>(t.tv_usec));
    return Fail(EDOM);  // as Linux answers
  }
  // Rounded up to the millisecond the waits count in, so that a short timeout is no timeout.
  *out_ms = static_cast<int64_t>(t.tv_sec) * 1000 + (t.tv_usec + 999) / 1000;
  return 0;
}

int PutTimeout(int64_t ms, void* out, socklen_t* length) {
  if (out == nullptr || length == nullptr || *length < sizeof(timeval)) return Fail(EINVAL);
  const timeval t{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  std::memcpy(out, &t, sizeof(t));
  *length = sizeof(t);
  return 0;
}

int PutInt(int value, void* out, socklen_t* length) {
  if (out == nullptr || length == nullptr || *length < sizeof(int)) return Fail(EINVAL);
  std::memcpy(out, &value, sizeof(int));
  *length = sizeof(int);
  return 0;
}

}  // namespace

Socket* Lookup(int fd) {
  return fd >= 0 && fd < kMaxDescriptors ? g_sockets[fd].load(std::memory_order_acquire) : nullptr;
}

Socket* ConnectedDatagramOn(const sockaddr_in& self, const Socket* except) {
  for (auto& slot : g_sockets) {
    Socket* s = slot.load(std::memory_order_acquire);
    if (s != nullptr && s != except && s->dgram && s->dgram->has_peer && s->id != nullptr &&
        s->dgram->self.sin_port == self.sin_port && s->dgram->self.sin_addr.s_addr == self.sin_addr.s_addr) {
      return s;
    }
  }
  return nullptr;
}

Socket* Find(int fd) {
  Socket* s = Lookup(fd);
  if (s == nullptr) errno = EBADF;
  return s;
}

int Fail(int error_number) {
  errno = error_number;
  return -1;
}

int64_t NowMs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// An IPv4 or IPv6 socket address as the IPv4 one softnic's rdma_cm takes: IPv6's
// unspecified and loopback addresses and IPv4-mapped ones have an IPv4 twin; others none.
int ToIpv4(const sockaddr* address, socklen_t length, sockaddr_in* out) {
  if (address == nullptr) return Fail(EINVAL);
  *out = sockaddr_in{};
  out->sin_family = AF_INET;
  if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    *out = *reinterpret_cast<const sockaddr_in*>(address);
    return 0;
  }
  if (address->sa_family != AF_INET6 || length < sizeof(sockaddr_in6)) return Fail(EAFNOSUPPORT);
  const auto* six = reinterpret_cast<const sockaddr_in6*>(address);
  out->sin_port = six->sin6_port;
  if (IN6_IS_ADDR_UNSPECIFIED(&six->sin6_addr)) {
    out->sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (IN6_IS_ADDR_LOOPBACK(&six->sin6_addr)) {
    out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (IN6_IS_ADDR_V4MAPPED(&six->sin6_addr)) {
    std::memcpy(&out->sin_addr.s_addr, &six->sin6_addr.s6_addr[12], 4);
  } else {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, &six->sin6_addr, text, sizeof(text));
    std::fprintf(stderr, "softnic rsockets: %s has no IPv4 twin; a softnic fabric has IPv4 addresses only\n", text);
    return Fail(EAFNOSUPPORT);
  }
  return 0;
}

// An address in the socket's own family, truncated to *length as the kernel does.
int FromIpv4(const sockaddr_in& in, int domain, sockaddr* out, socklen_t* length) {
  if (length == nullptr) return Fail(EINVAL);
  sockaddr_storage full{};
  socklen_t size = sizeof(sockaddr_in);
  if (domain == AF_INET6) {
    auto* six = reinterpret_cast<sockaddr_in6*>(&full);
    six->sin6_family = AF_INET6;
    six->sin6_port = in.sin_port;
    if (in.sin_addr.s_addr != htonl(INADDR_ANY)) {
      six->sin6_addr.s6_addr[10] = 0xff;
      six->sin6_addr.s6_addr[11] = 0xff;
      std::memcpy(&six->sin6_addr.s6_addr[12], &in.sin_addr.s_addr, 4);
    }
    size = sizeof(sockaddr_in6);
  } else {
    *reinterpret_cast<sockaddr_in*>(&full) = in;
    reinterpret_cast<sockaddr_in*>(&full)->sin_family = AF_INET;
  }
  if (out != nullptr) std::memcpy(out, &full, std::min(*length, size));
  *length = size;
  return 0;
}


rdma_cm_event* NextEvent(Socket* s, int timeout_ms) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(s->channel, &event) == 0) return event;
  if (timeout_ms == 0) return nullptr;
  pollfd p{s->fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return nullptr;
  return rdma_get_cm_event(s->channel, &event) == 0 ? event : nullptr;
}

void MaybePumpEvents(Socket* s) {
  const int64_t now = NowNs();
  if (now < s->next_event_look_ns) return;
  s->next_event_look_ns = now + kEventLookIntervalNs;
  PumpEvents(s);
}

void PumpEvents(Socket* s) {
  while (rdma_cm_event* event = NextEvent(s, 0)) {
    switch (event->event) {
      case RDMA_CM_EVENT_CONNECT_REQUEST:
        if (s->dgram) {
          AnswerSidr(s, event);
          continue;
        }
        if (s->phase == Phase::kListening) {
          s->backlog.push_back(event);  // acknowledged when accepted
          continue;
        }
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
        if (s->phase == Phase::kConnecting && s->passive) {
          s->phase = Phase::kConnected;  // the RTU carries nothing: the REQ told us the peer's receives
        } else if (s->phase == Phase::kConnecting) {
          ConnectInfo info;
          if (ValidInfo(event->param.conn.private_data, event->param.conn.private_data_len, &info)) {
            s->credits = info.posted_recvs;
            s->phase = Phase::kConnected;
          } else {  // a plain rdma_cm program listens there, not an rsocket
            s->so_error = ECONNREFUSED;
            s->phase = Phase::kFailed;
          }
        }
        break;
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
        if (s->phase == Phase::kConnecting) {
          s->so_error = event->event == RDMA_CM_EVENT_UNREACHABLE ? ETIMEDOUT : ECONNREFUSED;
          s->phase = Phase::kFailed;
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        s->gone = true;
        break;
      default:
        break;
    }
    rdma_ack_cm_event(event);
  }
}

}  // namespace softnic::cm::rs

using namespace softnic::cm::rs;

extern "C" {

// Other domains and types fail with errno alone, nothing on stderr: librspreload offers every
// socket() a program makes (AF_UNIX, AF_NETLINK, ...) here first and falls back on the refusal.
int rsocket(int domain, int type, int protocol) {
  const int base_type = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6) return Fail(EAFNOSUPPORT);
  const bool stream = base_type == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP);
  const bool datagram = base_type == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP);
  if (!stream && !datagram) return Fail(EPROTONOSUPPORT);
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) return -1;
  Socket* s = NewSocket(domain, channel);
  if (s == nullptr) return -1;
  if (datagram) s->dgram = std::make_unique<Datagram>();
  if (rdma_create_id(channel, &s->id, s, datagram ? RDMA_PS_UDP : RDMA_PS_TCP) != 0) {
    const int saved = errno;
    Destroy(s);
    return Fail(saved);
  }
  s->nonblocking = (type & SOCK_NONBLOCK) != 0;
  Publish(s);
  return s->fd;
}

int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  sockaddr_in in;
  if (ToIpv4(addr, addrlen, &in) != 0) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->phase != Phase::kIdle) return Fail(EINVAL);
  if (s->dgram) return DgramBind(s, in);
  if (rdma_bind_addr(s->id, reinterpret_cast<sockaddr*>(&in)) != 0) return -1;
  s->phase = Phase::kBound;
  return 0;
}

int rlisten(int socket, int backlog) {
  (void)backlog;  // requests wait in the channel, unbounded, until accepted or the listener closes
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->dgram) return Fail(EOPNOTSUPP);
  if (s->phase == Phase::kListening) return 0;
  if (s->phase != Phase::kBound) return Fail(EINVAL);
  if (rdma_listen(s->id, 0) != 0) return -1;
  s->phase = Phase::kListening;
  return 0;
}

int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* listener = Find(socket);
  if (listener == nullptr) return -1;
  rdma_cm_event* request = nullptr;
  {
    std::unique_lock<std::mutex> lock(listener->mutex);
    if (listener->phase != Phase::kListening) return Fail(EINVAL);
    for (;;) {
      PumpEvents(listener);
      if (!listener->backlog.empty()) break;
      if (listener->nonblocking) return Fail(EAGAIN);
      lock.unlock();
      pollfd p{listener->fd, POLLIN, 0};
      poll(&p, 1, -1);  // accept(2) waits as long as it takes
      lock.lock();
    }
    request = listener->backlog.front();
    listener->backlog.pop_front();
  }
  ConnectInfo peer;
  if (!ValidInfo(request->param.conn.private_data, request->param.conn.private_data_len, &peer)) {
    Refuse(request);  // a plain rdma_cm client, not an rsocket
    return Fail(ECONNABORTED);
  }
  rdma_cm_id* child = request->id;
  rdma_ack_cm_event(request);
  rdma_event_channel* channel = rdma_create_event_channel();
  Socket* s = channel != nullptr ? NewSocket(listener->domain, channel) : nullptr;
  if (s == nullptr) {
    rdma_reject(child, nullptr, 0);
    rdma_destroy_id(child);
    return -1;
  }
  s->id = child;
  s->passive = true;
  child->context = s;
  const ConnectInfo mine;
  rdma_conn_param param = ConnParam(&mine);
  std::unique_lock<std::mutex> lock(s->mutex);
  if (rdma_migrate_id(child, channel) != 0 || SetUpConnection(s, &peer) != 0 || rdma_accept(child, &param) != 0) {
    const int saved = errno;
    rdma_reject(child, nullptr, 0);
    lock.unlock();
    Destroy(s);
    return Fail(saved);
  }
  s->phase = Phase::kConnecting;  // until the peer's RTU
  if (WaitConnected(s, lock) != 0) {
    lock.unlock();
    Destroy(s);
    return Fail(ECONNABORTED);
  }
  lock.unlock();
  if (addrlen != nullptr && FromIpv4(child->route.addr.dst_sin, s->domain, addr, addrlen) != 0) {
    Destroy(s);
    return -1;
  }
  Publish(s);
  return s->fd;
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  sockaddr_in in;
  if (ToIpv4(addr, addrlen, &in) != 0) return -1;
  std::unique_lock<std::mutex> lock(s->mutex);
  if (s->dgram) return DgramConnect(s, in);
  if (s->phase == Phase::kConnecting) return Fail(EALREADY);
  if (s->phase == Phase::kConnected) return Fail(EISCONN);
  if (s->phase != Phase::kIdle && s->phase != Phase::kBound) return Fail(EINVAL);
  // Address and route resolution answer at once on a fabric: their events are already queued.
  if (rdma_resolve_addr(s->id, nullptr, reinterpret_cast<sockaddr*>(&in), kConnectWaitMs) != 0) return -1;
  for (rdma_cm_event_type want : {RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED}) {
    rdma_cm_event* event = NextEvent(s, kConnectWaitMs);
    if (event == nullptr) return Fail(ETIMEDOUT);
    const rdma_cm_event_type got = event->event;
    rdma_ack_cm_event(event);
    if (got != want) return Fail(got == RDMA_CM_EVENT_ADDR_ERROR ? EHOSTUNREACH : ECONNREFUSED);
    if (want == RDMA_CM_EVENT_ADDR_RESOLVED && rdma_resolve_route(s->id, kConnectWaitMs) != 0) return -1;
  }
  if (SetUpConnection(s, nullptr) != 0) {
    const int saved = errno;
    TearDown(s);
    return Fail(saved);
  }
  const ConnectInfo mine;
  rdma_conn_param param = ConnParam(&mine);
  if (rdma_connect(s->id, &param) != 0) return -1;
  s->phase = Phase::kConnecting;
  if (s->nonblocking) return Fail(EINPROGRESS);
  return WaitConnected(s, lock);
}

int rshutdown(int socket, int how) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return Fail(EINVAL);
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->dgram) return s->dgram->has_peer ? 0 : Fail(ENOTCONN);  // as UDP: nothing to tell a peer
  if (s->phase != Phase::kConnected) return Fail(ENOTCONN);
  if (how != SHUT_WR) s->read_shut = true;
  if (how != SHUT_RD && !s->fin_sent && !s->gone) {
    Drain(s);
    if (SendControl(s, Kind::kFin, nullptr, 0) != 0) return -1;
    s->fin_sent = true;
  }
  return 0;
}

int rclose(int socket) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  {
    std::unique_lock<std::mutex> lock(s->mutex);
    if (s->phase == Phase::kConnected && !s->gone) {
      Drain(s);
      if (!s->fin_sent && SendControl(s, Kind::kFin, nullptr, 0) == 0) s->fin_sent = true;
      // What was sent reaches the peer, as a TCP close delivers queued data.
      const int64_t deadline = NowMs() + kCloseLingerMs;
      while (!s->gone && (s->sends_done < s->sends_posted || s->controls_in_flight > 0)) {
        if (!Sleep(s, lock, deadline)) break;
        Drain(s);
      }
      rdma_disconnect(s->id);
    }
  }
  Destroy(s);
  return 0;
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->dgram) return s->dgram->has_peer ? FromIpv4(s->dgram->peer, s->domain, addr, addrlen) : Fail(ENOTCONN);
  if (s->phase != Phase::kConnected) return Fail(ENOTCONN);
  return FromIpv4(s->id->route.addr.dst_sin, s->domain, addr, addrlen);
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  return FromIpv4(s->dgram ? s->dgram->self : s->id->route.addr.src_sin, s->domain, addr, addrlen);
}

// Options a program sets are kept and read back; softnic's queue and buffer sizes are fixed
// (rsocket.h), so SO_SNDBUF, SO_RCVBUF and the SOL_RDMA sizes change nothing else.
int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  int value = 0;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (level == SOL_SOCKET) {
    switch (optname) {
      case SO_REUSEADDR: return SockoptInt(optval, optlen, &s->reuseaddr);
      case SO_KEEPALIVE: return SockoptInt(optval, optlen, &s->keepalive);
      case SO_SNDBUF: return SockoptInt(optval, optlen, &s->sndbuf);
      case SO_RCVBUF: return SockoptInt(optval, optlen, &s->rcvbuf);
      case SO_RCVTIMEO: return SockoptTimeout(optval, optlen, &s->rcvtimeo_ms);
      case SO_SNDTIMEO: return SockoptTimeout(optval, optlen, &s->sndtimeo_ms);
      case SO_LINGER:
      case SO_PRIORITY:
      case SO_OOBINLINE:
        return optval == nullptr ? Fail(EINVAL) : 0;
      default: return Fail(ENOPROTOOPT);
    }
  }
  if (level == IPPROTO_TCP) {
    switch (optname) {
      case TCP_NODELAY: return SockoptInt(optval, optlen, &s->nodelay);  // every send goes out at once
      case TCP_MAXSEG:
      case TCP_KEEPIDLE:
      case TCP_KEEPINTVL:
      case TCP_KEEPCNT:
        return SockoptInt(optval, optlen, &value);
      default: return Fail(ENOPROTOOPT);
    }
  }
  if (level == IPPROTO_IPV6 && optname == IPV6_V6ONLY) return SockoptInt(optval, optlen, &s->v6only);
  if (level == SOL_RDMA) {
    switch (optname) {
      case RDMA_SQSIZE:
      case RDMA_RQSIZE:
      case RDMA_INLINE:
      case RDMA_IOMAPSIZE:
        return SockoptInt(optval, optlen, &value);
      default: return Fail(ENOPROTOOPT);
    }
  }
  return Fail(ENOPROTOOPT);
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (level == SOL_SOCKET) {
    switch (optname) {
      case SO_ERROR: {
        const int error = s->so_error;
        s->so_error = 0;
        return PutInt(error, optval, optlen);
      }
      case SO_TYPE: return PutInt(s->dgram ? SOCK_DGRAM : SOCK_STREAM, optval, optlen);
      case SO_DOMAIN: return PutInt(s->domain, optval, optlen);
      case SO_ACCEPTCONN: return PutInt(s->phase == Phase::kListening, optval, optlen);
      case SO_REUSEADDR: return PutInt(s->reuseaddr, optval, optlen);
      case SO_KEEPALIVE: return PutInt(s->keepalive, optval, optlen);
      case SO_SNDBUF: return PutInt(s->sndbuf, optval, optlen);
      case SO_RCVBUF: return PutInt(s->rcvbuf, optval, optlen);
      case SO_RCVTIMEO: return PutTimeout(s->rcvtimeo_ms, optval, optlen);
      case SO_SNDTIMEO: return PutTimeout(s->sndtimeo_ms, optval, optlen);
      default: return Fail(ENOPROTOOPT);
    }
  }
  if (level == IPPROTO_TCP) {
    switch (optname) {
      case TCP_NODELAY: return PutInt(s->nodelay, optval, optlen);
      // The stream has no segments; what a datagram rsocket carries stands in for the MSS, as
      // the kernel's is the path MTU less headers: iperf3 sizes its UDP datagrams by it.
      case TCP_MAXSEG: return PutInt(static_cast<int>(kDgramMaxPayloadBytes), optval, optlen);
      case TCP_INFO: {  // no TCP underneath: an established connection with no retransmits
        if (optval == nullptr || optlen == nullptr) return Fail(EINVAL);
        tcp_info info{};
        info.tcpi_state = s->phase == Phase::kConnected ? TCP_ESTABLISHED : TCP_CLOSE;
        info.tcpi_snd_mss = kDgramMaxPayloadBytes;
        info.tcpi_rcv_mss = kDgramMaxPayloadBytes;
        const socklen_t n = std::min<socklen_t>(*optlen, sizeof(info));
        std::memcpy(optval, &info, n);
        *optlen = n;
        return 0;
      }
      default: return Fail(ENOPROTOOPT);
    }
  }
  if (level == IPPROTO_IPV6 && optname == IPV6_V6ONLY) return PutInt(s->v6only, optval, optlen);
  if (level == SOL_RDMA) {
    switch (optname) {
      case RDMA_SQSIZE: return PutInt(static_cast<int>(kSqDepth), optval, optlen);
      case RDMA_RQSIZE: return PutInt(static_cast<int>(kPostedRecvs), optval, optlen);
      case RDMA_INLINE: return PutInt(static_cast<int>(kInlineBytes), optval, optlen);
      case RDMA_IOMAPSIZE: return PutInt(kMaxIoMaps, optval, optlen);
      default: return Fail(ENOPROTOOPT);
    }
  }
  return Fail(ENOPROTOOPT);
}

int rfcntl(int socket, int cmd, ...) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  va_list args;
  va_start(args, cmd);
  const long arg = va_arg(args, long);
  va_end(args);
  std::lock_guard<std::mutex> lock(s->mutex);
  switch (cmd) {
    case F_GETFL: return O_RDWR | (s->nonblocking ? O_NONBLOCK : 0);
    case F_SETFL: s->nonblocking = (arg & O_NONBLOCK) != 0; return 0;
    case F_GETFD:
    case F_SETFD:
      return fcntl(s->fd, cmd, arg);  // close-on-exec is the descriptor's own
    default:
      std::fprintf(stderr, "softnic rsockets: rfcntl command %d is not supported (F_GETFL, F_SETFL, F_GETFD, "
                   "F_SETFD are)\n", cmd);
      return Fail(EINVAL);
  }
}

}  // extern "C"
