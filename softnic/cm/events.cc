// Event channels and the fabric's devices as librdmacm sees them.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <chrono>
#include <ctime>

#include "softnic/cm/internal.h"
#include "softnic/fabric/fabric.h"

namespace softnic::cm {
namespace {

constexpr uint64_t kWakeSerial = 0;  // ids' serials start at 1

// Unacknowledged events of every id: acks and destroys meet here (control path only).
std::mutex g_ack_mutex;
std::condition_variable g_acked;

}  // namespace

int64_t NowMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
}

const Devices* GetDevices() {
  static Devices* devices = [] {
    auto* d = new Devices;
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    FabricOptions options;
    std::string error;
    if (list == nullptr || count == 0 || !FabricOptionsFromEnvironment(&options, &error)) {
      if (list != nullptr) ibv_free_device_list(list);
      return d;
    }
    d->directory = FabricDirectory(options.name);
    for (int i = 0; i < count; ++i) {
      ibv_context* context = ibv_open_device(list[i]);
      if (context == nullptr) continue;
      ibv_port_attr port{};
      ibv_query_port(context, 1, &port);
      d->ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
      d->contexts.push_back(context);
      d->pds.push_back(ibv_alloc_pd(context));
      d->addresses.push_back(htonl(DeviceIpv4(options.name, static_cast<uint32_t>(i))));
    }
    ibv_free_device_list(list);
    return d;
  }();
  if (devices->contexts.empty()) {
    errno = ENODEV;
    return nullptr;
  }
  return devices;
}

int DeviceOfAddress(in_addr_t address) {
  const Devices* d = GetDevices();
  if (d == nullptr) return -1;
  auto it = std::find(d->addresses.begin(), d->addresses.end(), address);
  return it == d->addresses.end() ? -1 : static_cast<int>(it - d->addresses.begin());
}

void Push(Channel* channel, Id* id, rdma_cm_event_type type, int status, const Message* message, Id* listen_id,
          const rdma_ud_param* ud) {
  auto* e = new Event;
  e->event.id = &id->id;
  e->event.listen_id = listen_id != nullptr ? &listen_id->id : nullptr;
  e->event.event = type;
  e->event.status = status;
  e->charged = type == RDMA_CM_EVENT_CONNECT_REQUEST && listen_id != nullptr ? listen_id : id;
  if (message != nullptr) {
    const uint8_t length = std::min<uint8_t>(message->private_data_len, kMaxPrivateDataBytes);
    std::memcpy(e->private_data, message->private_data, length);
    if (id->id.ps == RDMA_PS_UDP) {
      e->event.param.ud.private_data = length ? e->private_data : nullptr;
      e->event.param.ud.private_data_len = length;
      e->event.param.ud.qp_num = message->qp_num;
      e->event.param.ud.qkey = message->qkey;
    } else {
      e->event.param.conn.private_data = length ? e->private_data : nullptr;
      e->event.param.conn.private_data_len = length;
      e->event.param.conn.responder_resources = message->responder_resources;
      e->event.param.conn.initiator_depth = message->initiator_depth;
      e->event.param.conn.retry_count = message->retry_count;
      e->event.param.conn.rnr_retry_count = message->rnr_retry_count;
      e->event.param.conn.srq = message->srq;
      e->event.param.conn.qp_num = message->qp_num;
    }
  }
  if (ud != nullptr) e->event.param.ud = *ud;
  std::lock_guard<std::mutex> lock(channel->mutex);
  channel->queue.push_back(e);
  const uint64_t one = 1;
  (void)!write(channel->wake, &one, sizeof(one));
}

void Watch(Id* id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = id->serial;
  epoll_ctl(id->owner->channel.fd, EPOLL_CTL_ADD, id->socket, &ev);
}

int WaitForAcks(Id* id, int timeout_ms) {
  std::unique_lock<std::mutex> lock(g_ack_mutex);
  g_acked.wait_for(lock, std::chrono::milliseconds(timeout_ms), [id] { return id->unacked_events == 0; });
  return id->unacked_events;
}

void Unwatch(Id* id) {
  if (id->socket >= 0 && id->owner != nullptr) epoll_ctl(id->owner->channel.fd, EPOLL_CTL_DEL, id->socket, nullptr);
}

