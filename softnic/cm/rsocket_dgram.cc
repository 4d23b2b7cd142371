// rsockets: datagram sockets (SOCK_DGRAM) over a UD QP (rsocket.h, Datagram). Like UDP,
// nothing is retransmitted or flow controlled: a datagram that finds no receive posted at its
// destination is dropped (softnic counts it, dropped_no_recv).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "softnic/cm/internal.h"
#include "softnic/cm/rsocket.h"

namespace softnic::cm::rs {
namespace {

constexpr uint64_t kSendTag = 1ull << 62;  // wr_id of a send; a receive's is its slot
constexpr int kPollBatch = 16;

int PostDgramRecv(Socket* s, uint32_t slot) {
  return PostSlotRecv(s, s->dgram->qp, slot, s->dgram->RecvSlot(s->buffer, slot),
                      static_cast<uint32_t>(kGrhBytes + kDgramSlotBytes));
}

int MoveToRts(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qkey = kDefaultUdQkey;  // what a SIDR REP announces (softnic's rdma_accept)
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) return -1;
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0) return -1;
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

// The socket's CQ, UD QP and buffer on `device`, its receives posted.
int SetUp(Socket* s, int device) {
  Datagram& d = *s->dgram;
  ibv_context* context = GetDevices()->contexts[static_cast<size_t>(device)];
  if (CreateCompletions(s, context, kDgramSendSlots + kDgramRecvSlots) != 0) return -1;
  d.pd = ibv_alloc_pd(context);
  if (d.pd == nullptr) return -1;
  ibv_qp_init_attr attr = SocketQpAttr(s, IBV_QPT_UD, kDgramSendSlots, kDgramRecvSlots);
  d.qp = ibv_create_qp(d.pd, &attr);
  if (d.qp == nullptr || MoveToRts(d.qp) != 0) return -1;
  s->buffer_bytes = kDgramSendSlots * kDgramSlotBytes + kDgramRecvSlots * (kGrhBytes + kDgramSlotBytes);
  void* buffer = mmap(nullptr, s->buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return -1;
  s->buffer = static_cast<uint8_t*>(buffer);
  s->mr = ibv_reg_mr(d.pd, s->buffer, s->buffer_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (s->mr == nullptr) return -1;
  for (uint32_t slot = 0; slot < kDgramRecvSlots; ++slot) {
    if (PostDgramRecv(s, slot) != 0) return -1;
  }
  return 0;
}

int DeviceOfSocket(const Socket* s) {
  const int device = DeviceOfAddress(s->dgram->self.sin_addr.s_addr);
  return device >= 0 ? device : 0;
}

// Resolves `to` by SIDR from this socket's device, answering SIDR requests to this socket
// meanwhile (two sockets resolving each other at once must not wait on each other).
const Destination* Resolve(Socket* s, const sockaddr_in& to, std::unique_lock<std::mutex>& lock) {
  Datagram& d = *s->dgram;
  for (const Destination& known : d.destinations) {
    if (known.address == to.sin_addr.s_addr && known.port == to.sin_port) return &known;
  }
  if (d.destinations.size() >= kMaxDestinations) {
    ibv_destroy_ah(d.destinations.front().ah);
    d.destinations.erase(d.destinations.begin());
  }
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) return nullptr;
  fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_id* id = nullptr;
  const Destination* found = nullptr;
  int error = EHOSTUNREACH;
  if (rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP) == 0) {
    sockaddr_in from = d.self;
    from.sin_port = 0;
    sockaddr_in dst = to;
    const int64_t deadline = NowMs() + kDgramResolveWaitMs;
    bool ok = rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&from), reinterpret_cast<sockaddr*>(&dst),
                                kDgramResolveWaitMs) == 0;
    while (ok && found == nullptr) {
      rdma_cm_event* event = nullptr;
      if (rdma_get_cm_event(channel, &event) != 0) {
        const int64_t left = deadline - NowMs();
        if (left <= 0) {
          error = ETIMEDOUT;
          break;
        }
        pollfd fds[2] = {{channel->fd, POLLIN, 0}, {s->fd, POLLIN, 0}};
        lock.unlock();
        poll(fds, 2, static_cast<int>(left));
        lock.lock();
        PumpEvents(s);
        continue;
      }
      const rdma_cm_event_type type = event->event;
      if (type == RDMA_CM_EVENT_ADDR_RESOLVED) {
        ok = rdma_resolve_route(id, kDgramResolveWaitMs) == 0;
      } else if (type == RDMA_CM_EVENT_ROUTE_RESOLVED) {
        rdma_conn_param param{};
        ok = rdma_connect(id, &param) == 0;
      } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
        ibv_ah_attr ah_attr = event->param.ud.ah_attr;
        ibv_ah* ah = ibv_create_ah(d.pd, &ah_attr);
        if (ah != nullptr) {
          d.destinations.push_back({to.sin_addr.s_addr, to.sin_port, ah, event->param.ud.qp_num,
                                    event->param.ud.qkey});
          found = &d.destinations.back();
        }
        ok = ah != nullptr;
      } else {
        ok = false;  // UNREACHABLE (no socket there), ADDR_ERROR (no device has the address)
      }
      rdma_ack_cm_event(event);
    }
    rdma_destroy_id(id);
  }
  rdma_destroy_event_channel(channel);
  if (found == nullptr) errno = error;
  return found;
}

