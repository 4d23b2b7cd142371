#include "rdma/cm_connect.h"

#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdma/clock.h"
#include "rdma/error.h"

namespace rdmalab {
namespace {

constexpr int kResolveTimeoutMs = 2000;
constexpr int kListenBacklog = 64;
constexpr std::uint8_t kRetryCount = 7;
constexpr std::uint8_t kRnrRetryForever = 7;
constexpr std::uint8_t kRdAtomic = 16;
constexpr std::size_t kRequesterBytes = 20;  // "client/65535" and the like, NUL-terminated

// The endpoint and its QP pair as private data: 52 bytes, within a REQ's 56.
struct WireEndpoint {
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint16_t lid;
  std::int8_t gid_index;
  std::uint8_t mtu;
  std::uint8_t gid[16];
  std::uint32_t link;
  char requester[kRequesterBytes];
};
static_assert(sizeof(WireEndpoint) <= 56, "a REQ carries at most 56 bytes of private data");

WireEndpoint ToWire(const Endpoint& e, const CmLink& link) {
  if (link.requester.size() >= kRequesterBytes) {
    Fail("rdma_cm: participant name '", link.requester, "' is longer than ", kRequesterBytes - 1, " characters");
  }
  WireEndpoint w{};
  w.qpn = e.qpn;
  w.psn = e.psn;
  w.lid = e.address.lid;
  w.gid_index = static_cast<std::int8_t>(e.address.gid_index);
  w.mtu = static_cast<std::uint8_t>(e.address.mtu);
  std::memcpy(w.gid, e.address.gid.data(), sizeof(w.gid));
  w.link = link.link;
  std::memcpy(w.requester, link.requester.data(), link.requester.size());
  return w;
}

WireEndpoint ReadWire(const rdma_conn_param& param, const char* step) {
  if (param.private_data == nullptr || param.private_data_len < sizeof(WireEndpoint)) {
    Fail("rdma_cm ", step, ": the peer's private data holds ", int{param.private_data_len},
         " bytes, not an endpoint (", sizeof(WireEndpoint), "): is the peer rdmalab-bench -R?");
  }
  WireEndpoint w;
  std::memcpy(&w, param.private_data, sizeof(w));
  w.requester[kRequesterBytes - 1] = '\0';
  return w;
}

Endpoint FromWire(const WireEndpoint& w) {
  Endpoint e;
  e.qpn = w.qpn;
  e.psn = w.psn;
  e.address.lid = w.lid;
  e.address.gid_index = w.gid_index;
  e.address.mtu = static_cast<ibv_mtu>(w.mtu);
  std::memcpy(e.address.gid.data(), w.gid, sizeof(w.gid));
  return e;
}

rdma_conn_param ConnParam(const WireEndpoint& wire) {
  rdma_conn_param param{};
  param.private_data = &wire;
  param.private_data_len = sizeof(wire);
  param.responder_resources = kRdAtomic;
  param.initiator_depth = kRdAtomic;
  param.retry_count = kRetryCount;
  param.rnr_retry_count = kRnrRetryForever;
  param.qp_num = wire.qpn;
  return param;
}

}  // namespace

CmChannel::CmChannel() {
  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr) FailErrno("rdma_create_event_channel (is a librdmacm provider there?)", errno);
}

CmChannel::~CmChannel() { rdma_destroy_event_channel(channel_); }

rdma_cm_event* CmChannel::NextEvent(std::uint64_t deadline_ns, const char* step, const char* waiting_for) {
  for (;;) {
    const std::uint64_t now = MonotonicNs();
    if (now >= deadline_ns) Fail("rdma_cm ", step, ": no ", waiting_for, " before the --timeout");
    pollfd fd{channel_->fd, POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(std::min<std::uint64_t>((deadline_ns - now) / 1000000 + 1, 1000)));
    if (ready < 0 && errno != EINTR) FailErrno("poll on the rdma_cm event channel", errno);
    if (ready <= 0) continue;
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel_, &event) != 0) FailErrno("rdma_get_cm_event", errno);
    return event;
  }
}

