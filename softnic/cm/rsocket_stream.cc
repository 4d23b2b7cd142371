// rsockets: the byte stream (rsend/rrecv and their variants), I/O maps (riomap/riowrite),
// the completion engine and sleeping (rsocket.h has the protocol). Every function here runs
// with the socket's mutex held; a send or receive that can proceed makes no system call.
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "softnic/cm/rsocket.h"

namespace softnic::cm::rs {
namespace {

constexpr uint64_t kSendTag = 1ull << 62;     // wr_id of a WR that uses a send slot
constexpr uint64_t kControlTag = 1ull << 61;  // wr_id of a control message
constexpr int kPollBatch = 16;

uint32_t TakeGrant(Socket* s) {
  const uint32_t grant = s->grant_due;
  s->grant_due = 0;
  s->grant_due_data = false;
  return grant;
}

void Repost(Socket* s, uint32_t slot, bool held_data) {
  if (PostRecv(s, slot) != 0) {
    s->gone = true;  // a QP that takes no receive is in error: the connection is over
    return;
  }
  ++s->grant_due;
  s->grant_due_data |= held_data;
}

void OnReceive(Socket* s, const ibv_wc& wc) {
  const uint32_t imm = ntohl(wc.imm_data);
  const auto kind = static_cast<Kind>(imm >> 28);
  s->credits += imm & kGrantMask;
  const auto slot = static_cast<uint32_t>(wc.wr_id);
  switch (kind) {
    case Kind::kData:
      s->ready[(s->ready_head + s->ready_count) % kPostedRecvs] = {slot, wc.byte_len};
      ++s->ready_count;
      return;
    case Kind::kFin:
      s->fin_received = true;
      break;
    case Kind::kIoMap: {
      IoMap map;
      std::memcpy(&map, s->RecvSlot(slot), sizeof(map));
      auto same = std::find_if(s->remote_maps.begin(), s->remote_maps.end(),
                               [&](const IoMap& m) { return m.offset == map.offset; });
      if (same != s->remote_maps.end()) {
        *same = map;
      } else {
        s->remote_maps.push_back(map);
      }
      break;
    }
    case Kind::kIoUnmap: {
      int64_t offset;
      std::memcpy(&offset, s->RecvSlot(slot), sizeof(offset));
      std::erase_if(s->remote_maps, [&](const IoMap& m) { return m.offset == offset; });
      break;
    }
    case Kind::kCredit:
      break;
  }
  Repost(s, slot, false);
}

void OnCompletion(Socket* s, const ibv_wc& wc) {
  if (wc.wr_id & kControlTag) {
    --s->controls_in_flight;
  } else if (wc.wr_id & kSendTag) {
    ++s->sends_done;
  } else if (wc.status == IBV_WC_SUCCESS) {
    OnReceive(s, wc);
    return;
  }
  if (wc.status != IBV_WC_SUCCESS && !s->gone) {
    s->gone = true;
    if (!s->fin_received) s->so_error = ECONNRESET;
  }
}

// Copies n bytes between a flat buffer and an iovec list, from the list's byte `at`.
void CopyIov(const iovec* iov, int iovcnt, size_t at, uint8_t* flat, size_t n, bool to_flat) {
  int i = 0;
  while (i < iovcnt && at >= iov[i].iov_len) at -= iov[i++].iov_len;
  while (n > 0 && i < iovcnt) {
    const size_t take = std::min(n, iov[i].iov_len - at);
    auto* base = static_cast<uint8_t*>(iov[i].iov_base) + at;
    if (to_flat) {
      std::memcpy(flat, base, take);
    } else {
      std::memcpy(base, flat, take);
    }
    flat += take;
    n -= take;
    at = 0;
    ++i;
  }
}

size_t IovBytes(const iovec* iov, int iovcnt) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

// Posts one slot-using WR: a data SEND, or an RDMA WRITE to (remote_address, rkey).
int PostFromSlot(Socket* s, uint32_t length, uint64_t remote_address, uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s->SendSlot(s->sends_posted)), length, s->mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | s->sends_posted;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED | (length <= kInlineBytes ? IBV_SEND_INLINE : 0);
  if (rkey != 0) {
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = rkey;
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(Immediate(Kind::kData, TakeGrant(s)));
  }
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(s->id->qp, &wr, &bad) != 0) return -1;
  ++s->sends_posted;
  if (rkey == 0) --s->credits;
  return 0;
}

