// softnic's process-side objects. Each verbs object embeds the public struct as its first
// member (the provider convention), so a public pointer converts to ours by a cast.
#pragma once

#include <algorithm>
#include <array>
#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "softnic/fabric/accounting.h"
#include "softnic/fabric/descriptors.h"
#include "softnic/fabric/fabric.h"
#include "softnic/fabric/layout.h"
#include "softnic/fabric/process.h"
#include "softnic/fabric/ring.h"

namespace softnic {

constexpr uint32_t kUdGrhBytes = 40;
constexpr uint32_t kPortNumber = 1;
constexpr uint32_t kRnrRetryForever = 7;
constexpr uint32_t kUdDestinationCacheEntries = 64;
// Where a UD QP caches the destination (device, QPN).
inline uint32_t UdDestinationSlot(uint32_t qpn, uint32_t device) {
  return (qpn ^ (device * 0x9e3779b9u)) & (kUdDestinationCacheEntries - 1);
}
static_assert((kUdDestinationCacheEntries & (kUdDestinationCacheEntries - 1)) == 0);

// A completion as producers write it into a CQ ring; poll converts it to ibv_wc.
struct Cqe {
  uint64_t wr_id;
  uint32_t status;
  uint32_t opcode;
  uint32_t byte_len;
  uint32_t imm_data;  // network order, as ibv_wc
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint32_t sq_retire;  // send completions: the QP's posted count this retires up to
  uint16_t slid;
  uint8_t sl;
  uint8_t is_send;  // retires the send queue up to sq_retire
  uint32_t vendor_err;
  // Receive completions: the receive ring's dequeue count once this WQE was taken, which
  // tells the owner's post_recv that the slot is free (0: not known).
  uint64_t recv_dequeued;
};
static_assert(sizeof(Cqe) == 56);

// A posted receive as it sits in a receive ring: as many SGEs as the ring holds per WQE,
// those the WR did not use zero-length (which place nothing, as an absent SGE). No count:
// a one-SGE WQE and its ring slot's sequence fill 32 bytes, two WQEs per cache line.
struct RecvWqe {
  uint64_t wr_id;
  ibv_sge sge[];
};

inline uint32_t RecvWqeBytes(uint32_t max_sge) {
  return static_cast<uint32_t>(sizeof(RecvWqe) + sizeof(ibv_sge) * max_sge);
}

struct SoftDevice {
  ibv_device device;
  // The tail of rdma-core's struct verbs_device (ops, refcount, ...): provider libraries
  // loaded beside us (libmlx5's mlx5dv_is_supported) read `ops` there; zero means "not mine".
  void* verbs_device_tail[16];
  uint32_t index;
};

struct AsyncEventQueue {
  std::mutex mutex;
  std::deque<ibv_async_event> events;
};

struct SoftContext {
  verbs_context vctx;  // ends with the public ibv_context
  uint32_t device_index;
  DeviceEntry* device;
  AsyncEventQueue async;
  uint64_t async_fifo_id;  // async_fd is this FIFO, so peers can wake it (SRQ limit, CQ overrun)
  std::mutex objects_mutex;  // the CQs and SRQs below, checked for async conditions
  std::vector<struct SoftCq*> cqs;
  std::vector<struct SoftSrq*> srqs;
};

struct SoftPd {
  ibv_pd pd;
  uint32_t pd_id;
};

// What identifies the backing of a shared mapping in /proc/self/maps.
struct BackingKey {
  Backing backing;
  uint64_t device;
  uint64_t inode;  // SysV: the shmid
  auto operator<=>(const BackingKey&) const = default;
};

struct SoftMr {
  ibv_mr mr;
  uint32_t index;
  // The anchors this MR holds a reference on: start address and object id (a forked child's
  // anchor at the same address has another id, so releasing an MR inherited from the parent
  // leaves it alone).
  std::vector<std::pair<uintptr_t, uint64_t>> anchors;
  std::vector<BackingKey> shared;  // shared backings this MR holds a reference on
};

struct SoftChannel {
  ibv_comp_channel channel;
  uint64_t fifo_id;
  std::mutex mutex;
  std::vector<struct SoftCq*> cqs;
};

// Completions of a QP that was reset while they sat in a CQ: poll skips entries of `qpn`
// below ring position `end` (receive ones only when `receives`).
struct CqPurge {
  uint32_t qpn;
  bool receives;
  uint64_t end;
};

struct SoftCq {
  ibv_cq_ex ex;  // its prefix is struct ibv_cq
  uint32_t device_index;
  Ring ring;
  ObjectRef object;
  SoftChannel* channel;
  Cqe current;  // the entry being read through the extended poll API
  Consumers consumers;  // kOne under SOFTNIC_SINGLE_THREADED: polls claim without a CAS
  bool overrun_reported;
  std::atomic<uint32_t> purge_count{0};  // poll's one check: purges.size(), written under purge_mutex
  // QPs and XRC SRQs that complete into this CQ: while any does, ibv_destroy_cq refuses
  // with EBUSY, as the kernel does (their destroy would otherwise purge a freed CQ).
  std::atomic<uint32_t> users{0};
  std::mutex purge_mutex;
  std::vector<CqPurge> purges;
};

// An XRC domain (xrc.cc): `id` is what QP and SRQ entries name; `shared` the XrcdEntry of
// a domain opened through a file, -1 for one opened without.
struct SoftXrcd {
  ibv_xrcd xrcd;
  uint32_t id;
  int32_t shared;
  std::atomic<uint32_t> users{0};  // SRQs and XRC receive QPs of this process in it
};

struct SoftSrq {
  ibv_srq srq;
  SoftContext* context;
  Ring ring;
  ObjectRef object;
  uint32_t max_sge;
  uint32_t max_wr;
  // XRC SRQs: their domain and their number, the QP table entry senders find them by.
  SoftXrcd* xrcd;
  uint32_t srqn;
  QpEntry* entry;
  SoftCq* cq;  // where an XRC SRQ's completions go
};

struct SoftAh {
  ibv_ah ah;
  ibv_ah_attr attr;
  int32_t device;  // destination device index, -1 if no device has that address
  bool multicast;  // the address names a group (multicast.h): device is -1
};


// The entry an empty KeyTranslation points at: its generation (0) never equals the odd one
// of an empty translation, so the fast path needs no null check.
inline const MrEntry kNoMrEntry{};

// A key's translation, cached per QP by the fast path (send_fast.h): valid while the
// MR table entry is still at `generation` (any reg, rereg or dereg of the entry moves it).
struct KeyTranslation {
  uint32_t key = 0;
  const MrEntry* entry = &kNoMrEntry;
  uint64_t generation = 1;
  uint64_t first = 0;   // first valid address (the iova)
  uint64_t length = 0;
  uint64_t bias = 0;    // local address = address + bias (mod 2^64)
};

// A QP's last WRITE that PostCachedWrite took (one per value of IBV_SEND_SIGNALED),
// remembered so that a post of the same shape (one SGE, the same flags, length and keys,
// addresses inside the same regions) skips every check whose inputs cannot have changed:
// each one reads state that only moves with the fabric's control epoch
// (FabricHeader::control_epoch: QP entries, MR entries, faults).
// Left per post: the epoch, the shape, the two ranges, the peer process's liveness (a death
// advances no epoch), room in the SQ, the calling thread's counter lane. Read and filled
// under the QP's lock, or without it by a thread that owns the QP (SOFTNIC_SINGLE_THREADED,
// progress thread off the QP: `needs_lock` false); emptied when the QP stalls
// (StorePending), since its later WRs then queue and the progress thread may take it.
inline const std::atomic<uint64_t> kNoControlEpoch{0};  // an empty route's: no null check
// 256 bytes, a power of two: a post indexes a QP's routes with a shift, not a multiply.
struct alignas(256) WriteRoute {
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // never a control epoch
  uint64_t epoch = kEmpty;
  const std::atomic<uint64_t>* control_epoch = &kNoControlEpoch;
  uint32_t send_flags = 0;
  uint32_t bytes = 0;
  uint32_t rkey = 0;
  uint32_t lkey = 0;  // unused with IBV_SEND_INLINE
  // Each range holds exactly the addresses a WR of `bytes` may start at: address - first <= span.
  uint64_t remote_first = 0;
  uint64_t remote_span = 0;
  uint64_t remote_bias = 0;  // mapped address = address + bias (mod 2^64)
  uint64_t local_first = 0;
  uint64_t local_span = 0;
  uint64_t local_bias = 0;
  const ProcessSlot* peer_process = nullptr;
  uint32_t peer_incarnation = 0;
  bool signaled = false;
  bool needs_lock = false;  // set at the QP's creation, and by every fill
  // The slots this shape counted in when filled (a copy: the QP's FastMessageSlots may move
  // on to another shape while the route stays), valid in their lane epoch.
  FastMessageSlots counts;

