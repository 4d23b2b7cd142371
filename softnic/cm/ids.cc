// rdma_cm ids: addresses, listeners, and the connection exchange over a Unix socket.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "softnic/cm/internal.h"
#include "softnic/fabric/object.h"

namespace softnic::cm {
namespace {

constexpr uint16_t kFirstEphemeralPort = 32768;
constexpr int kDisconnectTimeoutMs = 2000;
constexpr uint8_t kMaxRetryCount = 7;  // 3-bit fields; 7 RNR retries mean forever
std::atomic<uint32_t> g_next_port{0};
std::atomic<uint64_t> g_next_serial{1};  // 0 names a channel's wake descriptor

uint16_t EphemeralPort() {
  return static_cast<uint16_t>(kFirstEphemeralPort + (getpid() * 131u + g_next_port++) % 28000u);
}

bool IsLoopback(in_addr_t address) { return (ntohl(address) >> 24) == 127; }

// The device an address names: a softnic device's own, or device 0 for loopback; -1 for any.
int DeviceOf(in_addr_t address, bool* valid) {
  *valid = true;
  if (address == htonl(INADDR_ANY)) return -1;
  if (IsLoopback(address)) return 0;
  const int device = DeviceOfAddress(address);
  *valid = device >= 0;
  return device;
}

// One namespace per port space, as the kernel's CM keeps them: a TCP and a UDP listener may
// share a port number (iperf3 -u binds its UDP data socket to its TCP control port).
std::string ListenerPath(rdma_port_space ps, uint16_t port_network, in_addr_t address) {
  const char* space = ps == RDMA_PS_TCP ? "cm" : ps == RDMA_PS_UDP ? "cm-udp" : ps == RDMA_PS_IB ? "cm-ib" : "cm-ipoib";
  char name[48];
  std::snprintf(name, sizeof(name), "/%s-%04x-%08x", space, ntohs(port_network), ntohl(address));
  return GetDevices()->directory + name;
}

bool FillUnixAddress(const std::string& path, sockaddr_un* address) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  if (path.size() >= sizeof(address->sun_path)) return false;
  std::memcpy(address->sun_path, path.c_str(), path.size() + 1);
  return true;
}

void AttachDevice(Id* id, int device) {
  id->device = device;
  id->id.verbs = GetDevices()->contexts[static_cast<size_t>(device)];
  id->id.port_num = 1;
  // As librdmacm: an id on a device has the device's default PD (programs create AHs and
  // MRs on cm_id->pd before, or without, rdma_create_qp).
  if (id->id.pd == nullptr) id->id.pd = GetDevices()->pds[static_cast<size_t>(device)];
}

void FillLocal(const Id* id, Message* m) {
  ibv_port_attr port{};
  ibv_query_port(id->id.verbs, 1, &port);
  ibv_gid gid{};
  ibv_query_gid(id->id.verbs, 1, 0, &gid);
  m->lid = port.lid;
  std::memcpy(m->gid, gid.raw, sizeof(m->gid));
  m->src = id->id.route.addr.src_sin;
  m->dst = id->id.route.addr.dst_sin;
}

int Send(Id* id, const Message& m) {
  if (id->socket < 0 || send(id->socket, &m, sizeof(m), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(m))) {
    errno = ENOTCONN;
    return -1;
  }
  return 0;
}

void CloseSocket(Id* id) {
  if (id->socket < 0) return;
  Unwatch(id);
  close(id->socket);
  id->socket = -1;
  id->deadline_ms = 0;
}

void AddToChannel(Id* id, Channel* channel) {
  id->owner = channel;
  id->id.channel = &channel->channel;
  std::lock_guard<std::mutex> lock(channel->mutex);
  channel->ids.push_back(id);
}

void RemoveFromChannel(Id* id) {
  Channel* c = id->owner;
  if (c == nullptr) return;
  std::lock_guard<std::mutex> lock(c->mutex);
  c->ids.erase(std::remove(c->ids.begin(), c->ids.end(), id), c->ids.end());
  for (auto it = c->queue.begin(); it != c->queue.end();) {
    if ((*it)->event.id == &id->id || (*it)->charged == id) {
      delete *it;
      it = c->queue.erase(it);
    } else {
      ++it;
    }
  }
}

int Fail(int error_number) {
  errno = error_number;
  return -1;
}

// A connect or accept's parameters into the message; false if the private data is too long.
bool TakeConnParam(const rdma_conn_param* param, size_t max_private_data_bytes, Message* m) {
  if (param == nullptr) return true;
  if (param->private_data_len > max_private_data_bytes) return false;
  if (param->private_data_len > 0 && param->private_data != nullptr) {
    std::memcpy(m->private_data, param->private_data, param->private_data_len);
    m->private_data_len = param->private_data_len;
  }
  m->responder_resources = param->responder_resources;
  m->initiator_depth = param->initiator_depth;
  m->retry_count = std::min<uint8_t>(param->retry_count, kMaxRetryCount);
  m->rnr_retry_count = std::min<uint8_t>(param->rnr_retry_count, kMaxRetryCount);
  m->srq = param->srq;
  m->qp_num = param->qp_num;
  return true;
}

Id* NewId(Channel* channel, void* context, rdma_port_space ps, bool sync) {
  auto* id = new Id;
  id->serial = g_next_serial++;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  id->sync = sync;
  id->id.route.addr.src_sin.sin_family = AF_INET;
  id->id.route.addr.dst_sin.sin_family = AF_INET;
  AddToChannel(id, channel);
  return id;
}

// What refuses a passive id's request: REJ, or a SIDR REP with a status for RDMA_PS_UDP.
Message RejectMessage(const Id* id) {
  Message rej{};
  rej.type = id->id.qp_type == IBV_QPT_UD ? MessageType::kSidrRep : MessageType::kRej;
  rej.status = kRejectConsumer;
  return rej;
}

// A destroyed listener's connections the program was never told of die with it (the
// kernel's CM rejects them); those whose CONNECT_REQUEST it got are its own ids now.
void DropUndeliveredRequests(Id* listener) {
  Channel* c = listener->owner;
  std::vector<Id*> undelivered;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    for (Id* child : c->ids) {
      if (child->listener != listener) continue;
      const bool request_queued = std::any_of(c->queue.begin(), c->queue.end(), [child](const Event* e) {
        return e->event.id == &child->id && e->event.event == RDMA_CM_EVENT_CONNECT_REQUEST;
      });
      if (child->state == State::kIdle || (child->state == State::kRequested && request_queued)) {
        undelivered.push_back(child);
      } else {
        child->listener = nullptr;
      }
    }
  }
  for (Id* child : undelivered) {
    if (child->state == State::kRequested) Send(child, RejectMessage(child));
    CloseSocket(child);
    RemoveFromChannel(child);
    delete child;
  }
}