bool SlotFree(const Socket* s) { return s->sends_posted - s->sends_done < kSendSlots; }

bool Writable(const Socket* s) { return s->gone || s->fin_sent || CanSend(s); }

ssize_t SendBytes(int socket, const iovec* iov, int iovcnt, int flags, const sockaddr_in* to = nullptr) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  const size_t total = IovBytes(iov, iovcnt);
  std::unique_lock<std::mutex> lock(s->mutex);
  if (s->dgram) return DgramSend(s, iov, iovcnt, flags, to, lock);
  if (s->phase != Phase::kConnected) return Fail(s->phase == Phase::kConnecting ? EAGAIN : ENOTCONN);
  const bool nonblocking = s->nonblocking || (flags & MSG_DONTWAIT);
  size_t sent = 0;
  Drain(s);
  while (sent < total) {
    if (s->gone || s->fin_sent) {
      if (sent > 0) break;
      return Fail(EPIPE);
    }
    if (!CanSend(s)) {
      if (nonblocking) {
        if (sent > 0) break;
        MaybePumpEvents(s);  // a peer that died or left shows only on the CM channel
        if (s->gone) return Fail(EPIPE);
        return Fail(EAGAIN);
      }
      if (!WaitUntil(s, lock, [s] { return Writable(s); }, Deadline(s->sndtimeo_ms))) {
        if (sent > 0) break;
        return Fail(EAGAIN);  // SO_SNDTIMEO passed
      }
      continue;
    }
    const auto chunk = static_cast<uint32_t>(std::min(total - sent, kSlotBytes));
    CopyIov(iov, iovcnt, sent, s->SendSlot(s->sends_posted), chunk, true);
    if (PostFromSlot(s, chunk, 0, 0) != 0) {
      if (sent > 0) break;
      return -1;
    }
    sent += chunk;
  }
  return static_cast<ssize_t>(sent);
}

// Copies ready data out; consumes it (re-posting emptied slots) unless peeking.
size_t CopyOut(Socket* s, const iovec* iov, int iovcnt, size_t at, size_t room, bool peek) {
  size_t copied = 0;
  uint32_t head = s->ready_head, count = s->ready_count, offset = s->read_offset;
  while (room > copied && count > 0) {
    const Completed& c = s->ready[head];
    const size_t n = std::min<size_t>(c.length - offset, room - copied);
    CopyIov(iov, iovcnt, at + copied, s->RecvSlot(c.slot) + offset, n, false);
    copied += n;
    offset += static_cast<uint32_t>(n);
    if (offset < c.length) break;
    if (!peek) Repost(s, c.slot, true);
    head = (head + 1) % kPostedRecvs;
    --count;
    offset = 0;
  }
  if (!peek) {
    s->ready_head = head;
    s->ready_count = count;
    s->read_offset = offset;
  }
  return copied;
}