  void Clear() { epoch = kEmpty; }
};

// A remote QP's receive side as a sender uses it: its entry and its mapped rings.
struct Destination {
  uint32_t device = 0;
  uint32_t qpn = 0;
  QpEntry* entry = nullptr;
  Ring recv_queue;
  Ring recv_cq;
  KeyTranslation recv_key;  // the send fast path: the last receive lkey written through
  ibv_grh grh;              // UD: the GRH a message to this destination carries, but its length
};

// A send WR in the engine's one form, whether it came from ibv_post_send, the ibv_wr_*
// API, or a stalled copy awaiting retry.
struct WorkRequest {
  uint64_t wr_id;
  ibv_wr_opcode opcode;
  uint32_t send_flags;
  uint32_t imm_data;
  uint32_t num_sge;
  const ibv_sge* sg_list;
  uint64_t remote_addr;
  uint32_t rkey;
  uint64_t compare_add;
  uint64_t swap;
  SoftAh* ah;
  uint32_t remote_qpn;
  uint32_t remote_qkey;
  uint32_t remote_srqn;  // XRC: the SRQ at the responder that takes a SEND's RECV
  uint64_t total_bytes;  // filled in by validation
};

// Storage a WorkRequest can point into when it must outlive the caller's WR.
struct StoredWorkRequest {
  WorkRequest wr;
  uint32_t slot;  // the QP's posted count when this WR was posted
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_bytes;
};

enum class StallReason : uint8_t { kNone, kReceiverNotReady, kNoReceive };

// Preallocated storage (on first wr_start) for one ibv_wr_* batch: the hot path of
// perftest and of every modern verbs program allocates nothing per WR.
struct WrBatch {
  std::unique_ptr<WorkRequest[]> wrs;
  std::unique_ptr<ibv_sge[]> sges;           // capacity * sges_per_wr
  std::unique_ptr<uint8_t[]> inline_bytes;   // capacity * inline_per_wr
  uint32_t capacity = 0;
  uint32_t sges_per_wr = 0;
  uint32_t inline_per_wr = 0;
  uint32_t count = 0;
  int error = 0;
};

struct SoftQp {
  ibv_qp_ex ex;  // its prefix is struct ibv_qp
  // Indexed by the WR's IBV_SEND_SIGNALED: a sender signaling one WR in n (perftest's cq_mod)
  // alternates two shapes, and one route would be refilled twice per n posts. Two per value
  // (the last route filled, and the one before it): a key-value client WRITEs GETs and PUTs
  // of two sizes, and one route was refilled twice per PUT (~25 instructions a request of
  // HERD's client at 5% PUTs).
  std::array<WriteRoute, 4> write_routes;
  WriteRoute& RouteFor(uint32_t send_flags) { return write_routes[(send_flags & IBV_SEND_SIGNALED) != 0]; }
  WriteRoute& PreviousRouteFor(uint32_t send_flags) {
    return write_routes[2 + ((send_flags & IBV_SEND_SIGNALED) != 0)];
  }
  SoftContext* context;
  uint32_t device_index;
  QpEntry* entry;
  uint32_t index;
  SoftCq* send_cq;
  SoftCq* recv_cq;
  SoftSrq* srq;
  Ring recv_ring;  // own receive ring (not with an SRQ)
  ObjectRef recv_object;
  ibv_qp_cap cap;
  bool signal_all;
  uint32_t path_mtu_bytes;
  ibv_qp_attr attr;        // everything modify_qp set, as query_qp reports it
  int32_t dest_device;     // connected QPs: the device attr.ah_attr names, -1 if none
  Destination connected;   // connected QPs: resolved on first use, refreshed if the peer goes
  Destination ud_cache[kUdDestinationCacheEntries];
  // XRC send QPs: the receive QP they are connected to (no rings: it has none), and the
  // SRQ the last message went to. `connected` stays empty, so no fast path takes them.
  Destination xrc_target;
  Destination xrc_srq;
  SoftXrcd* xrcd;  // XRC receive QPs: their domain
  KeyTranslation remote_key;  // fast path: the last rkey written to
  KeyTranslation local_key;   // fast path: the last lkey read from
  QpShapeCursors shape_cursors;  // where this QP last counted each kind of message shape
  uint64_t write_key_base;       // MessageKeyBase of this QP's RDMA WRITEs (fast path)
  uint64_t send_key_base;        // and of its single-SGE SENDs