// SO_REUSEADDR on a port that a connected datagram socket of this process listens on
// (iperf3 -u's server binds a second UDP socket to its port once the first is connected to the
// client): the connected socket gives up its listener and keeps its QP, so the peers that
// resolved it already keep reaching it and new senders reach `s`, as the kernel gives a
// connected UDP socket its peer's datagrams and an unconnected one the rest. False if no
// such socket holds the port (another process's, or an unconnected one's: EADDRINUSE).
bool TakePortOfConnected(Socket* s) {
  sockaddr_in self = s->id->route.addr.src_sin;
  if (DeviceOfAddress(self.sin_addr.s_addr) < 0 && self.sin_addr.s_addr == htonl(INADDR_ANY)) {
    self.sin_addr.s_addr = GetDevices()->addresses[0];  // how DgramBind records a wildcard
  }
  Socket* holder = ConnectedDatagramOn(self, s);
  if (holder == nullptr) return false;
  std::lock_guard<std::mutex> lock(holder->mutex);
  rdma_destroy_id(holder->id);  // its listener; the socket needs no id to send or receive
  holder->id = nullptr;
  return true;
}

}  // namespace

int DgramBind(Socket* s, const sockaddr_in& address) {
  Datagram& d = *s->dgram;
  sockaddr_in bind_to = address;
  if (rdma_bind_addr(s->id, reinterpret_cast<sockaddr*>(&bind_to)) != 0) return -1;
  // Every bound datagram socket listens, so that senders can resolve it by SIDR.
  if (rdma_listen(s->id, 0) != 0 && (errno != EADDRINUSE || !s->reuseaddr || !TakePortOfConnected(s) ||
                                     rdma_listen(s->id, 0) != 0)) {
    return -1;
  }
  d.self = s->id->route.addr.src_sin;
  // A wildcard socket lives on device 0 (peers reply to that device's address); it takes
  // datagrams sent to device 0's address or to 127.0.0.1.
  const int device = DeviceOfAddress(d.self.sin_addr.s_addr);
  if (device < 0) d.self.sin_addr.s_addr = GetDevices()->addresses[0];
  if (SetUp(s, DeviceOfSocket(s)) != 0) {
    const int saved = errno;
    DgramTearDown(s);
    return Fail(saved);
  }
  s->phase = Phase::kBound;
  return 0;
}

int DgramConnect(Socket* s, const sockaddr_in& address) {
  if (s->phase == Phase::kIdle) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (DgramBind(s, any) != 0) return -1;
  }
  s->dgram->peer = address;
  s->dgram->has_peer = true;
  return 0;
}

ssize_t DgramSend(Socket* s, const iovec* iov, int iovcnt, int flags, const sockaddr_in* to,
                  std::unique_lock<std::mutex>& lock) {
  Datagram& d = *s->dgram;
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total > kDgramMaxPayloadBytes) {
    std::fprintf(stderr, "softnic rsockets: a datagram of %zu bytes is above the %zu one UD message carries\n",
                 total, kDgramMaxPayloadBytes);
    return Fail(EMSGSIZE);
  }
  if (to == nullptr && !d.has_peer) return Fail(EDESTADDRREQ);
  if (s->phase == Phase::kIdle) {  // as UDP: the first send binds an ephemeral port
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (DgramBind(s, any) != 0) return -1;
  }
  const Destination* dst = Resolve(s, to != nullptr ? *to : d.peer, lock);
  if (dst == nullptr) return -1;
  const bool nonblocking = s->nonblocking || (flags & MSG_DONTWAIT);
  DgramDrain(s);
  if (s->sends_posted - s->sends_done >= kDgramSendSlots) {
    if (nonblocking) {
      MaybePumpEvents(s);
      return Fail(EAGAIN);
    }
    if (!WaitUntil(s, lock, [s] { return s->sends_posted - s->sends_done < kDgramSendSlots; },
                   Deadline(s->sndtimeo_ms))) {
      return Fail(EAGAIN);  // SO_SNDTIMEO passed
    }
  }
  uint8_t* slot = s->buffer + (s->sends_posted % kDgramSendSlots) * kDgramSlotBytes;
  const DgramHeader header{d.self.sin_addr.s_addr, d.self.sin_port, 0};
  std::memcpy(slot, &header, sizeof(header));
  size_t at = sizeof(header);
  for (int i = 0; i < iovcnt; ++i) {
    std::memcpy(slot + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot), static_cast<uint32_t>(at), s->mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | s->sends_posted;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (at <= kInlineBytes ? IBV_SEND_INLINE : 0);
  wr.wr.ud.ah = dst->ah;
  wr.wr.ud.remote_qpn = dst->qpn;
  wr.wr.ud.remote_qkey = dst->qkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(d.qp, &wr, &bad) != 0) return -1;
  ++s->sends_posted;
  return static_cast<ssize_t>(total);
}

