#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "softnic/fabric/background_thread.h"
#include "softnic/fabric/object.h"
#include "softnic/verbs/backing.h"
#include "softnic/verbs/internal.h"

namespace softnic {
namespace {

constexpr auto kProgressInterval = std::chrono::microseconds(100);

std::once_flag g_runtime_once;
Runtime* g_runtime = nullptr;
std::string* g_runtime_error = nullptr;

}  // namespace

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void Warn(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::fputs("softnic: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
}

Runtime* Runtime::GetSlow(std::string* error) {
  std::call_once(g_runtime_once, [] {
    auto* runtime = new Runtime;
    auto* message = new std::string;
    if (runtime->Init(message)) {
      g_runtime = runtime;
      ready_.store(runtime, std::memory_order_release);
    } else {
      g_runtime_error = message;
      Warn("%s", message->c_str());
    }
  });
  if (g_runtime == nullptr && error != nullptr) *error = *g_runtime_error;
  return g_runtime;
}

bool Runtime::Init(std::string* error) {
  FabricOptions options;
  if (!FabricOptionsFromEnvironment(&options, error)) return false;
  if (const char* single = std::getenv("SOFTNIC_SINGLE_THREADED"); single && *single) {
    if (std::strcmp(single, "0") != 0 && std::strcmp(single, "1") != 0) {
      *error = std::string("SOFTNIC_SINGLE_THREADED='") + single +
               "' is not valid: use 1 (one thread at a time per QP and CQ; posts skip the QP lock) or 0";
      return false;
    }
    single_threaded_ = single[0] == '1';
  }
  if (!fabric_.Attach(options, Fabric::Mode::kOpenOrCreate, error)) return false;
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) seed = NowNs() ^ uint64_t(getpid());
  random_state_.store(seed | 1);
  pthread_atfork(PrepareForkAnchors, ParentAfterForkAnchors, ChildAfterForkAnchors);
  for (uint32_t d = 0; d < fabric()->device_count; ++d) {
    mr_maps_[d].reset(new RemoteMrMapping[kMaxMrsPerDevice]());
    mr_map_tables_[d] = mr_maps_[d].get();
    local_qps_[d].reset(new SoftQp*[kMaxQpsPerDevice]());
    local_qp_tables_[d] = local_qps_[d].get();
  }
  attached_pid_ = getpid();
  return AttachProcess(&fabric_, &self_, error);
}

bool Runtime::EnsureOwnProcess(std::string* error) {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  if (attached_pid_ == getpid()) return true;
  // The parent's slot, objects, QPs and threads are not this process's.
  if (!AttachProcess(&fabric_, &self_, error)) return false;
  attached_pid_ = getpid();
  next_serial_.store(0);
  for (uint32_t d = 0; d < fabric()->device_count; ++d) std::fill_n(local_qp_tables_[d], kMaxQpsPerDevice, nullptr);
  stalled.clear();
  stalled_count.store(0);
  progress_thread_started_ = false;
  descriptors.ForgetAfterFork();
  RenewLaneEpoch();  // the QP caches copied from the parent count in the parent's blocks
  counter_lane_ = kNoLane;  // the forking thread's lane is in the parent's slot
  return true;
}

uint64_t Runtime::MakeObjectIdFor(uint32_t serial) const {
  return MakeObjectId(self_.slot, self_.incarnation, serial);
}

uint32_t Runtime::RandomBits() {
  // xorshift64*: keys must be unpredictable to a casual guess, not cryptographic.
  uint64_t x = random_state_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = x;
    next ^= next >> 12;
    next ^= next << 25;
    next ^= next >> 27;
  } while (!random_state_.compare_exchange_weak(x, next, std::memory_order_relaxed));
  return static_cast<uint32_t>((next * 2685821657736338717ull) >> 32);
}

bool Runtime::CreateRing(uint32_t capacity, uint32_t payload_bytes, ObjectRef* object, Ring* ring) {
  object->id = NewObjectId();
  object->bytes = RingBytes(capacity, payload_bytes);
  int fd = CreateObject(directory(), object->id, object->bytes);
  if (fd < 0) return false;
  void* map = mmap(nullptr, object->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED) {
    RemoveObject(directory(), object->id);
    errno = err;
    return false;
  }
  *ring = Ring::Format(map, capacity, payload_bytes);
  return true;
}

void* Runtime::MapRing(const ObjectRef& ref) {
  std::lock_guard<std::mutex> lock(maps_mutex_);
  auto it = ring_maps_.find(ref.id);
  if (it != ring_maps_.end()) return it->second;
  void* map = MapObject(directory(), ref.id, ref.bytes);
  if (map != nullptr) ring_maps_.emplace(ref.id, map);
  return map;
}