  std::atomic_flag lock = ATOMIC_FLAG_INIT;  // post_send (mlx5 takes the same per-QP lock)
  // True while the progress thread may touch this QP (it is in Runtime::stalled); cleared
  // with release after the last such access. SOFTNIC_SINGLE_THREADED posts skip the lock
  // while it is false.
  std::atomic<bool> shared_with_progress{false};
  uint32_t sq_posted;
  std::atomic<uint32_t> sq_retired;  // advanced by poll_cq when a send completion is read

  // WRs waiting behind a stalled head (RC RNR or an unreachable responder), in order.
  std::deque<StoredWorkRequest> pending;
  StallReason stall;
  bool registered_stalled;  // in Runtime::stalled
  uint32_t stall_retries_left;
  uint64_t stall_next_try_ns;

  WrBatch batch;  // the ibv_wr_* API's WRs between wr_start and wr_complete
};

// Process-wide state: the fabric, this process's slot, mapping caches, registries.
struct RemoteMrMapping {
  std::atomic<uint64_t> translation;  // the MR entry's translation_generation; 0 = none
  uint8_t* base;  // address of the MR's first page in this process; written before translation
};

// Private pages made shareable by a registration (memory.cc). An anchor outlives its MRs:
// the range stays mapped from the object, named, so a later registration of it changes no
// mapping; it goes only once the range no longer maps the object (the program unmapped it).
struct Anchor {
  uintptr_t end;
  uint64_t object_id;
  uint64_t device;  // of the object's file: what /proc/self/maps shows while it is mapped
  uint64_t inode;
  uint32_t references;  // MRs that use it
};

// An anchor whose name went while some of its range may still map the object: a forked
// child must copy what is, or it would share those pages with its parent.
struct RetiredAnchor {
  uintptr_t start;
  uintptr_t end;
  uint64_t device;
  uint64_t inode;
};

// What a forked child copies: the parts of anchors' ranges that map their objects, found by
// the parent before fork() so that the child allocates nothing before they are private.
struct ForkCopy {
  uintptr_t start;
  uintptr_t end;
};

// Memory that was already shared when registered (verbs/backing.cc).
struct SharedBacking {
  uint64_t id;  // MrSegment::id: the shmid, or the descriptor id peers fetch
  uint32_t page_shift;
  uint32_t references;  // MRs that use it
  uint64_t segment_bytes;  // SysV: the segment in whole pages, all that shmat maps
  // SysV: our own attachment. Like a NIC's pin, it keeps the segment alive while
  // registered, even after IPC_RMID and the application's shmdt, so its shmid cannot name
  // another segment while peers may still attach it.
  void* hold;
};

class Runtime {
 public:
  // The process's runtime, created on first use; nullptr (with *error) if the fabric
  // cannot be opened. The error is remembered and returned on every later call.
  static Runtime* Get(std::string* error = nullptr) {
    Runtime* ready = ready_.load(std::memory_order_acquire);
    return ready != nullptr ? ready : GetSlow(error);
  }