// A connection attempt on a listener: a child id that waits for its REQ.
void AcceptConnection(Id* listener) {
  const int fd = accept4(listener->socket, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  Id* child = NewId(listener->owner, listener->id.context, listener->id.ps, false);
  child->listener = listener;
  child->socket = fd;
  child->deadline_ms = NowMs() + kConnectTimeoutMs;
  Watch(child);
}

void OnRequest(Id* id, const Message& m) {
  Id* listener = id->listener;
  bool valid = true;
  int device = DeviceOf(m.dst.sin_addr.s_addr, &valid);
  if (device < 0) device = std::max(listener->device, 0);
  AttachDevice(id, device);
  id->peer = m;
  id->state = State::kRequested;
  id->deadline_ms = 0;
  id->id.route.addr.src_sin = m.dst;
  id->id.route.addr.src_sin.sin_port = listener->id.route.addr.src_sin.sin_port;
  id->id.route.addr.dst_sin = m.src;
  Push(id->owner, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &m, listener);
}

// The peer's socket closed or failed: what a dead host looks like at this state.
void OnPeerGone(Id* id) {
  const State state = id->state;
  CloseSocket(id);
  if (id->listener != nullptr && state == State::kIdle) {  // closed before its REQ: nobody knows this id
    RemoveFromChannel(id);
    delete id;
    return;
  }
  id->state = State::kClosed;
  switch (state) {
    case State::kConnecting:
      Push(id->owner, id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
      break;
    case State::kRequested:
    case State::kAccepted:
      Push(id->owner, id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      break;
    case State::kEstablished:
    case State::kDisconnecting:
      MoveQpToError(id);
      Push(id->owner, id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    default:
      break;
  }
}

void OnUdReply(Id* id, const Message& m) {
  CloseSocket(id);
  if (m.status != 0) {
    id->state = State::kClosed;
    Push(id->owner, id, RDMA_CM_EVENT_UNREACHABLE, m.status, &m);
    return;
  }
  id->peer = m;
  id->state = State::kEstablished;
  Push(id->owner, id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
  // The event carries the address handle attributes a sender needs for the peer.
  std::lock_guard<std::mutex> lock(id->owner->mutex);
  ibv_ah_attr& ah = id->owner->queue.back()->event.param.ud.ah_attr;
  ah = {};
  ah.dlid = m.lid;
  ah.port_num = 1;
  if (GetDevices()->ethernet) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, m.gid, sizeof(m.gid));
    ah.grh.hop_limit = 64;
  }
}

void OnMessage(Id* id, const Message& m) {
  switch (m.type) {
    case MessageType::kReq:
    case MessageType::kSidrReq:
      if (id->state == State::kIdle && id->listener != nullptr) OnRequest(id, m);
      break;
    case MessageType::kRep:
      if (id->state != State::kConnecting) break;
      id->peer = m;
      id->deadline_ms = 0;
      if (id->id.qp == nullptr) {  // an external QP: the program moves it and calls rdma_establish
        Push(id->owner, id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &m);
        break;
      }
      if (MoveQpToRts(id, m, true) != 0) {
        Message rej{};
        rej.type = MessageType::kRej;
        rej.status = kRejectConsumer;
        Send(id, rej);
        CloseSocket(id);
        id->state = State::kClosed;
        Push(id->owner, id, RDMA_CM_EVENT_CONNECT_ERROR, -errno);
        break;
      }
      {
        Message rtu{};
        rtu.type = MessageType::kRtu;
        Send(id, rtu);
      }
      id->state = State::kEstablished;
      Push(id->owner, id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
      break;
    case MessageType::kSidrRep:
      if (id->state == State::kConnecting) OnUdReply(id, m);
      break;
    case MessageType::kRtu:
      if (id->state != State::kAccepted) break;
      id->state = State::kEstablished;
      id->deadline_ms = 0;
      Push(id->owner, id, RDMA_CM_EVENT_ESTABLISHED, 0);
      break;
    case MessageType::kRej:
      if (id->state != State::kConnecting && id->state != State::kAccepted) break;
      CloseSocket(id);
      id->state = State::kClosed;
      Push(id->owner, id, RDMA_CM_EVENT_REJECTED, m.status, &m);
      break;
    case MessageType::kDreq: {
      if (id->state != State::kEstablished && id->state != State::kDisconnecting) break;
      MoveQpToError(id);
      Message drep{};
      drep.type = MessageType::kDrep;
      Send(id, drep);
      CloseSocket(id);
      id->state = State::kClosed;
      Push(id->owner, id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    }
    case MessageType::kDrep:
      if (id->state != State::kDisconnecting) break;
      CloseSocket(id);
      id->state = State::kClosed;
      Push(id->owner, id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
  }
}

// Publishes the listening socket bound at `staging` under `path`: a hard link, which
// never replaces a live listener's name. A name left by a dead process (it refuses
// connections) is taken over.
bool PublishListener(const std::string& staging, const std::string& path, const sockaddr_un& address) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (link(staging.c_str(), path.c_str()) == 0) return true;
    if (errno != EEXIST) return false;
    const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const bool stale = probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 &&
                       errno == ECONNREFUSED;
    if (probe >= 0) close(probe);
    if (!stale || unlink(path.c_str()) != 0) break;
  }
  errno = EADDRINUSE;
  return false;
}

}  // namespace

void HandleReadable(Id* id) {
  if (id->state == State::kListening) {
    AcceptConnection(id);
    return;
  }
  Message m;
  const ssize_t n = recv(id->socket, &m, sizeof(m), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n != static_cast<ssize_t>(sizeof(m)) || m.magic != kMessageMagic) {
    OnPeerGone(id);
    return;
  }
  m.private_data_len = std::min<uint8_t>(m.private_data_len, kMaxPrivateDataBytes);
  OnMessage(id, m);
}

void HandleTimeout(Id* id) {
  const State state = id->state;
  CloseSocket(id);
  if (id->listener != nullptr && state == State::kIdle) {
    RemoveFromChannel(id);
    delete id;
    return;
  }
  id->state = State::kClosed;
  if (state == State::kConnecting) Push(id->owner, id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
  if (state == State::kAccepted) Push(id->owner, id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
  if (state == State::kDisconnecting) Push(id->owner, id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

int WaitFor(Id* id, rdma_cm_event_type expected) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(id->id.channel, &event) != 0) return -1;
  const rdma_cm_event_type got = event->event;
  const int status = event->status;
  if (got == expected) {
    if (id->id.event != nullptr) rdma_ack_cm_event(id->id.event);
    id->id.event = event;  // as librdmacm: the last event of a sync id, for its private data
    return 0;
  }
  rdma_ack_cm_event(event);
  switch (got) {
    case RDMA_CM_EVENT_REJECTED: return Fail(ECONNREFUSED);
    case RDMA_CM_EVENT_UNREACHABLE: return Fail(status == -ETIMEDOUT ? ETIMEDOUT : ENETUNREACH);
    case RDMA_CM_EVENT_ADDR_ERROR: return Fail(EHOSTUNREACH);
    default: return Fail(status < 0 ? -status : ECONNABORTED);
  }
}

}  // namespace softnic::cm

using namespace softnic::cm;

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  if (id == nullptr) return Fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) return Fail(EINVAL);
  if (GetDevices() == nullptr) return -1;
  const bool sync = channel == nullptr;
  if (sync && (channel = rdma_create_event_channel()) == nullptr) return -1;
  *id = &NewId(ToChannel(channel), context, ps, sync)->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  {
    std::lock_guard<std::mutex> pump(id->owner->pump);
    if (id->state == State::kListening) DropUndeliveredRequests(id);
    LeaveAllMulticast(id);
    CloseSocket(id);
    if (!id->listen_path.empty()) unlink(id->listen_path.c_str());
    RemoveFromChannel(id);  // events not yet delivered go, as the kernel drops them
  }
  if (cm_id->event != nullptr) {
    rdma_ack_cm_event(cm_id->event);
    cm_id->event = nullptr;
  }
  // Delivered events point at the id until acknowledged (man rdma_destroy_id).
  if (const int unacked = WaitForAcks(id, kDestroyAckWaitMs); unacked != 0) {
    std::fprintf(stderr, "softnic librdmacm: rdma_destroy_id: %d event(s) of this id were not acknowledged "
                 "within %d ms; call rdma_ack_cm_event on each before rdma_destroy_id\n",
                 unacked, kDestroyAckWaitMs);
    return Fail(EBUSY);
  }
  if (id->sync) rdma_destroy_event_channel(cm_id->channel);
  delete cm_id->route.path_rec;
  delete id->ep_qp_init;
  delete id;
  return 0;
}

int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (cm_id == nullptr || channel == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  {
    std::lock_guard<std::mutex> pump(id->owner->pump);
    Unwatch(id);
    RemoveFromChannel(id);
  }
  if (id->sync) rdma_destroy_event_channel(cm_id->channel);
  id->sync = false;
  Channel* to = ToChannel(channel);
  std::lock_guard<std::mutex> pump(to->pump);
  AddToChannel(id, to);
  if (id->socket >= 0) Watch(id);
  return 0;
}

int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr) return Fail(EINVAL);
  if (addr->sa_family != AF_INET) return Fail(EAFNOSUPPORT);
  Id* id = ToId(cm_id);
  if (id->state != State::kIdle) return Fail(EINVAL);
  const auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
  bool valid = true;
  const int device = DeviceOf(sin->sin_addr.s_addr, &valid);
  if (!valid) return Fail(EADDRNOTAVAIL);
  if (device >= 0) AttachDevice(id, device);
  cm_id->route.addr.src_sin = *sin;
  if (device == 0 && IsLoopback(sin->sin_addr.s_addr)) cm_id->route.addr.src_sin.sin_addr.s_addr = GetDevices()->addresses[0];
  if (sin->sin_port == 0) cm_id->route.addr.src_sin.sin_port = htons(EphemeralPort());
  id->state = State::kBound;
  return 0;
}