namespace {

// Pops the first queued event; the caller holds the mutex.
Event* PopLocked(Channel* channel) {
  if (channel->queue.empty()) return nullptr;
  Event* e = channel->queue.front();
  channel->queue.pop_front();
  if (channel->queue.empty()) {
    uint64_t count = 0;
    (void)!read(channel->wake, &count, sizeof(count));
  }
  return e;
}

int NextTimeoutMs(Channel* channel, bool nonblocking) {
  if (nonblocking) return 0;
  int64_t earliest = 0;
  std::lock_guard<std::mutex> lock(channel->mutex);
  for (Id* id : channel->ids) {
    if (id->deadline_ms != 0 && (earliest == 0 || id->deadline_ms < earliest)) earliest = id->deadline_ms;
  }
  if (earliest == 0) return -1;
  return static_cast<int>(std::max<int64_t>(0, earliest - NowMs()));
}

// The channel's id with this serial, or null if it was destroyed since epoll_wait saw it.
Id* FindId(Channel* channel, uint64_t serial) {
  std::lock_guard<std::mutex> lock(channel->mutex);
  for (Id* id : channel->ids) {
    if (id->serial == serial) return id;
  }
  return nullptr;
}

// The caller holds channel->pump.
void ExpireDeadlines(Channel* channel) {
  const int64_t now = NowMs();
  std::vector<Id*> expired;
  {
    std::lock_guard<std::mutex> lock(channel->mutex);
    for (Id* id : channel->ids) {
      if (id->deadline_ms != 0 && id->deadline_ms <= now) expired.push_back(id);
    }
  }
  for (Id* id : expired) HandleTimeout(id);
}

}  // namespace

}  // namespace softnic::cm

using namespace softnic::cm;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  if (GetDevices() == nullptr) return nullptr;
  auto* c = new Channel;
  c->channel.fd = epoll_create1(EPOLL_CLOEXEC);
  c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->channel.fd < 0 || c->wake < 0) {
    const int saved = errno;
    if (c->channel.fd >= 0) close(c->channel.fd);
    if (c->wake >= 0) close(c->wake);
    delete c;
    errno = saved;
    return nullptr;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeSerial;
  epoll_ctl(c->channel.fd, EPOLL_CTL_ADD, c->wake, &ev);
  return &c->channel;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  Channel* c = ToChannel(channel);
  for (Event* e : c->queue) delete e;
  close(c->wake);
  close(c->channel.fd);
  delete c;
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  Channel* c = ToChannel(channel);
  const bool nonblocking = (fcntl(channel->fd, F_GETFL) & O_NONBLOCK) != 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(c->mutex);
      if (Event* e = PopLocked(c)) {
        {
          std::lock_guard<std::mutex> acks(g_ack_mutex);
          ++e->charged->unacked_events;
        }
        *event = &e->event;
        return 0;
      }
    }
    epoll_event ready[16];
    const int n = epoll_wait(channel->fd, ready, 16, NextTimeoutMs(c, nonblocking));
    if (n < 0 && errno != EINTR) return -1;
    {
      std::lock_guard<std::mutex> pump(c->pump);
      for (int i = 0; i < n; ++i) {
        if (ready[i].data.u64 == kWakeSerial) continue;
        if (Id* id = FindId(c, ready[i].data.u64)) HandleReadable(id);
      }
      ExpireDeadlines(c);
    }
    if (nonblocking) {
      std::lock_guard<std::mutex> lock(c->mutex);
      if (c->queue.empty()) {
        errno = EAGAIN;
        return -1;
      }
    }
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  auto* e = reinterpret_cast<Event*>(event);
  {
    std::lock_guard<std::mutex> lock(g_ack_mutex);
    --e->charged->unacked_events;
  }
  g_acked.notify_all();
  delete e;
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",      "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",     "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",     "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",     "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto index = static_cast<size_t>(event);
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index] : "UNKNOWN EVENT";
}

struct ibv_context** rdma_get_devices(int* num_devices) {
  const Devices* d = GetDevices();
  const size_t count = d == nullptr ? 0 : d->contexts.size();
  auto** list = static_cast<ibv_context**>(std::calloc(count + 1, sizeof(ibv_context*)));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < count; ++i) list[i] = d->contexts[i];
  if (num_devices != nullptr) *num_devices = static_cast<int>(count);
  return list;
}

void rdma_free_devices(struct ibv_context** list) { std::free(list); }

}  // extern "C"