  // The runtime once created, else null: for hot paths that hand anything else to a slower one.
  static Runtime* IfReady() { return ready_.load(std::memory_order_acquire); }

  FabricHeader* fabric() const { return fabric_.header(); }
  const std::string& directory() const { return fabric_.directory(); }
  const ProcessAttachment& self() const { return self_; }
  // This thread's counter lane: one block per device (see CounterBlock).
  CounterBlock* lane_counters() { return fabric()->processes[self_.slot].counters[CounterLane()]; }
  CounterBlock& counters(uint32_t device) { return lane_counters()[device]; }

  uint64_t NewObjectId() { return MakeObjectIdFor(next_serial_.fetch_add(1) + 1); }
  // In a forked child (first call there, from ibv_open_device): attach as a process of
  // its own, as a child on a NIC opens contexts of its own, so that its objects and the
  // parent's never share names. False with *error when no slot is free.
  bool EnsureOwnProcess(std::string* error);
  uint32_t RandomBits();

  // Creates and maps a new ring object of this process (CQ, RQ, SRQ). False with errno.
  bool CreateRing(uint32_t capacity, uint32_t payload_bytes, ObjectRef* object, Ring* ring);
  // Maps a ring object (cached per object id). Null on failure.
  void* MapRing(const ObjectRef& ref);
  // The address of an MR's first page in this process, cached per device and MR index for
  // the entry's translation (an access or PD change keeps the mapping). The caller reads
  // `translation` from the entry at `generation` and checks the generation afterwards.
  uint8_t* MrBase(uint32_t device, uint32_t index, const MrEntry& entry, uint64_t translation,
                  uint64_t generation) {
    RemoteMrMapping& mapping = mr_map_tables_[device][index];
    if (mapping.translation.load(std::memory_order_acquire) == translation) return mapping.base;
    return MapMr(device, index, entry, translation, generation);
  }
  uint8_t* MapMr(uint32_t device, uint32_t index, const MrEntry& entry, uint64_t translation,
                 uint64_t generation);