ssize_t RecvBytes(int socket, const iovec* iov, int iovcnt, int flags, sockaddr_in* from = nullptr) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  const size_t total = IovBytes(iov, iovcnt);
  std::unique_lock<std::mutex> lock(s->mutex);
  if (s->dgram) return DgramRecv(s, iov, iovcnt, flags, from, lock);
  if (s->phase != Phase::kConnected) return Fail(s->phase == Phase::kConnecting ? EAGAIN : ENOTCONN);
  const bool nonblocking = s->nonblocking || (flags & MSG_DONTWAIT);
  const bool peek = flags & MSG_PEEK;
  const bool wait_all = (flags & MSG_WAITALL) && !peek;
  size_t got = 0;
  Drain(s);
  for (;;) {
    if (!s->read_shut) got += CopyOut(s, iov, iovcnt, got, total - got, peek);
    if (got == total || (got > 0 && !wait_all)) break;
    if (s->ready_count == 0 && (s->fin_received || s->gone || s->read_shut)) break;  // end of stream
    if (nonblocking) {
      if (got > 0) break;
      MaybePumpEvents(s);  // a peer that died or left shows only on the CM channel
      if (s->gone) continue;  // end of stream: the check above returns it
      return Fail(EAGAIN);
    }
    if (!WaitUntil(s, lock, [s] { return CanReceive(s); }, Deadline(s->rcvtimeo_ms))) {
      if (got > 0) break;
      return Fail(EAGAIN);  // SO_RCVTIMEO passed
    }
  }
  if (s->grant_due >= kGrantBatch) FlushGrant(s);
  if (got == 0 && s->ready_count == 0 && s->gone && !s->fin_received && s->so_error != 0) {
    const int error = s->so_error;
    s->so_error = 0;
    return Fail(error);
  }
  return static_cast<ssize_t>(got);
}

}  // namespace

int PostRecv(Socket* s, uint32_t slot) {
  return PostSlotRecv(s, s->id->qp, slot, s->RecvSlot(slot), static_cast<uint32_t>(kSlotBytes));
}

int SendControl(Socket* s, Kind kind, const void* payload, uint32_t length) {
  if (s->controls_in_flight >= kMaxControlInFlight) Drain(s);
  if (s->controls_in_flight >= kMaxControlInFlight) return Fail(ENOBUFS);
  ibv_sge sge{reinterpret_cast<uintptr_t>(payload), length, 0};
  ibv_send_wr wr{};
  wr.wr_id = kControlTag;
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;  // payloads are small structs: no slot
  wr.imm_data = htonl(Immediate(kind, TakeGrant(s)));
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(s->id->qp, &wr, &bad) != 0) return -1;
  ++s->controls_in_flight;
  --s->credits;  // may go below zero only into the receives kept for control messages
  return 0;
}

void FlushGrant(Socket* s) {
  if (s->grant_due > 0 && !s->gone && s->phase == Phase::kConnected) SendControl(s, Kind::kCredit, nullptr, 0);
}

void Drain(Socket* s) {
  if (s->cq == nullptr) return;
  if (s->dgram) return DgramDrain(s);
  ibv_wc wc[kPollBatch];
  bool failed = false;
  for (;;) {
    const int n = ibv_poll_cq(s->cq, kPollBatch, wc);
    for (int i = 0; i < n; ++i) {
      failed |= wc[i].status != IBV_WC_SUCCESS;
      OnCompletion(s, wc[i]);
    }
    if (n < kPollBatch) break;
  }
  if (failed) PumpEvents(s);
  if (s->grant_due >= kGrantBatch) FlushGrant(s);
}

bool CanSend(const Socket* s) {
  return s->phase == Phase::kConnected && !s->gone && !s->fin_sent && s->credits > kControlRecvs && SlotFree(s);
}

bool CanReceive(const Socket* s) { return s->ready_count > 0 || s->fin_received || s->gone || s->read_shut; }

bool Sleep(Socket* s, std::unique_lock<std::mutex>& lock, int64_t deadline_ms) {
  // A reader that sleeps may hold room its peer waits for: grant it now, not at the batch.
  if (s->grant_due_data) FlushGrant(s);
  if (s->cq != nullptr && !s->armed) {
    ibv_req_notify_cq(s->cq, 0);
    s->armed = true;
    return true;  // completions that came before the arming raise no event: look again first
  }
  int timeout = -1;
  if (deadline_ms >= 0) {
    timeout = static_cast<int>(std::max<int64_t>(0, deadline_ms - NowMs()));
    if (timeout == 0) return false;
  }
  pollfd fds[2] = {{s->fd, POLLIN, 0}, {s->completions != nullptr ? s->completions->fd : -1, POLLIN, 0}};
  lock.unlock();
  const int n = poll(fds, 2, timeout);
  lock.lock();
  if (fds[1].revents & POLLIN) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (s->completions != nullptr && ibv_get_cq_event(s->completions, &cq, &context) == 0) {
      ibv_ack_cq_events(cq, 1);
      s->armed = false;
    }
  }
  if (fds[0].revents & POLLIN) PumpEvents(s);
  return n > 0;
}