int rdma_listen(rdma_cm_id* cm_id, int) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::lock_guard<std::mutex> pump(id->owner->pump);
  if (id->state != State::kBound) return Fail(EINVAL);
  const sockaddr_in& src = cm_id->route.addr.src_sin;
  const std::string path = ListenerPath(cm_id->ps, src.sin_port, src.sin_addr.s_addr);
  // Bound and listening under a name of its own first, then published: whoever finds the
  // listener's name (a peer, or a script waiting for the server) finds it accepting, never
  // a socket bound but not yet listening, whose connect is refused (REJECTED).
  const std::string staging = softnic::PrivateSibling(path);
  sockaddr_un address, staging_address;
  if (!FillUnixAddress(path, &address) || !FillUnixAddress(staging, &staging_address)) return Fail(ENAMETOOLONG);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  bool published = bind(fd, reinterpret_cast<sockaddr*>(&staging_address), sizeof(staging_address)) == 0 &&
                   listen(fd, 128) == 0 && PublishListener(staging, path, address);
  const int saved = errno;
  unlink(staging.c_str());
  if (!published) {
    close(fd);
    return Fail(saved);
  }
  id->socket = fd;
  id->listen_path = path;
  id->state = State::kListening;
  Watch(id);
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src_addr, sockaddr* dst_addr, int) {
  if (cm_id == nullptr || dst_addr == nullptr) return Fail(EINVAL);
  if (dst_addr->sa_family != AF_INET || (src_addr != nullptr && src_addr->sa_family != AF_INET)) {
    return Fail(EAFNOSUPPORT);
  }
  Id* id = ToId(cm_id);
  if (src_addr != nullptr && id->state == State::kIdle && rdma_bind_addr(cm_id, src_addr) != 0) return -1;
  if (id->state != State::kIdle && id->state != State::kBound) return Fail(EINVAL);
  const auto* dst = reinterpret_cast<const sockaddr_in*>(dst_addr);
  cm_id->route.addr.dst_sin = *dst;
  // A multicast group is reached from the id's own device (device 0 when unbound): mckey
  // and rdma-core resolve the group's address before they join it.
  const bool group = IN_MULTICAST(ntohl(dst->sin_addr.s_addr));
  bool valid = true;
  int target = group ? std::max(id->device, 0) : DeviceOf(dst->sin_addr.s_addr, &valid);
  if (!valid || target < 0) {
    Push(id->owner, id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
    return id->sync ? WaitFor(id, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
  }
  if (IsLoopback(dst->sin_addr.s_addr)) cm_id->route.addr.dst_sin.sin_addr.s_addr = GetDevices()->addresses[0];
  if (id->device < 0) {
    // Devices stand for hosts: reach another device's address from a different device.
    const int count = static_cast<int>(GetDevices()->contexts.size());
    AttachDevice(id, group || IsLoopback(dst->sin_addr.s_addr) || count == 1 ? target : (target + 1) % count);
  }
  if (cm_id->route.addr.src_sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
    cm_id->route.addr.src_sin.sin_addr.s_addr = GetDevices()->addresses[static_cast<size_t>(id->device)];
  }
  if (cm_id->route.addr.src_sin.sin_port == 0) cm_id->route.addr.src_sin.sin_port = htons(EphemeralPort());
  id->state = State::kAddrResolved;
  Push(id->owner, id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

int rdma_resolve_route(rdma_cm_id* cm_id, int) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  if (id->state != State::kAddrResolved) return Fail(EINVAL);
  // One path, as the SA would give: the peer's LID or GID and the port's MTU.
  const int target = DeviceOfAddress(cm_id->route.addr.dst_sin.sin_addr.s_addr);
  auto* path = cm_id->route.path_rec != nullptr ? cm_id->route.path_rec : new ibv_sa_path_rec{};
  ibv_gid gid{};
  ibv_query_gid(cm_id->verbs, 1, 0, &gid);
  path->sgid = gid;
  ibv_query_gid(GetDevices()->contexts[static_cast<size_t>(target)], 1, 0, &path->dgid);
  ibv_port_attr local{}, remote{};
  ibv_query_port(cm_id->verbs, 1, &local);
  ibv_query_port(GetDevices()->contexts[static_cast<size_t>(target)], 1, &remote);
  path->slid = htobe16(local.lid);
  path->dlid = htobe16(remote.lid);
  path->pkey = htobe16(0xffff);
  path->mtu = local.active_mtu;
  path->hop_limit = GetDevices()->ethernet ? 64 : 0;
  cm_id->route.path_rec = path;
  cm_id->route.num_paths = 1;
  id->state = State::kRouteResolved;
  Push(id->owner, id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::unique_lock<std::mutex> pump(id->owner->pump);
  if (id->state != State::kRouteResolved) return Fail(EINVAL);
  const bool ud = cm_id->qp_type == IBV_QPT_UD;
  Message req{};
  req.type = ud ? MessageType::kSidrReq : MessageType::kReq;
  if (!TakeConnParam(param, ud ? kMaxPrivateDataBytes : kMaxReqPrivateDataBytes, &req)) return Fail(EINVAL);
  if (cm_id->qp != nullptr) req.qp_num = cm_id->qp->qp_num;
  id->local = req;
  FillLocal(id, &req);
  const sockaddr_in& dst = cm_id->route.addr.dst_sin;
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  bool connected = false;
  for (in_addr_t address : {dst.sin_addr.s_addr, in_addr_t{htonl(INADDR_ANY)}}) {
    sockaddr_un path;
    if (FillUnixAddress(ListenerPath(cm_id->ps, dst.sin_port, address), &path) &&
        connect(fd, reinterpret_cast<sockaddr*>(&path), sizeof(path)) == 0) {
      connected = true;
      break;
    }
  }
  id->state = State::kConnecting;
  if (!connected) {  // nobody listens there: the peer's CM would reject the service id
    close(fd);
    id->state = State::kClosed;
    Push(id->owner, id, ud ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_REJECTED, kRejectNoListener);
    pump.unlock();
    return id->sync ? WaitFor(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
  }
  id->socket = fd;
  id->deadline_ms = NowMs() + kConnectTimeoutMs;
  Watch(id);
  if (Send(id, req) != 0) OnPeerGone(id);
  pump.unlock();
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int rdma_establish(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::lock_guard<std::mutex> pump(id->owner->pump);
  if (id->state != State::kConnecting) return Fail(EINVAL);
  Message rtu{};
  rtu.type = MessageType::kRtu;
  // Established before the RTU leaves, so that a DREQ right behind it finds the state.
  id->state = State::kEstablished;
  if (Send(id, rtu) != 0) {
    id->state = State::kConnecting;
    return -1;
  }
  id->deadline_ms = 0;
  return 0;
}

int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::unique_lock<std::mutex> pump(id->owner->pump);
  if (id->state != State::kRequested) return Fail(EINVAL);
  const bool ud = cm_id->qp_type == IBV_QPT_UD;
  Message rep{};
  rep.type = ud ? MessageType::kSidrRep : MessageType::kRep;
  // Without parameters, the resources mirror the REQ's (what the peer offered and asked).
  rep.responder_resources = id->peer.initiator_depth;
  rep.initiator_depth = id->peer.responder_resources;
  if (!TakeConnParam(param, kMaxPrivateDataBytes, &rep)) return Fail(EINVAL);
  rep.retry_count = 0;  // a REP carries none: the REQ's serves both sides
  if (cm_id->qp != nullptr) rep.qp_num = cm_id->qp->qp_num;
  rep.qkey = kDefaultUdQkey;
  FillLocal(id, &rep);
  id->local = rep;
  if (!ud && cm_id->qp != nullptr && MoveQpToRts(id, id->peer, false) != 0) return -1;
  if (ud) {
    if (Send(id, rep) != 0) return -1;
    CloseSocket(id);
    id->state = State::kEstablished;
    return 0;
  }
  // Accepted before the REP leaves: the peer's RTU, read by whichever thread pumps the
  // channel next, must find kAccepted (an RTU that found kRequested would be dropped).
  id->deadline_ms = NowMs() + kConnectTimeoutMs;
  id->state = State::kAccepted;
  if (Send(id, rep) != 0) {
    id->deadline_ms = 0;
    id->state = State::kRequested;
    return -1;
  }
  pump.unlock();
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int rdma_reject(rdma_cm_id* cm_id, const void* private_data, uint8_t private_data_len) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::lock_guard<std::mutex> pump(id->owner->pump);
  if (id->state != State::kRequested) return Fail(EINVAL);
  if (private_data_len > kMaxPrivateDataBytes) return Fail(EINVAL);
  Message rej = RejectMessage(id);
  if (private_data != nullptr && private_data_len > 0) {
    std::memcpy(rej.private_data, private_data, private_data_len);
    rej.private_data_len = private_data_len;
  }
  const int rc = Send(id, rej);
  CloseSocket(id);
  id->state = State::kClosed;
  return rc;
}

int rdma_disconnect(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Id* id = ToId(cm_id);
  std::unique_lock<std::mutex> pump(id->owner->pump);
  if (id->state == State::kClosed || id->state == State::kDisconnecting) return 0;  // the peer went first
  if (id->state != State::kEstablished && id->state != State::kAccepted) return Fail(EINVAL);
  MoveQpToError(id);
  if (cm_id->qp_type == IBV_QPT_UD || id->socket < 0) {
    id->state = State::kClosed;
    return 0;
  }
  Message dreq{};
  dreq.type = MessageType::kDreq;
  id->state = State::kDisconnecting;
  id->deadline_ms = NowMs() + kDisconnectTimeoutMs;
  if (Send(id, dreq) != 0) OnPeerGone(id);
  pump.unlock();
  return id->sync ? WaitFor(id, RDMA_CM_EVENT_DISCONNECTED) : 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (listen == nullptr || id == nullptr) return Fail(EINVAL);
  Id* l = ToId(listen);
  if (!l->sync || l->state != State::kListening) return Fail(EINVAL);
  rdma_cm_event* event = nullptr;
  for (;;) {
    if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    rdma_ack_cm_event(event);  // e.g. a connection that died before it was taken
  }
  rdma_cm_id* child = event->id;
  rdma_event_channel* own = rdma_create_event_channel();
  if (own == nullptr || rdma_migrate_id(child, own) != 0) {
    rdma_ack_cm_event(event);
    return -1;
  }
  ToId(child)->sync = true;
  child->event = event;
  if (l->ep_qp_init != nullptr) {
    ibv_qp_init_attr attr = *l->ep_qp_init;
    if (rdma_create_qp(child, listen->pd, &attr) != 0) {
      const int saved = errno;
      rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
      return Fail(saved);
    }
  }
  *id = child;
  return 0;
}

uint16_t rdma_get_src_port(rdma_cm_id* id) { return id->route.addr.src_sin.sin_port; }

uint16_t rdma_get_dst_port(rdma_cm_id* id) { return id->route.addr.dst_sin.sin_port; }

// The ACK timeout goes to the QP at RTS, as the kernel's CM does; other options change
// nothing on a softnic fabric (no ToS, one address family), so they are accepted.
int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval, size_t optlen) {
  if (cm_id == nullptr || optval == nullptr) return Fail(EINVAL);
  if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_ACK_TIMEOUT) {
    if (optlen != sizeof(uint8_t) || *static_cast<const uint8_t*>(optval) > kMaxAckTimeout) return Fail(EINVAL);
    ToId(cm_id)->ack_timeout = *static_cast<const uint8_t*>(optval);
  }
  return 0;
}

// Async QP events need no CM action here: the RTU already established the connection.
int rdma_notify(rdma_cm_id* id, ibv_event_type) { return id == nullptr ? Fail(EINVAL) : 0; }

}  // extern "C"
