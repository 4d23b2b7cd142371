// The shared-memory layout of a softnic fabric: one file mapped by every process that
// uses the fabric. Everything a peer must find without asking the owner lives here:
// devices, their QP and MR tables, fault settings, per-process liveness and counters.
// Queues and registered memory live in separate named objects (object.h).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace softnic {

constexpr uint32_t kFabricMagic = 0x534e4943;  // "SNIC"
constexpr uint32_t kFabricLayoutVersion = 14;  // bump with every change to this file's shared structs
// Enough for one emulated node per process of the largest placements (nosql Fig. 12's 24
// clients and a server; HERD's clients one per node). The tables of devices a fabric does
// not have, and the counter blocks no thread claimed, are never written: the file is sparse
// (a 2-device fabric allocates what it did with 16; its size is ~1.9 GB, its use a few MB).
constexpr uint32_t kMaxDevices = 256;
constexpr uint32_t kDefaultDevices = 2;
constexpr uint32_t kMaxProcesses = 128;
constexpr uint32_t kQpIndexBits = 12;
constexpr uint32_t kMaxQpsPerDevice = 1u << kQpIndexBits;
constexpr uint32_t kMrIndexBits = 12;
constexpr uint32_t kMaxMrsPerDevice = 1u << kMrIndexBits;
constexpr uint32_t kMaxMrSegments = 16;
constexpr size_t kPageBytes = 4096;
constexpr size_t kCacheLineBytes = 64;
constexpr uint32_t kQpnMask = 0xffffff;  // QPNs are 24-bit on the wire
constexpr uint32_t kEntryReserved = 0xffffffffu;  // a table entry being filled in
constexpr uint32_t kMaxMulticastAttachments = 1024;  // (group, QP) pairs in a fabric
constexpr uint32_t kMaxSharedXrcds = 256;  // XRC domains opened through a file, in a fabric
static_assert(kQpIndexBits < 24, "QPN = random high bits | table index, within 24 bits");

enum class LinkLayer : uint8_t { kInfiniBand = 1, kEthernet = 2 };

// Device attributes, fixed when the fabric is created (a ConnectX-like profile).
struct DeviceAttributes {
  uint32_t max_qp_wr = 16384;
  uint32_t max_sge = 32;
  uint32_t max_inline_bytes = 256;
  uint32_t max_qp_rd_atom = 16;
  uint32_t max_cqe = 4194303;
  uint32_t max_srq_wr = 16384;
  uint32_t max_pd = 1 << 20;
  uint32_t active_mtu_bytes = 4096;
};

struct FaultSettings {
  std::atomic<uint32_t> drop_ppm{0};  // UC/UD message drop probability, parts per million
  std::atomic<uint32_t> delay_us{0};  // added to every message
  std::atomic<uint32_t> down{0};      // the device neither sends nor receives
};

// Counters are per (process, device) and written only by that process (no shared cache
// line between a sender and a receiver); readers sum over processes. A delivered message
// or a post adds to the run kTxPackets..kWorkRequests at once (accounting.h); within it,
// kPcieMmioBytes..kWireRxPackets are modeled: what the NIC of model/wr_accounting.h would
// do on PCIe and on the wire.
enum Counter : uint32_t {
  kTxPackets,
  kFirstMessageCounter = kTxPackets,
  kTxBytes,
  kRxPackets,
  kRxBytes,
  kPcieMmioBytes,
  kFirstModeledCounter = kPcieMmioBytes,
  kPcieDmaCplBytes,
  kPcieD2hBytes,
  kPcieH2dTlps,
  kPcieD2hTlps,
  kPcieDmaReads,
  kPcieDmaReadLines,
  kWireTxBytes,
  kWireTxPackets,
  kWireRxBytes,
  kWireRxPackets,
  kLastModeledCounter = kWireRxPackets,
  kDoorbells,
  kWorkRequests,
  kLastShapeCounter = kWorkRequests,
  kDroppedNoRecv,
  kDroppedFault,
  kDroppedDeviceDown,
  kDroppedNoDestination,
  kDroppedAccess,
  kRnrRetries,
  kRetryExceeded,
  kRemoteAccessErrors,
  kCqOverruns,
  kCounterCount
};
constexpr bool IsModeled(uint32_t counter) {
  return counter >= kFirstModeledCounter && counter <= kLastModeledCounter;
}