uint8_t* Runtime::MapMr(uint32_t device, uint32_t index, const MrEntry& entry, uint64_t translation,
                        uint64_t generation) {
  std::lock_guard<std::mutex> lock(maps_mutex_);
  RemoteMrMapping& mapping = mr_maps_[device][index];
  if (mapping.translation.load(std::memory_order_relaxed) == translation) return mapping.base;
  uint8_t* base = nullptr;
  if (entry.owner_slot == self_.slot && entry.owner_incarnation == self_.incarnation) {
    base = reinterpret_cast<uint8_t*>(entry.page_base);
  } else {
    // Segments read while the owner changed the entry may name the wrong objects: such a
    // mapping is never published (MapSegments checks the generation before and after).
    base = MapSegments(directory(), entry, generation);
    if (base == nullptr) return nullptr;
  }
  // A mapping replaced here (its MR was deregistered) stays mapped: another thread of
  // this process may still be copying through it.
  mapping.translation.store(0, std::memory_order_relaxed);
  mapping.base = base;
  mapping.translation.store(translation, std::memory_order_release);
  return base;
}

void Runtime::SignalChannel(uint64_t fifo_id) {
  if (fifo_id == 0) return;
  int fd;
  {
    std::lock_guard<std::mutex> lock(maps_mutex_);
    auto it = channel_writers_.find(fifo_id);
    if (it != channel_writers_.end()) {
      fd = it->second;
    } else {
      // Non-blocking: a FIFO whose reader is gone (ENXIO) or full must not stall a sender.
      fd = open(ObjectPath(directory(), fifo_id).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return;
      channel_writers_.emplace(fifo_id, fd);
    }
  }
  char byte = 1;
  [[maybe_unused]] ssize_t n = write(fd, &byte, 1);
}

void Runtime::AddStalled(SoftQp* qp) {
  if (qp->registered_stalled) return;
  qp->registered_stalled = true;
  qp->shared_with_progress.store(true, std::memory_order_relaxed);  // published by the mutex
  {
    std::lock_guard<std::mutex> lock(stalled_mutex);
    stalled.push_back(qp);
    stalled_count.store(static_cast<uint32_t>(stalled.size()), std::memory_order_release);
  }
  stalled_cv.notify_one();
  StartProgressThread();
}

void Runtime::RemoveStalled(SoftQp* qp) {
  if (!qp->registered_stalled) return;
  qp->registered_stalled = false;
  std::lock_guard<std::mutex> lock(stalled_mutex);
  std::erase(stalled, qp);
  stalled_count.store(static_cast<uint32_t>(stalled.size()), std::memory_order_release);
  qp->shared_with_progress.store(false, std::memory_order_release);
}

// Holds stalled_mutex throughout, so a QP cannot be destroyed under us (destroy removes
// it first). A QP whose lock is busy is skipped: its owner thread is progressing it.
void Runtime::ProgressStalled() {
  std::lock_guard<std::mutex> lock(stalled_mutex);
  for (size_t i = 0; i < stalled.size();) {
    SoftQp* qp = stalled[i];
    if (qp->lock.test_and_set(std::memory_order_acquire)) {
      ++i;
      continue;
    }
    bool still = ProgressQpLocked(qp);
    if (!still) {
      qp->registered_stalled = false;
      stalled[i] = stalled.back();
      stalled.pop_back();
      qp->shared_with_progress.store(false, std::memory_order_release);
    } else {
      ++i;
    }
    qp->lock.clear(std::memory_order_release);
  }
  stalled_count.store(static_cast<uint32_t>(stalled.size()), std::memory_order_release);
}

// Retries stalled send queues while nothing else in the process calls into softnic (a
// requester that waits on a socket or in a sleep still sees its RNR retries happen).
// Sleeps on stalled_cv while no send queue is stalled.
void Runtime::StartProgressThread() {
  std::lock_guard<std::mutex> lock(progress_mutex_);
  if (progress_thread_started_) return;
  progress_thread_started_ = true;
  StartBackgroundThread([this] {
    std::unique_lock<std::mutex> lock(stalled_mutex);
    for (;;) {
      stalled_cv.wait(lock, [this] { return !stalled.empty(); });
      lock.unlock();
      std::this_thread::sleep_for(kProgressInterval);
      ProgressStalled();
      lock.lock();
    }
  });
}

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

int32_t FindDeviceByAddress(const FabricHeader& fabric, const ibv_ah_attr& attr) {
  for (uint32_t d = 0; d < fabric.device_count; ++d) {
    const DeviceEntry& device = fabric.devices[d];
    if (fabric.link_layer == LinkLayer::kEthernet || attr.is_global) {
      if (std::memcmp(device.gid, attr.grh.dgid.raw, sizeof(device.gid)) == 0) return int32_t(d);
    } else if (device.lid == attr.dlid) {
      return int32_t(d);
    }
  }
  return -1;
}

}  // namespace softnic