  // Registered-memory anchors (memory.cc) and shared backings (backing.cc), both under
  // anchors_mutex.
  std::mutex anchors_mutex;
  std::map<uintptr_t, Anchor> anchors;
  std::vector<RetiredAnchor> retired_anchors;
  std::vector<ForkCopy> fork_copies;
  size_t anchors_made = 0;  // registrations that made anchors since the last sweep (memory.cc)
  size_t anchor_sweep_at = 0;
  int maps_fd = -1;  // /proc/self/maps for PROCMAP_QUERY, held from the first registration (memory.cc)
  std::map<BackingKey, SharedBacking> shared_backings;
  DescriptorService descriptors;  // the descriptors of shared backings, for peers

  // Writes one byte to a completion or async-event FIFO (of any process; cold path).
  void SignalChannel(uint64_t fifo_id);

  // QPs of this process by device and table index, for retiring send slots on poll; a table
  // per device of the fabric (Init), not kMaxDevices of them: 32 KiB each, not 8 MiB a process.
  SoftQp*& LocalQp(uint32_t device, uint32_t index) { return local_qp_tables_[device][index]; }

  // QPs with stalled send queues, retried by poll_cq and the progress thread.
  std::mutex stalled_mutex;
  std::condition_variable stalled_cv;  // the progress thread waits here while none is stalled
  std::vector<SoftQp*> stalled;
  std::atomic<uint32_t> stalled_count{0};
  // SOFTNIC_SINGLE_THREADED=1: the application posts to and polls each QP and CQ from one
  // thread at a time (as MLX5_SINGLE_THREADED promises mlx5), so a post that takes the
  // fast path needs no QP lock.
  bool single_threaded() const { return single_threaded_; }
  void AddStalled(SoftQp* qp);     // caller holds the QP lock
  void RemoveStalled(SoftQp* qp);  // caller holds the QP lock
  void ProgressStalled();

 private:
  Runtime() = default;
  static Runtime* GetSlow(std::string* error);
  bool Init(std::string* error);
  static inline std::atomic<Runtime*> ready_{nullptr};  // hot paths: one load, no call_once
  bool single_threaded_ = false;
  uint64_t MakeObjectIdFor(uint32_t serial) const;
  void StartProgressThread();

  Fabric fabric_;
  ProcessAttachment self_;
  std::atomic<uint32_t> next_serial_{0};