inline constexpr const char* kCounterNames[] = {
    "tx_packets", "tx_bytes", "rx_packets", "rx_bytes",
    // modeled (the names of rdmalab-bench's pcie.modeled counters)
    "pcie_mmio_bytes", "pcie_dma_cpl_bytes", "pcie_d2h_bytes", "pcie_h2d_tlps", "pcie_d2h_tlps",
    "pcie_dma_reads", "pcie_dma_read_lines", "wire_tx_bytes", "wire_tx_packets", "wire_rx_bytes", "wire_rx_packets",
    "doorbells", "work_requests",
    // events
    "dropped_no_recv", "dropped_fault", "dropped_device_down", "dropped_no_destination", "dropped_access",
    "rnr_retries", "retry_exceeded", "remote_access_errors", "cq_overruns"};

static_assert(sizeof(kCounterNames) / sizeof(kCounterNames[0]) == kCounterCount);

constexpr bool SameName(const char* a, const char* b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}

// How many messages of one shape a lane counted (accounting.h): the counters a shape adds
// per message are a pure function of its key, so the hot path adds 1 here and readers
// multiply. key 0 = free.
struct ShapeCount {
  uint64_t key;
  uint64_t count;
};
inline constexpr uint32_t kShapeSlots = 12;

// One lane of a process's counters for one device. Each thread that counts gets a lane of
// its own (a single writer: plain load + store, no cache line shared between threads);
// threads beyond kCounterLanes - 1 share the last lane, marked `shared`, with atomic adds
// (and no shape slots: every message recomputes its counters, several times the cost of a
// private lane's, so a server whose workers outnumber the lanes is bound by its slowest).
// A reader sums value[] and every shape slot's count times its per-message counters;
// `evictions` is odd while the writer folds a slot into value[].
struct alignas(kCacheLineBytes) CounterBlock {
  uint64_t value[kCounterCount];
  uint64_t shared;  // set on the last lane only
  uint32_t evictions;
  uint32_t next_victim;
  ShapeCount shapes[kShapeSlots];
};
// Enough for a thread per core of a 64-core host. A process touches only the lanes its threads
// claimed (ProcessSlot::lanes_used); the rest of the file stays unallocated.
inline constexpr uint32_t kCounterLanes = 64;

// A process attached to the fabric. `liveness` is a robust, process-shared mutex that the
// process's liveness thread holds for the process lifetime. When the process dies the
// kernel clears the owner TID in the mutex word (robust futex list), so any peer can tell
// "alive" from "dead" with one load, without a system call.
struct alignas(kCacheLineBytes) ProcessSlot {
  pthread_mutex_t liveness;
  std::atomic<int32_t> holder_tid{0};
  std::atomic<uint32_t> incarnation{0};
  std::atomic<uint32_t> pid{0};
  // Lanes of `counters` the process's threads claimed so far (may exceed kCounterLanes: the
  // last lane is then shared): readers and the reclaim of a dead process visit only those.
  std::atomic<uint32_t> lanes_used{0};
  CounterBlock counters[kCounterLanes][kMaxDevices];
};

// The lanes of `slot` that a thread may have counted in.
inline uint32_t LanesInUse(const ProcessSlot& slot) {
  uint32_t used = slot.lanes_used.load(std::memory_order_acquire);
  return used < kCounterLanes ? used : kCounterLanes;
}

// A named shared-memory object (queue ring or registered pages). The id encodes its
// owner, so the objects of a dead process can be found and removed.
struct ObjectRef {
  uint64_t id = 0;
  uint64_t bytes = 0;
};

// An XRC SRQ takes a QP table entry too, of this type (no ibv_qp_type has it): an XRC
// sender names it by number (ibv_get_srq_num) as any sender names a QP, so it finds the
// ring, CQ and PD there the same way. Its state is RTS while it exists.
constexpr uint32_t kXrcSrqEntryType = 0x100;