rdma_cm_event* CmChannel::WaitEvent(rdma_cm_event_type expected, std::uint64_t deadline_ns, const char* step) {
  rdma_cm_event* event = NextEvent(deadline_ns, step, rdma_event_str(expected));
  if (event->event == expected) return event;
  const std::string got = rdma_event_str(event->event);
  const int status = event->status;
  rdma_ack_cm_event(event);
  Fail("rdma_cm ", step, ": got ", got, " (status ", status, ") instead of ", rdma_event_str(expected));
}

CmListener::CmListener(std::uint16_t port) {
  if (rdma_create_id(channel_, &listen_id_, nullptr, RDMA_PS_TCP) != 0) FailErrno("rdma_create_id", errno);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(port);
  if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&any)) != 0) {
    FailErrno("rdma_bind_addr(0.0.0.0:" + std::to_string(port) + ")", errno);
  }
  if (rdma_listen(listen_id_, kListenBacklog) != 0) FailErrno("rdma_listen on port " + std::to_string(port), errno);
}

CmListener::~CmListener() {
  for (rdma_cm_id* id : accepted_) {
    rdma_disconnect(id);
    rdma_destroy_id(id);
  }
  rdma_destroy_id(listen_id_);
}

void CmListener::AcceptAll(std::size_t count,
                           const std::function<Endpoint(const CmLink&, const Endpoint&)>& connect,
                           std::uint64_t deadline_ns) {
  // Requests of several requesters interleave with the RTUs of those already answered.
  std::size_t established = 0;
  while (established < count) {
    rdma_cm_event* event = NextEvent(deadline_ns, "listen", "CONNECT_REQUEST or ESTABLISHED");
    if (event->event == RDMA_CM_EVENT_ESTABLISHED) {
      ++established;
      rdma_ack_cm_event(event);
      continue;
    }
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      const std::string got = rdma_event_str(event->event);
      const int status = event->status;
      rdma_ack_cm_event(event);
      Fail("rdma_cm listen: got ", got, " (status ", status, ") while accepting ", count, " connections (",
           established, " established)");
    }
    rdma_cm_id* id = event->id;
    const WireEndpoint theirs = ReadWire(event->param.conn, "connect request");
    rdma_ack_cm_event(event);
    accepted_.push_back(id);
    if (accepted_.size() > count) {
      Fail("rdma_cm listen: request ", accepted_.size(), " from ", theirs.requester, " beyond the ", count, " expected");
    }
    const CmLink link{theirs.requester, theirs.link};
    const WireEndpoint ours = ToWire(connect(link, FromWire(theirs)), link);
    rdma_conn_param param = ConnParam(ours);
    if (rdma_accept(id, &param) != 0) FailErrno("rdma_accept", errno);
  }
}

CmConnection::~CmConnection() {
  if (id_ != nullptr) {
    rdma_disconnect(id_);
    rdma_destroy_id(id_);
  }
}

Endpoint CmConnection::Connect(const std::string& host, std::uint16_t port, const CmLink& link,
                               const Endpoint& local, std::uint64_t deadline_ns) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    Fail("rdma_cm: cannot resolve '", host, "' to an IPv4 address");
  }
  sockaddr_in destination{};
  std::memcpy(&destination, found->ai_addr, sizeof(destination));
  freeaddrinfo(found);
  destination.sin_port = htons(port);
  if (rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) FailErrno("rdma_create_id", errno);
  if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&destination), kResolveTimeoutMs) != 0) {
    FailErrno("rdma_resolve_addr(" + host + ")", errno);
  }
  rdma_ack_cm_event(WaitEvent(RDMA_CM_EVENT_ADDR_RESOLVED, deadline_ns, "resolve address"));
  if (rdma_resolve_route(id_, kResolveTimeoutMs) != 0) FailErrno("rdma_resolve_route", errno);
  rdma_ack_cm_event(WaitEvent(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline_ns, "resolve route"));
  const WireEndpoint wire = ToWire(local, link);
  rdma_conn_param param = ConnParam(wire);
  if (rdma_connect(id_, &param) != 0) FailErrno("rdma_connect", errno);
  rdma_cm_event* event = WaitEvent(RDMA_CM_EVENT_CONNECT_RESPONSE, deadline_ns, "connect");
  const Endpoint remote = FromWire(ReadWire(event->param.conn, "connect response"));
  rdma_ack_cm_event(event);
  return remote;
}

void CmConnection::Establish() {
  if (rdma_establish(id_) != 0) FailErrno("rdma_establish", errno);
}

}  // namespace rdmalab