  // The calling thread's lane: the first kCounterLanes - 1 threads that count get one each,
  // later threads share the last (atomic) lane. Claimed in the process's slot, whose count
  // tells readers which lanes to visit. initial-exec TLS: no __tls_get_addr call on the
  // post path (libibverbs is loaded with the program, not dlopen()ed late).
  static constexpr uint32_t kNoLane = ~0u;
  static inline thread_local uint32_t counter_lane_ __attribute__((tls_model("initial-exec"))) = kNoLane;
  uint32_t CounterLane() {
    if (__builtin_expect(counter_lane_ == kNoLane, 0)) {
      const uint32_t claimed = fabric()->processes[self_.slot].lanes_used.fetch_add(1, std::memory_order_acq_rel);
      counter_lane_ = std::min(claimed, kCounterLanes - 1);
    }
    return counter_lane_;
  }
  std::atomic<uint64_t> random_state_{0};
  std::mutex maps_mutex_;
  std::unordered_map<uint64_t, void*> ring_maps_;
  std::unordered_map<uint64_t, int> channel_writers_;
  std::unique_ptr<RemoteMrMapping[]> mr_maps_[kMaxDevices];  // allocated in Init
  RemoteMrMapping* mr_map_tables_[kMaxDevices] = {};        // the same, for the hot path
  std::unique_ptr<SoftQp*[]> local_qps_[kMaxDevices];        // allocated in Init
  SoftQp** local_qp_tables_[kMaxDevices] = {};               // the same, for the hot path
  std::mutex progress_mutex_;
  bool progress_thread_started_ = false;
  std::mutex attach_mutex_;
  pid_t attached_pid_ = 0;  // the process that holds self_
};

inline SoftContext* ToSoft(ibv_context* c) {
  return reinterpret_cast<SoftContext*>(reinterpret_cast<uint8_t*>(c) - offsetof(verbs_context, context));
}
inline SoftPd* ToSoft(ibv_pd* p) { return reinterpret_cast<SoftPd*>(p); }
inline SoftMr* ToSoft(ibv_mr* m) { return reinterpret_cast<SoftMr*>(m); }
inline SoftCq* ToSoft(ibv_cq* c) { return reinterpret_cast<SoftCq*>(c); }
inline SoftCq* ToSoft(ibv_cq_ex* c) { return reinterpret_cast<SoftCq*>(c); }
inline SoftQp* ToSoft(ibv_qp* q) { return reinterpret_cast<SoftQp*>(q); }
inline SoftQp* ToSoft(ibv_qp_ex* q) { return reinterpret_cast<SoftQp*>(q); }
inline SoftSrq* ToSoft(ibv_srq* s) { return reinterpret_cast<SoftSrq*>(s); }
inline SoftXrcd* ToSoft(ibv_xrcd* x) { return reinterpret_cast<SoftXrcd*>(x); }
inline SoftAh* ToSoft(ibv_ah* a) { return reinterpret_cast<SoftAh*>(a); }
inline SoftChannel* ToSoft(ibv_comp_channel* c) { return reinterpret_cast<SoftChannel*>(c); }

void PrepareForkAnchors();
void ParentAfterForkAnchors();
void ChildAfterForkAnchors();

uint64_t NowNs();
uint32_t MtuBytes(ibv_mtu mtu);
int32_t FindDeviceByAddress(const FabricHeader& fabric, const ibv_ah_attr& attr);

// Cold-path diagnostics to stderr, prefixed "softnic: " (errors a caller sees only as errno).
void Warn(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Completion-queue operations shared by the data path (cq.cc, recv.cc). PushCqe is inline:
// the send fast path pushes one per signaled WR; overruns and armed CQs are the cold rest.
// `device`: whose counters take an overrun (the CQ's device, or the responder's).
bool FinishPushCqe(bool pushed, Ring& ring, bool failed, uint32_t device, bool solicited);

// Writes `cqe` into a ring slot as seven 8-byte stores. The slot is a line the consumer
// polls, so each store waits in the store buffer for that line to come over; composed in
// registers, a CQE takes 7 entries there (built on the stack and copied: 14 field stores,
// then the copy), which leaves room for the rest of the post while the line is on its way.
[[gnu::always_inline]] inline void StoreCqe(void* slot, const Cqe& cqe) {
  static_assert(sizeof(Cqe) == 7 * sizeof(uint64_t) && offsetof(Cqe, slid) == 40 && offsetof(Cqe, vendor_err) == 44 &&
                __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  // Relaxed atomic stores (plain moves on x86), so that the compiler cannot merge them into
  // a copy through the stack; slots are 8-byte aligned (ring.h).
  auto* words = static_cast<uint64_t*>(slot);
  __atomic_store_n(&words[0], cqe.wr_id, __ATOMIC_RELAXED);
  __atomic_store_n(&words[1], cqe.status | uint64_t{cqe.opcode} << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&words[2], cqe.byte_len | uint64_t{cqe.imm_data} << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&words[3], cqe.qp_num | uint64_t{cqe.src_qp} << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&words[4], cqe.wc_flags | uint64_t{cqe.sq_retire} << 32, __ATOMIC_RELAXED);
  __atomic_store_n(&words[5],
                   cqe.slid | uint64_t{cqe.sl} << 16 | uint64_t{cqe.is_send} << 24 | uint64_t{cqe.vendor_err} << 32,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&words[6], cqe.recv_dequeued, __ATOMIC_RELAXED);
}

// PushCqe's part without a call: false when the CQ is full (an overrun).
[[gnu::always_inline]] inline bool TryPushCqe(Ring& ring, const Cqe& cqe) {
  return ring.TryPush([&](void* payload) __attribute__((always_inline)) { StoreCqe(payload, cqe); });
}

[[gnu::always_inline]] inline bool PushCqe(Ring& ring, const Cqe& cqe, uint32_t device, bool solicited) {
  bool pushed = TryPushCqe(ring, cqe);
  if (__builtin_expect(pushed && ring.header()->channel_id == 0, 1)) return true;
  return FinishPushCqe(pushed, ring, cqe.status != IBV_WC_SUCCESS, device, solicited);
}
void FlushRecvQueue(SoftQp* qp);  // a QP entering ERR: flush completions for its RECVs
// A QP entering RESET: its completions still in its CQs are never polled (as libmlx5's
// mlx5_cq_clean). Receive completions taken from an SRQ stay, so their buffers come back.
void PurgeCompletions(SoftQp* qp);
// The QP's path MTU, and the shape key base of its WRITEs that depends on it.
void SetPathMtu(SoftQp* qp, uint32_t path_mtu_bytes);
inline model::Transport ModeledTransport(ibv_qp_type type) {
  return type == IBV_QPT_UD ? model::Transport::kUd : type == IBV_QPT_UC ? model::Transport::kUc : model::Transport::kRc;
}

// The send engine (send.cc) and the QP paths it needs. *Locked functions need qp->lock.
void LockQp(SoftQp* qp);
void UnlockQp(SoftQp* qp);
int SubmitLocked(SoftQp* qp, WorkRequest& wr);
bool ProgressQpLocked(SoftQp* qp);  // true while still stalled
void SetQpErrorLocked(SoftQp* qp);  // state ERR, flush pending sends and receives
void SetQpStateError(SoftQp* qp);   // just the state (qp.cc)

void PostAsyncEvent(SoftContext* context, const ibv_async_event& event);
void CheckAsyncConditions(SoftContext* context);

// Tables of the verbs context (device.cc fills ibv_context_ops and verbs_context ops).
void InstallContextOps(SoftContext* context);
void InstallCqOps(ibv_context_ops* ops, verbs_context* vctx);
void InstallQpOps(ibv_context_ops* ops, verbs_context* vctx);
void InstallRecvOps(ibv_context_ops* ops, verbs_context* vctx);
void InstallSendOps(ibv_context_ops* ops, verbs_context* vctx);
void InstallQpExOps(SoftQp* qp);
void InstallXrcOps(verbs_context* vctx);
SoftSrq* NewSrq(ibv_pd* pd, ibv_srq_attr* attr, void* srq_context);  // recv.cc; null with errno
void ForgetXrcSrq(SoftSrq* srq);  // frees its table entry: no message reaches it any more
// A QP table entry of `device` reserved for a new QP or XRC SRQ (-1 when full), and a
// number for it (qp.cc).
int32_t ClaimQpIndex(DeviceEntry* device);
uint32_t NewQpNumber(Runtime* runtime, uint32_t index);
inline bool IsXrc(ibv_qp_type type) { return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV; }
// A new XRC SRQ or receive QP in `xrcd`, and its end (xrc.cc): close_xrcd fails while any is left.
inline void UseXrcd(SoftXrcd* xrcd) { xrcd->users.fetch_add(1, std::memory_order_relaxed); }
inline void ReleaseXrcd(SoftXrcd* xrcd) { xrcd->users.fetch_sub(1, std::memory_order_relaxed); }
void InstallCqExOps(SoftCq* cq);

}  // namespace softnic