struct QpEntry {
  std::atomic<uint32_t> qpn{0};  // 0 = free, kEntryReserved = being filled; published last
  std::atomic<uint32_t> state{0};  // enum ibv_qp_state
  uint32_t type = 0;               // enum ibv_qp_type, or kXrcSrqEntryType
  uint32_t owner_slot = 0;
  uint32_t owner_incarnation = 0;
  uint32_t pd_id = 0;
  // IBV_ACCESS_REMOTE_WRITE / _READ / _ATOMIC of ibv_modify_qp: the operations this QP
  // answers as a responder (read by every requester on each RDMA WRITE, READ and atomic).
  std::atomic<uint32_t> qp_access_flags{0};
  std::atomic<uint32_t> qkey{0};
  std::atomic<uint32_t> min_rnr_timer{0};
  uint32_t recv_sge_capacity = 0;
  uint32_t uses_srq = 0;
  // XRC receive QPs and XRC SRQs: the XRC domain (XrcdEntry ids and those of domains
  // opened without a file share one space); a message reaches an SRQ only through a
  // receive QP of its domain. 0 for every other entry.
  uint32_t xrcd_id = 0;
  ObjectRef recv_queue;  // the QP's receive ring, or its SRQ's (none on an XRC receive QP)
  ObjectRef recv_cq;
};

// What holds a run of registered pages, and so how a peer maps it (verbs/memory.cc).
enum class Backing : uint32_t {
  kAnchor = 0,      // private memory moved into an anchor object: `id` names the object
  kSysv = 1,        // a SysV shm segment, `id` its shmid: a peer attaches the whole segment
  kDescriptor = 2,  // a shared file, memfd or hugetlbfs mapping: `id` names the descriptor the
                    // owner serves (fabric/descriptors.h)
};

// A run of registered pages: a slice of one backing object.
struct MrSegment {
  uint64_t id = 0;
  uint64_t offset = 0;  // byte offset of the first page inside the backing
  uint64_t bytes = 0;   // page multiple; segments are contiguous in address order
  // What a peer must map besides the run, before and after it: the rest of the huge pages
  // at its ends, or of the SysV segment (attached whole). Non-zero only at the region's
  // ends, where nothing else of the region lies.
  uint64_t lead = 0;
  uint64_t trail = 0;
  Backing backing = Backing::kAnchor;
  uint32_t page_shift = 0;  // the backing's page size: a peer maps it at the owner's
                            // address modulo this
};

// `generation` is a sequence lock over the rest of the entry. A writer (reg, rereg, dereg,
// reclaim; one at a time: the owner, or the reclaimer of a dead owner) makes it odd with
// BeginMrChange, changes the fields, and makes it even and larger with EndMrChange. A
// reader checks the key and reads the fields between two loads of an even, unchanged
// generation. A translation cached with generation G (send_fast.h) is valid exactly while
// the entry's generation is still G: one acquire load on the post path, and every change
// to the entry kills every cached copy of it in every process before the change returns.
struct MrEntry {
  std::atomic<uint64_t> generation{0};
  std::atomic<uint32_t> key{0};  // lkey == rkey; 0 = free; published last, cleared on dereg
  uint32_t access = 0;
  uint32_t pd_id = 0;
  uint32_t owner_slot = 0;
  uint32_t owner_incarnation = 0;
  uint32_t segment_count = 0;
  uint64_t addr = 0;       // first address as peers name it (the iova)
  uint64_t length = 0;
  uint64_t va = 0;         // first address in the owner
  uint64_t page_base = 0;  // va rounded down to a page: where segment 0 starts
  MrSegment segments[kMaxMrSegments];
  // The generation at which `segments` (their backings, ids and offsets included; and va,
  // page_base) last changed: peers key their
  // mappings of the region by it, so that an access or PD change keeps the mapping and a
  // new translation (re-registration, rereg of the range) never reuses an old one.
  uint64_t translation_generation = 0;
};

struct DeviceEntry {
  char name[32];
  uint64_t node_guid = 0;  // host byte order
  uint16_t lid = 0;
  uint8_t gid[16];
  FaultSettings faults;
  CounterBlock retired;  // counters of processes that have left the fabric
  QpEntry qps[kMaxQpsPerDevice];
  MrEntry mrs[kMaxMrsPerDevice];
};

// One QP attached to one multicast group (ibv_attach_mcast). A UD SEND to the group is
// delivered to every QP attached to it, on any device. An entry whose QP has gone (its QP
// table entry no longer holds `qpn`) is free for reuse.
struct MulticastAttachment {
  std::atomic<uint32_t> qpn{0};  // 0 = free, kEntryReserved = being filled; published last
  uint16_t device = 0;
  uint16_t mlid = 0;
  uint8_t mgid[16] = {};
};