ssize_t DgramRecv(Socket* s, const iovec* iov, int iovcnt, int flags, sockaddr_in* from,
                  std::unique_lock<std::mutex>& lock) {
  Datagram& d = *s->dgram;
  if (s->phase == Phase::kIdle) return Fail(EINVAL);  // unbound: nobody can send to it
  DgramDrain(s);
  if (d.ready_count == 0) {
    if (s->nonblocking || (flags & MSG_DONTWAIT)) {
      MaybePumpEvents(s);  // a caller that never sleeps must still answer senders' SIDR requests
      // A caller that polls without sleeping (udpong's server) gives its core to the peer it
      // waits for: with more busy processes than cores, a peer kept off the CPU for a time
      // slice misses udpong's 1 ms reply timeout, and every resend leaves a stale reply queued
      // ahead of the next (its latency test then slowed 7x within three sizes, 47 -> 324 us).
      sched_yield();
      return Fail(EAGAIN);
    }
    if (!WaitUntil(s, lock, [&d] { return d.ready_count > 0; }, Deadline(s->rcvtimeo_ms))) {
      return Fail(EAGAIN);  // SO_RCVTIMEO passed
    }
  }
  const Completed c = d.ready[d.ready_head];
  const uint8_t* message = d.RecvSlot(s->buffer, c.slot) + kGrhBytes;
  DgramHeader header;
  std::memcpy(&header, message, sizeof(header));
  const size_t length = c.length - sizeof(header);
  size_t copied = 0;
  for (int i = 0; i < iovcnt && copied < length; ++i) {  // the rest is dropped, as UDP truncates
    const size_t n = std::min(iov[i].iov_len, length - copied);
    std::memcpy(iov[i].iov_base, message + sizeof(header) + copied, n);
    copied += n;
  }
  if (from != nullptr) {
    *from = sockaddr_in{};
    from->sin_family = AF_INET;
    from->sin_addr.s_addr = header.address;
    from->sin_port = header.port;
  }
  if (!(flags & MSG_PEEK)) {
    d.ready_head = (d.ready_head + 1) % kDgramRecvSlots;
    --d.ready_count;
    PostDgramRecv(s, c.slot);
  }
  return static_cast<ssize_t>((flags & MSG_TRUNC) ? length : copied);
}

void DgramDrain(Socket* s) {
  Datagram& d = *s->dgram;
  ibv_wc wc[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(s->cq, kPollBatch, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id & kSendTag) {
        ++s->sends_done;
      } else if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= kGrhBytes + sizeof(DgramHeader)) {
        d.ready[(d.ready_head + d.ready_count) % kDgramRecvSlots] = {static_cast<uint32_t>(wc[i].wr_id),
                                                                    wc[i].byte_len - static_cast<uint32_t>(kGrhBytes)};
        ++d.ready_count;
      } else {
        PostDgramRecv(s, static_cast<uint32_t>(wc[i].wr_id));  // not ours to deliver: take the next
      }
    }
    if (n < kPollBatch) break;
  }
}

void AnswerSidr(Socket* s, rdma_cm_event* request) {
  rdma_cm_id* child = request->id;
  rdma_ack_cm_event(request);
  Datagram& d = *s->dgram;
  // The REP names this socket's QP, which lives on one device: a request that came to
  // another device's address would be given a QPN that device does not have.
  if (d.qp == nullptr || child->verbs != d.qp->context) {
    rdma_reject(child, nullptr, 0);
  } else {
    child->qp = d.qp;
    rdma_accept(child, nullptr);
    child->qp = nullptr;  // the socket's, not the request's: rdma_destroy_id leaves it
  }
  rdma_destroy_id(child);
}

short DgramReadiness(Socket* s) {
  if (s->phase == Phase::kIdle) return POLLOUT;
  DgramDrain(s);
  short revents = 0;
  if (s->dgram->ready_count > 0) revents |= POLLIN;
  if (s->sends_posted - s->sends_done < kDgramSendSlots) revents |= POLLOUT;
  return revents;
}

void DgramTearDown(Socket* s) {
  Datagram& d = *s->dgram;
  for (const Destination& dst : d.destinations) ibv_destroy_ah(dst.ah);
  d.destinations.clear();
  if (d.qp != nullptr) ibv_destroy_qp(d.qp);
  if (s->mr != nullptr) ibv_dereg_mr(s->mr);
  if (s->buffer != nullptr) munmap(s->buffer, s->buffer_bytes);
  if (s->cq != nullptr) ibv_destroy_cq(s->cq);
  if (s->completions != nullptr) ibv_destroy_comp_channel(s->completions);
  if (d.pd != nullptr) ibv_dealloc_pd(d.pd);
  d.qp = nullptr;
  d.pd = nullptr;
  s->mr = nullptr;
  s->buffer = nullptr;
  s->cq = nullptr;
  s->completions = nullptr;
}

}  // namespace softnic::cm::rs