short Readiness(Socket* s, short events) {
  if (s->dgram) {
    MaybePumpEvents(s);  // SIDR requests from senders resolving this socket
    return DgramReadiness(s) & (events | POLLERR | POLLHUP);
  }
  short revents = 0;
  switch (s->phase) {
    case Phase::kListening:
      MaybePumpEvents(s);
      if (!s->backlog.empty()) revents |= POLLIN;
      break;
    case Phase::kConnecting:
      MaybePumpEvents(s);
      if (s->phase == Phase::kConnected) revents |= POLLOUT;
      if (s->phase == Phase::kFailed) revents |= POLLOUT | POLLERR;
      break;
    case Phase::kConnected:
      Drain(s);
      MaybePumpEvents(s);  // DISCONNECTED: a peer that died sends no completion to a reader
      if (CanReceive(s)) revents |= POLLIN;
      if (Writable(s)) revents |= POLLOUT;
      // As TCP: hang-up only once nothing is left to read (rstream's rpoll loop stops at
      // POLLHUP, so reporting it beside the peer's last data lost that data).
      if (s->ready_count == 0 && (s->gone || (s->fin_received && s->fin_sent))) revents |= POLLHUP;
      if (s->so_error != 0) revents |= POLLERR;
      break;
    case Phase::kFailed:
      revents |= POLLOUT | POLLERR | POLLHUP;
      break;
    default:
      revents |= POLLOUT | POLLHUP;  // as an unconnected TCP socket polls
      break;
  }
  return revents & (events | POLLERR | POLLHUP);
}

}  // namespace softnic::cm::rs

using namespace softnic::cm::rs;

extern "C" {

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return SendBytes(socket, &iov, 1, flags);
}

// A stream socket ignores the destination, as TCP does once connected.
ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr, socklen_t addrlen) {
  iovec iov{const_cast<void*>(buf), len};
  sockaddr_in to;
  const bool datagram = Lookup(socket) != nullptr && Lookup(socket)->dgram != nullptr;
  if (!datagram || dest_addr == nullptr) return SendBytes(socket, &iov, 1, flags);
  if (ToIpv4(dest_addr, addrlen, &to) != 0) return -1;
  return SendBytes(socket, &iov, 1, flags, &to);
}

ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return Fail(EINVAL);
  sockaddr_in to;
  const bool datagram = Lookup(socket) != nullptr && Lookup(socket)->dgram != nullptr;
  if (!datagram || msg->msg_name == nullptr) {
    return SendBytes(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  }
  if (ToIpv4(static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen, &to) != 0) return -1;
  return SendBytes(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, &to);
}

ssize_t rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }

ssize_t rwritev(int socket, const iovec* iov, int iovcnt) { return SendBytes(socket, iov, iovcnt, 0); }

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return RecvBytes(socket, &iov, 1, flags);
}

// The sender's address, in the socket's family: a datagram's own, a stream's peer.
ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr, socklen_t* addrlen) {
  iovec iov{buf, len};
  sockaddr_in from{};
  const ssize_t n = RecvBytes(socket, &iov, 1, flags, &from);
  if (n < 0 || src_addr == nullptr || addrlen == nullptr) return n;
  Socket* s = Lookup(socket);
  if (s != nullptr && s->dgram) {
    FromIpv4(from, s->domain, src_addr, addrlen);
  } else {
    rgetpeername(socket, src_addr, addrlen);
  }
  return n;
}

ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return Fail(EINVAL);
  msg->msg_controllen = 0;
  msg->msg_flags = 0;
  sockaddr_in from{};
  const ssize_t n = RecvBytes(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags, &from);
  Socket* s = Lookup(socket);
  if (n >= 0 && msg->msg_name != nullptr && s != nullptr && s->dgram) {
    FromIpv4(from, s->domain, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
  }
  return n;
}

ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }

ssize_t rreadv(int socket, const iovec* iov, int iovcnt) { return RecvBytes(socket, iov, iovcnt, 0); }

// The peer may RDMA WRITE [buf, buf + len) through riowrite at offsets from `offset` (the
// buffer's address when -1) once the announcement, ordered before later stream data, arrives.
off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  if (buf == nullptr || len == 0 || !(prot & PROT_WRITE) || flags != 0) {
    std::fprintf(stderr, "softnic rsockets: riomap takes a buffer, a length, PROT_WRITE and flags 0 "
                 "(got %p, %zu, prot %d, flags %d)\n", buf, len, prot, flags);
    return Fail(EINVAL);
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->phase != Phase::kConnected || s->gone) return Fail(ENOTCONN);
  if (s->local_maps.size() >= static_cast<size_t>(kMaxIoMaps)) return Fail(ENOMEM);
  IoMap map;
  map.offset = offset == -1 ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(buf)) : offset;
  map.address = reinterpret_cast<uintptr_t>(buf);
  map.length = len;
  map.mr = ibv_reg_mr(s->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (map.mr == nullptr) return -1;
  map.rkey = map.mr->rkey;
  IoMap wire = map;
  wire.mr = nullptr;
  if (SendControl(s, Kind::kIoMap, &wire, sizeof(wire)) != 0) {
    const int saved = errno;
    ibv_dereg_mr(map.mr);
    return Fail(saved);
  }
  s->local_maps.push_back(map);
  return static_cast<off_t>(map.offset);
}

// The peer forgets the map when the message arrives; a WRITE it posted before that fails
// at the deregistered region and ends the connection, as on a NIC.
int riounmap(int socket, void* buf, size_t len) {
  Socket* s = Find(socket);
  if (s == nullptr) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  auto map = std::find_if(s->local_maps.begin(), s->local_maps.end(), [&](const IoMap& m) {
    return m.address == reinterpret_cast<uintptr_t>(buf) && m.length == len;
  });
  if (map == s->local_maps.end()) return Fail(EINVAL);
  if (s->phase == Phase::kConnected && !s->gone) SendControl(s, Kind::kIoUnmap, &map->offset, sizeof(map->offset));
  ibv_dereg_mr(map->mr);
  s->local_maps.erase(map);
  return 0;
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  const auto failed = static_cast<size_t>(-1);
  Socket* s = Find(socket);
  if (s == nullptr) return failed;
  std::unique_lock<std::mutex> lock(s->mutex);
  if (s->phase != Phase::kConnected) return Fail(ENOTCONN), failed;
  auto map = std::find_if(s->remote_maps.begin(), s->remote_maps.end(), [&](const IoMap& m) {
    return offset >= m.offset && static_cast<uint64_t>(offset - m.offset) + count <= m.length;
  });
  if (map == s->remote_maps.end()) return Fail(EINVAL), failed;  // the peer mapped no such range
  const uint64_t target = map->address + static_cast<uint64_t>(offset - map->offset);
  const uint32_t rkey = map->rkey;
  const bool nonblocking = s->nonblocking || (flags & MSG_DONTWAIT);
  size_t written = 0;
  Drain(s);
  while (written < count) {
    if (s->gone) {
      if (written > 0) break;
      return Fail(EPIPE), failed;
    }
    if (!SlotFree(s)) {
      if (nonblocking) {
        if (written > 0) break;
        return Fail(EAGAIN), failed;
      }
      if (!WaitUntil(s, lock, [s] { return s->gone || SlotFree(s); }, Deadline(s->sndtimeo_ms))) {
        if (written > 0) break;
        return Fail(EAGAIN), failed;  // SO_SNDTIMEO passed
      }
      continue;
    }
    const auto chunk = static_cast<uint32_t>(std::min(count - written, kSlotBytes));
    std::memcpy(s->SendSlot(s->sends_posted), static_cast<const uint8_t*>(buf) + written, chunk);
    if (PostFromSlot(s, chunk, target + written, rkey) != 0) {
      if (written > 0) break;
      return failed;
    }
    written += chunk;
  }
  return written;
}

}  // extern "C"