// An XRC domain opened through a file (ibv_open_xrcd with an fd): every process that
// opens the same file on the same device gets the same domain, as the kernel keys XRC
// domains by inode. Taken and released under `admin`; `holders` has a bit per process
// slot that has it open, and the entry is free again once none has (a dead process's bit
// is cleared when its slot is reclaimed).
struct XrcdEntry {
  uint32_t id = 0;  // 0 = free
  uint32_t device = 0;
  uint64_t file_device = 0;
  uint64_t file_inode = 0;
  uint64_t holders[kMaxProcesses / 64] = {};

  void Hold(uint32_t slot) { holders[slot / 64] |= uint64_t{1} << (slot % 64); }
  // The process in `slot` holds it no more; the last holder frees the entry.
  void Release(uint32_t slot) {
    holders[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    bool held = false;
    for (uint64_t word : holders) held |= word != 0;
    if (!held) id = 0;
  }
};
static_assert(kMaxProcesses % 64 == 0);

struct FabricHeader {
  std::atomic<uint32_t> magic{0};  // set last by the creator
  uint32_t layout_version = 0;
  uint32_t device_count = 0;
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  DeviceAttributes attributes;
  std::atomic<uint32_t> faults_active{0};  // any device has a fault set: the engine's one check
  std::atomic<uint32_t> next_incarnation{0};
  std::atomic<uint32_t> next_pd_id{0};
  std::atomic<uint32_t> next_xrcd_id{0};
  pthread_mutex_t admin;  // robust; serializes slot reclaim and table allocation (cold)
  // Advanced before and after every change to a QP entry's state, number or flags, to an
  // MR entry, or to the fault settings (AdvanceControlEpoch): a cache of a post's checks
  // (SoftQp::write_routes) holds exactly while it has not moved. Alone on its line, which
  // only those changes write.
  alignas(kCacheLineBytes) std::atomic<uint64_t> control_epoch{0};
  ProcessSlot processes[kMaxProcesses];
  DeviceEntry devices[kMaxDevices];
  // Attachments are taken under `admin`, lowest free index first; a sender scans the first
  // `multicast_in_use` (never lowered: it bounds the scan, entries below it may be free).
  std::atomic<uint32_t> multicast_in_use{0};
  MulticastAttachment multicast[kMaxMulticastAttachments];
  XrcdEntry xrcds[kMaxSharedXrcds];  // under admin
};

// Kills every cached set of checks that a change may void, in every process; the
// changer calls it before the change (no post may take a cache through it) and after
// (none may keep one filled from what the change was still writing).
inline void AdvanceControlEpoch(FabricHeader& fabric) {
  fabric.control_epoch.fetch_add(1, std::memory_order_seq_cst);
}
// Makes `change` between the two advances.
template <typename Change>
inline void ChangeBetweenControlEpochs(FabricHeader& fabric, Change&& change) {
  AdvanceControlEpoch(fabric);
  change();
  AdvanceControlEpoch(fabric);
}

// Writer side of MrEntry::generation (the one writer of an entry at a time). Returns the
// generation EndMrChange will publish. Both ends advance the control epoch.
inline uint64_t BeginMrChange(FabricHeader& fabric, MrEntry& entry) {
  AdvanceControlEpoch(fabric);
  uint64_t odd = entry.generation.load(std::memory_order_relaxed) | 1;
  entry.generation.store(odd, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any field changes
  return odd + 1;
}
inline void EndMrChange(FabricHeader& fabric, MrEntry& entry) {
  entry.generation.store((entry.generation.load(std::memory_order_relaxed) | 1) + 1, std::memory_order_release);
  AdvanceControlEpoch(fabric);
}
// Deregisters an entry (dereg_mr, or the reclaim of a dead owner's). The key stays reserved
// until the generation has moved, so that no new registration claims the entry while this
// still writes it.
inline void ClearMrEntry(FabricHeader& fabric, MrEntry& entry) {
  BeginMrChange(fabric, entry);
  entry.key.store(kEntryReserved, std::memory_order_relaxed);
  EndMrChange(fabric, entry);
  entry.key.store(0, std::memory_order_release);
}

}  // namespace softnic
