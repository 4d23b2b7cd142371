// Randomized remote-access safety test, for any provider.
//
// A target process registers regions inside buffers fenced by PROT_NONE guard pages, with
// random offsets, lengths and access flags, plus one deregistered key: buffers of private
// memory, and buffers of memory that is already shared (every kind of shared_memory.h the
// machine has: SysV with and without huge pages, shared files, memfds, hugetlbfs files,
// huge-page memfds), which a provider must reach where it is. A requester process
// issues SAFETY_OPS (default 1,000,000) random RDMA WRITE / READ / FETCH_ADD / CMP_SWAP with
// random keys, addresses and lengths. Every so often it also has the target change what
// those operations meet: the target QP's qp_access_flags (ibv_modify_qp), a region's access
// flags, PD or range (ibv_rereg_mr), or a region deregistered and registered again with a
// new key (of a shared buffer: registered again through its backing, the old one released).
// Most changes complete before the next operation; some race with the operations
// that follow them, which may then see the old state or the new one (or, while a region is
// between dereg and reg, no region at all).
//
// Every completion must carry exactly the status the rules predict for a state it may have
// met (success, IBV_WC_REM_ACCESS_ERR, or IBV_WC_REM_INV_REQ_ERR for a misaligned atomic or
// a target QP that does not enable the operation). A shadow copy of every buffer predicts
// what successful READs and atomics return; bytes a racing operation may have written are
// "uncertain" until an ordinary operation writes them again. At the end the target sends its
// buffers back, and every certain byte, inside regions or not, must equal the shadow: of a
// shared buffer the whole of it (a huge page or a SysV segment is larger than the region).
// A stray access past a buffer faults on a guard page and fails the test.
#include <infiniband/verbs.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "shared_memory.h"

namespace {

constexpr size_t kPageBytes = 4096;
constexpr int kPrivateRegions = 8;
constexpr int kMaxRegions = kPrivateRegions + 6;  // and one per kind of shared memory
constexpr size_t kBufferPages = 4;  // the most a region spans; a private buffer has just these
constexpr size_t kBufferBytes = kBufferPages * kPageBytes;
constexpr uint8_t kCanary = 0xa5;
constexpr uint32_t kMaxOpBytes = 2 * kPageBytes;
constexpr auto kPollDeadline = std::chrono::seconds(10);
constexpr uint32_t kOpsPerChange = 200;  // on average
constexpr uint32_t kRacePercent = 30;    // changes that race with the operations after them
constexpr uint32_t kMaxRacingOps = 6;
constexpr uint32_t kMaxDeadKeys = 64;

constexpr uint32_t kRemoteAll = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr uint32_t kRegionAccess[] = {
    IBV_ACCESS_LOCAL_WRITE | kRemoteAll,
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
    IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
    IBV_ACCESS_LOCAL_WRITE};
// Mostly everything, so that the regions' own checks stay in play.
constexpr uint32_t kQpAccess[] = {kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll,
                                  kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll, kRemoteAll,
                                  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
                                  IBV_ACCESS_REMOTE_WRITE,
                                  0};

struct RegionInfo {
  uint64_t addr;
  uint64_t length;
  uint32_t rkey;
  uint32_t access;
  uint32_t in_qp_pd;  // 0 after a rereg moved it to the target's other PD
  uint32_t pad;
};

struct Endpoint {
  uint32_t qpn;
  uint16_t lid;
  uint8_t gid[16];
};

struct TargetInfo {
  Endpoint endpoint;
  uint64_t buffers[kMaxRegions];       // address of each fenced buffer
  uint64_t buffer_bytes[kMaxRegions];  // its size: kBufferBytes, or the shared memory's
  RegionInfo regions[kMaxRegions];
  int32_t region_count;                // kPrivateRegions, then one per shared kind the machine has
  uint32_t dead_rkey;
  uint32_t qp_access;
  uint64_t seed;
};

enum class ChangeKind : uint32_t { kQpAccess, kReregAccess, kReregPd, kReregRange, kReregister, kCount, kDone };

struct Change {
  ChangeKind kind;
  uint32_t region;
  uint32_t access;
  uint32_t offset;  // kReregRange, kReregister: the new range inside the region's buffer
  uint32_t length;
};

struct ChangeReply {
  RegionInfo region;  // after the change (unchanged for kQpAccess or an unsupported change)
  int32_t error;      // 0, or the errno of a refused change
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "safety: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::exit(1);
}

void WriteAll(int fd, const void* data, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = write(fd, static_cast<const char*>(data) + done, bytes - done);
    if (n <= 0) Die("pipe write");
    done += size_t(n);
  }
}
void ReadAll(int fd, void* data, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = read(fd, static_cast<char*>(data) + done, bytes - done);
    if (n <= 0) Die("pipe read");
    done += size_t(n);
  }
}

struct Verbs {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  bool roce = false;
  Endpoint self{};
};

Verbs Open(int device_index) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) Die("no RDMA device");
  Verbs v;
  v.context = ibv_open_device(list[device_index % count]);
  ibv_free_device_list(list);
  if (!v.context) Die("ibv_open_device");
  v.pd = ibv_alloc_pd(v.context);
  v.cq = ibv_create_cq(v.context, 64, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = v.cq;
  init.recv_cq = v.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  v.qp = ibv_create_qp(v.pd, &init);
  if (!v.pd || !v.cq || !v.qp) Die("PD/CQ/QP creation");
  ibv_port_attr port{};
  ibv_query_port(v.context, 1, &port);
  v.roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  v.self.qpn = v.qp->qp_num;
  v.self.lid = port.lid;
  ibv_gid gid{};
  ibv_query_gid(v.context, 1, 0, &gid);
  std::memcpy(v.self.gid, gid.raw, 16);
  return v;
}

void Connect(Verbs& v, const Endpoint& peer, uint32_t qp_access) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  if (ibv_modify_qp(v.qp, &attr, IBV_QP_STATE)) Die("to RESET");
  attr = {};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = qp_access;
  if (ibv_modify_qp(v.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    Die("to INIT");
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = peer.qpn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = 1;
  attr.ah_attr.dlid = peer.lid;
  if (v.roce) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, 16);
    attr.ah_attr.grh.hop_limit = 1;
  }
  if (ibv_modify_qp(v.qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    Die("to RTR");
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  if (ibv_modify_qp(v.qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
    Die("to RTS");
  }
}

uint8_t InitialByte(uint64_t seed, int region, uint64_t offset) {
  return uint8_t((seed >> (offset % 7)) ^ (uint64_t(region) * 131) ^ (offset * 2654435761u));
}

// A random range of at most kBufferBytes inside a buffer of `bytes`: for a private buffer
// within its first page and on, for shared memory anywhere (at its start, its end, or inside
// a huge page, where the rest of the page is the provider's to leave alone).
template <typename Random>
void RandomRange(Random& random, uint64_t bytes, uint64_t* offset, uint64_t* length) {
  *offset = random() % (bytes - (kBufferPages - 1) * kPageBytes);
  uint64_t span = std::min<uint64_t>(bytes - *offset, kBufferBytes);
  *length = 8 + random() % (span - 8);
}

// ---- target ------------------------------------------------------------------------

// A buffer under a region: private pages between guard pages, or shared memory of one kind.
struct Buffer {
  uint8_t* base;
  size_t bytes;
  std::unique_ptr<conformance::SharedArea> shared;
};

std::vector<Buffer> MakeBuffers() {
  std::vector<Buffer> buffers;
  for (int r = 0; r < kPrivateRegions; ++r) {
    size_t total = kBufferBytes + 2 * kPageBytes;
    auto* base = static_cast<uint8_t*>(mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) Die("mmap");
    if (mprotect(base + kPageBytes, kBufferBytes, PROT_READ | PROT_WRITE)) Die("mprotect");
    buffers.push_back(Buffer{base + kPageBytes, kBufferBytes, nullptr});
  }
  for (conformance::SharedKind kind : conformance::AllSharedKinds()) {
    std::string reason;
    bool unavailable = false;
    size_t bytes = conformance::IsHuge(kind) ? conformance::kHugePageBytes : kBufferBytes;
    auto shared = conformance::SharedArea::Create(kind, bytes, IPC_PRIVATE, &reason, &unavailable);
    if (shared == nullptr && !unavailable) {
      Die(("creating " + conformance::SharedKindName(kind) + " memory: " + reason).c_str());
    }
    if (shared == nullptr) {
      std::fprintf(stderr, "safety: no %s region: %s\n", conformance::SharedKindName(kind).c_str(), reason.c_str());
      continue;
    }
    uint8_t* base = shared->data();
    buffers.push_back(Buffer{base, bytes, std::move(shared)});
  }
  return buffers;
}

struct Target {
  Verbs v;
  ibv_pd* other_pd = nullptr;
  std::vector<Buffer> buffers;
  int region_count = 0;
  ibv_mr* mrs[kMaxRegions] = {};
  RegionInfo regions[kMaxRegions] = {};
};

RegionInfo Describe(const ibv_mr* mr, uint32_t access, bool in_qp_pd) {
  return RegionInfo{uint64_t(uintptr_t(mr->addr)), mr->length, mr->rkey, access, in_qp_pd ? 1u : 0u, 0};
}

ChangeReply Apply(Target& t, const Change& change) {
  ChangeReply reply{};
  uint32_t index = change.region % uint32_t(t.region_count);
  RegionInfo& region = t.regions[index];
  ibv_mr*& mr = t.mrs[index];
  uint8_t* buffer = t.buffers[index].base;
  errno = 0;
  switch (change.kind) {
    case ChangeKind::kQpAccess: {
      ibv_qp_attr attr{};
      attr.qp_access_flags = change.access;
      if (ibv_modify_qp(t.v.qp, &attr, IBV_QP_ACCESS_FLAGS)) Die("ibv_modify_qp(IBV_QP_ACCESS_FLAGS) in RTS");
      break;
    }
    case ChangeKind::kReregAccess:
      if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, int(change.access)) != 0) {
        reply.error = errno;
      } else {
        region.access = change.access;
      }
      break;
    case ChangeKind::kReregPd: {
      ibv_pd* pd = region.in_qp_pd ? t.other_pd : t.v.pd;
      if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, nullptr, 0, 0) != 0) {
        reply.error = errno;
      } else {
        region.in_qp_pd ^= 1;
      }
      break;
    }
    case ChangeKind::kReregRange:
      if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buffer + change.offset, change.length, 0) != 0) {
        reply.error = errno;
      } else {
        region = Describe(mr, region.access, region.in_qp_pd);
      }
      break;
    case ChangeKind::kReregister:
      if (ibv_dereg_mr(mr)) Die("ibv_dereg_mr");
      mr = ibv_reg_mr(t.v.pd, buffer + change.offset, change.length, int(change.access));
      if (!mr) Die("ibv_reg_mr (again)");
      region = Describe(mr, change.access, true);
      break;
    default: Die("unknown change");
  }
  reply.region = region;
  return reply;
}

int RunTarget(int to_requester, int from_requester) {
  Target t;
  t.v = Open(1);
  t.other_pd = ibv_alloc_pd(t.v.context);
  if (!t.other_pd) Die("ibv_alloc_pd (other)");
  std::mt19937_64 random(std::random_device{}());
  TargetInfo info{};
  info.seed = random();
  t.buffers = MakeBuffers();
  t.region_count = int(t.buffers.size());
  info.region_count = t.region_count;
  for (int r = 0; r < t.region_count; ++r) {
    Buffer& buffer = t.buffers[size_t(r)];
    std::memset(buffer.base, kCanary, buffer.bytes);
    uint64_t offset, length;
    RandomRange(random, buffer.bytes, &offset, &length);
    for (uint64_t i = 0; i < length; ++i) buffer.base[offset + i] = InitialByte(info.seed, r, offset + i);
    uint32_t access = kRegionAccess[random() % std::size(kRegionAccess)];
    t.mrs[r] = ibv_reg_mr(t.v.pd, buffer.base + offset, length, int(access));
    if (!t.mrs[r]) Die("ibv_reg_mr");
    t.regions[r] = Describe(t.mrs[r], access, true);
    info.buffers[r] = uint64_t(uintptr_t(buffer.base));
    info.buffer_bytes[r] = buffer.bytes;
    info.regions[r] = t.regions[r];
  }
  ibv_mr* dead = ibv_reg_mr(t.v.pd, t.buffers[0].base, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                         IBV_ACCESS_REMOTE_READ);
  if (!dead) Die("ibv_reg_mr (to deregister)");
  info.dead_rkey = dead->rkey;
  ibv_dereg_mr(dead);
  info.qp_access = kRemoteAll;
  info.endpoint = t.v.self;
  WriteAll(to_requester, &info, sizeof(info));
  Endpoint peer;
  ReadAll(from_requester, &peer, sizeof(peer));
  Connect(t.v, peer, info.qp_access);
  char ready = 'r';
  WriteAll(to_requester, &ready, 1);
  for (;;) {
    Change change;
    ReadAll(from_requester, &change, sizeof(change));
    if (change.kind == ChangeKind::kDone) break;
    ChangeReply reply = Apply(t, change);
    WriteAll(to_requester, &reply, sizeof(reply));
  }
  for (const Buffer& buffer : t.buffers) WriteAll(to_requester, buffer.base, buffer.bytes);
  return 0;
}

// ---- requester ---------------------------------------------------------------------

// What the requester knows of the target: its regions and QP access flags.
struct TargetState {
  RegionInfo regions[kMaxRegions];
  int region_count;
  uint32_t qp_access;
};

struct Op {
  int kind;  // 0 write, 1 read, 2 fetch-add, 3 compare-swap
  uint32_t key;
  uint64_t address;
  uint64_t length;
};

uint32_t NeededAccess(int kind) {
  return kind == 0 ? IBV_ACCESS_REMOTE_WRITE : kind == 1 ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_ATOMIC;
}

// The region whose current key is `key`, or -1.
int RegionOfKey(const TargetState& state, uint32_t key) {
  for (int r = 0; r < state.region_count; ++r)
    if (state.regions[r].rkey == key) return r;
  return -1;
}

// The statuses an op may complete with in `state`, as a bit set over ibv_wc_status.
uint32_t Allowed(const TargetState& state, const Op& op, int* region_out) {
  bool atomic = op.kind >= 2;
  uint32_t needed = NeededAccess(op.kind);
  int r = RegionOfKey(state, op.key);
  *region_out = -1;
  if ((state.qp_access & needed) == 0) return 1u << IBV_WC_REM_INV_REQ_ERR;
  bool key_valid = r >= 0 && state.regions[r].in_qp_pd && (state.regions[r].access & needed) == needed;
  const RegionInfo& keyed = r >= 0 ? state.regions[r] : state.regions[0];
  bool in_range = key_valid && op.address >= keyed.addr && op.length <= keyed.length &&
                  op.address - keyed.addr <= keyed.length - op.length;
  bool aligned = (op.address & 7) == 0;
  if (key_valid && in_range && (!atomic || aligned)) {
    *region_out = r;
    return 1u << IBV_WC_SUCCESS;
  }
  if (atomic && !aligned) {
    // A misaligned atomic that would otherwise pass is an invalid request; one that also
    // fails the key or range checks may be reported either way by a provider.
    return key_valid && in_range ? 1u << IBV_WC_REM_INV_REQ_ERR
                                 : (1u << IBV_WC_REM_INV_REQ_ERR) | (1u << IBV_WC_REM_ACCESS_ERR);
  }
  return 1u << IBV_WC_REM_ACCESS_ERR;
}

struct Requester {
  Verbs v;
  TargetInfo info{};
  TargetState state{};
  std::vector<uint32_t> dead_keys;
  std::vector<std::vector<uint8_t>> shadow;     // per buffer
  std::vector<std::vector<uint8_t>> uncertain;  // per buffer: 1 where a racing op may have written
  std::vector<uint8_t> local;
  ibv_mr* local_mr = nullptr;
  std::mt19937_64 random;
  int to_target = -1, from_target = -1;
  bool range_change_supported = true;
  bool rereg_supported = true;
  long counts[3] = {0, 0, 0};  // success, access errors, invalid-request errors
  long shared_successes = 0;   // successes on shared memory
  long changes[size_t(ChangeKind::kCount)] = {};
  long shared_changes = 0;     // changes of regions of shared memory
  long racing_ops = 0;

  // Which buffer (and offset) an address of region r's key lands in.
  size_t BufferOffset(int region, uint64_t address) const { return address - info.buffers[region]; }

  Op RandomOp() {
    Op op{};
    int r = int(random() % uint64_t(state.region_count));
    const RegionInfo& region = state.regions[r];
    op.kind = int(random() % 4);
    uint32_t pick = random() % 100;
    if (pick < 80) {
      op.key = region.rkey;
    } else if (pick < 88) {
      op.key = uint32_t(random());
    } else if (pick < 94) {
      op.key = dead_keys[random() % dead_keys.size()];
    } else {
      op.key = state.regions[random() % uint64_t(state.region_count)].rkey;
    }
    bool atomic = op.kind >= 2;
    op.length = atomic ? 8 : 1 + random() % kMaxOpBytes;
    int64_t offset;
    if (random() % 10 < 7) {
      offset = int64_t(random() % std::max<uint64_t>(region.length, 1));
    } else {
      offset = int64_t(random() % (3 * kPageBytes)) - int64_t(kPageBytes) +
               (random() % 2 ? int64_t(region.length) : 0);
    }
    op.address = region.addr + uint64_t(offset);
    if (atomic && random() % 10 < 9) op.address &= ~uint64_t{7};
    return op;
  }

  Change RandomChange() {
    Change change{};
    change.region = uint32_t(random() % uint64_t(state.region_count));
    uint32_t pick = random() % 100;
    if (pick < 25 || !rereg_supported) {
      change.kind = ChangeKind::kQpAccess;
      change.access = kQpAccess[random() % std::size(kQpAccess)];
    } else if (pick < 45) {
      change.kind = ChangeKind::kReregAccess;
      change.access = kRegionAccess[random() % std::size(kRegionAccess)];
    } else if (pick < 60) {
      change.kind = ChangeKind::kReregPd;
      // Mostly back to the QP's PD, so that most regions stay reachable.
      if (random() % 10 < 7) {
        for (uint32_t r = 0; r < uint32_t(state.region_count); ++r) {
          if (!state.regions[r].in_qp_pd) change.region = r;
        }
      }
    } else if (pick < 75 && range_change_supported) {
      change.kind = ChangeKind::kReregRange;
    } else {
      change.kind = ChangeKind::kReregister;
      change.access = kRegionAccess[random() % std::size(kRegionAccess)];
    }
    uint64_t offset, length;
    RandomRange(random, info.buffer_bytes[change.region], &offset, &length);
    change.offset = uint32_t(offset);
    change.length = uint32_t(length);
    return change;
  }

  // The target's state once `change` (answered by `reply`) has taken effect.
  TargetState After(const Change& change, const ChangeReply& reply) const {
    TargetState next = state;
    if (change.kind == ChangeKind::kQpAccess) {
      next.qp_access = change.access;
    } else {
      next.regions[change.region] = reply.region;
    }
    return next;
  }

  // Posts `op` and waits for its completion. A WRITE carries fresh random bytes; an atomic
  // adds *add, or compares with `expected` (the shadow's value; flipped half the time) and
  // swaps in *swap.
  ibv_wc PostAndComplete(long index, const Op& op, const uint8_t* expected, uint64_t* add, uint64_t* compare,
                         uint64_t* swap) {
    for (uint64_t i = 0; i < op.length && op.kind == 0; ++i) local[i] = uint8_t(random());
    ibv_sge sge{uintptr_t(local.data()), uint32_t(op.length), local_mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = uint64_t(index);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    *add = random() % 1000;
    *compare = 0;
    *swap = random();
    if (op.kind <= 1) {
      wr.opcode = op.kind == 0 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = op.address;
      wr.wr.rdma.rkey = op.key;
    } else {
      wr.opcode = op.kind == 2 ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
      wr.wr.atomic.remote_addr = op.address;
      wr.wr.atomic.rkey = op.key;
      if (expected != nullptr) std::memcpy(compare, expected, 8);
      if (random() % 2) *compare ^= 1;  // half the swaps must not happen
      wr.wr.atomic.compare_add = op.kind == 2 ? *add : *compare;
      wr.wr.atomic.swap = *swap;
    }
    if (ibv_post_send(v.qp, &wr, &bad)) Die("ibv_post_send");
    ibv_wc wc{};
    auto deadline = std::chrono::steady_clock::now() + kPollDeadline;
    int polled;
    while ((polled = ibv_poll_cq(v.cq, 1, &wc)) == 0) {
      if (std::chrono::steady_clock::now() > deadline) Die("no completion within 10 s");
    }
    if (polled < 0) Die("ibv_poll_cq");
    return wc;
  }

  void ReportForbidden(long index, const Op& op, const TargetState& state, uint32_t allowed, bool racing,
                       const ibv_wc& wc) {
    std::fprintf(stderr,
                 "safety: op %ld kind %d key %#x addr %#lx len %lu%s (target QP access %#x): status %s; allowed:",
                 index, op.kind, op.key, (unsigned long)op.address, (unsigned long)op.length,
                 racing ? " racing a change" : "", state.qp_access, ibv_wc_status_str(wc.status));
    for (uint32_t s = 0; s < 32; ++s)
      if (allowed & (1u << s)) std::fprintf(stderr, " %s", ibv_wc_status_str(ibv_wc_status(s)));
    std::fprintf(stderr, "\n");
  }

  // A successful op's data against the shadow copy at `mirror`, which then takes its effect.
  // `certain`: no byte it touched is unknown, so an atomic's old value must match.
  bool CheckAndMirror(long index, const Op& op, uint8_t* mirror, uint8_t* unsure, bool racing, bool certain,
                      uint64_t add, uint64_t compare, uint64_t swap) {
    if (op.kind == 0) {
      std::memcpy(mirror, local.data(), op.length);
      // A racing WRITE may have gone to pages a re-registration had already copied.
      std::memset(unsure, racing ? 1 : 0, op.length);
      return true;
    }
    if (op.kind == 1) {
      for (uint64_t i = 0; i < op.length; ++i) {
        if (!unsure[i] && local[i] != mirror[i]) {
          std::fprintf(stderr, "safety: op %ld READ byte %lu differs from the shadow copy\n", index, (unsigned long)i);
          return false;
        }
      }
      return true;
    }
    if (!certain) {
      std::memset(unsure, 1, 8);  // the old value, and so the new one, is unknown
      return true;
    }
    if (std::memcmp(local.data(), mirror, 8) != 0) {
      std::fprintf(stderr, "safety: op %ld atomic returned a value differing from the shadow copy\n", index);
      return false;
    }
    uint64_t value;
    std::memcpy(&value, mirror, 8);
    if (op.kind == 2) value += add;
    if (op.kind == 3 && value == compare) value = swap;
    std::memcpy(mirror, &value, 8);
    return true;
  }

  // Posts `op`, waits for its completion, and checks it against the states it may meet.
  // False (after a message) when the completion breaks the rules.
  bool Run(long index, const Op& op, const TargetState* states, int state_count, bool racing) {
    bool atomic = op.kind >= 2;
    uint32_t allowed = 0;
    int regions[3] = {-1, -1, -1};
    for (int s = 0; s < state_count; ++s) allowed |= Allowed(states[s], op, &regions[s]);
    int success_region = -1;
    for (int s = 0; s < state_count; ++s)
      if (regions[s] >= 0) success_region = regions[s];
    // The data of a successful op: one buffer whichever state it met (a region's key, and
    // so its buffer, is the same in every state it may meet).
    size_t buffer = success_region >= 0 ? size_t(success_region) : 0;
    size_t at = success_region >= 0 ? BufferOffset(success_region, op.address) : 0;
    bool certain = !racing;
    for (uint64_t i = 0; success_region >= 0 && i < (atomic ? 8 : op.length); ++i)
      certain = certain && !uncertain[buffer][at + i];

    uint64_t add = 0, compare = 0, swap = 0;
    const ibv_wc wc =
        PostAndComplete(index, op, success_region >= 0 ? &shadow[buffer][at] : nullptr, &add, &compare, &swap);
    if (wc.status >= 32 || (allowed & (1u << wc.status)) == 0) {
      ReportForbidden(index, op, states[0], allowed, racing, wc);
      return false;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      ++counts[wc.status == IBV_WC_REM_ACCESS_ERR ? 1 : 2];
      Connect(v, info.endpoint, kRemoteAll);  // the error moved the QP to ERR
      return true;
    }
    ++counts[0];
    if (success_region >= kPrivateRegions) ++shared_successes;
    return CheckAndMirror(index, op, &shadow[buffer][at], &uncertain[buffer][at], racing, certain, add, compare, swap);
  }

  void ForgetKey(uint32_t key) {
    if (dead_keys.size() >= kMaxDeadKeys) dead_keys.erase(dead_keys.begin() + 1);  // keep the first
    dead_keys.push_back(key);
  }

  // Sends a change; when it races, runs up to kMaxRacingOps ops before reading the reply.
  bool RunChange(long* op_index, long operations) {
    Change change = RandomChange();
    bool racing = random() % 100 < kRacePercent;
    WriteAll(to_target, &change, sizeof(change));
    ChangeReply reply{};
    if (!racing) ReadAll(from_target, &reply, sizeof(reply));
    uint32_t old_key = state.regions[change.region].rkey;
    uint32_t racing_count = racing ? 1 + uint32_t(random() % kMaxRacingOps) : 0;
    for (uint32_t i = 0; i < racing_count && *op_index < operations; ++i, ++*op_index) {
      // Not yet known: what the change does. Before it, after an access, PD or QP change,
      // or (for a re-registration) with the old key gone: the op meets one of these.
      TargetState before = state;
      TargetState states[3] = {before, before, before};
      int count = 1;
      if (change.kind == ChangeKind::kQpAccess) {
        states[count] = before;
        states[count++].qp_access = change.access;
      } else {
        RegionInfo& changed = states[count++].regions[change.region];
        if (change.kind == ChangeKind::kReregAccess) changed.access = change.access;
        if (change.kind == ChangeKind::kReregPd) changed.in_qp_pd ^= 1;
        if (change.kind == ChangeKind::kReregRange) {
          changed.addr = info.buffers[change.region] + change.offset;
          changed.length = change.length;
        }
        if (change.kind == ChangeKind::kReregister) changed.access = 0;  // the old key names nothing
      }
      ++racing_ops;
      if (!Run(*op_index, RandomOp(), states, count, true)) return false;
    }
    if (racing) ReadAll(from_target, &reply, sizeof(reply));
    if (reply.error != 0) {
      // A provider that does not implement a change: the fuzz goes on without it.
      if (change.kind == ChangeKind::kReregRange) range_change_supported = false;
      if (change.kind == ChangeKind::kReregAccess || change.kind == ChangeKind::kReregPd) rereg_supported = false;
      return true;
    }
    ++changes[size_t(change.kind)];
    if (change.kind != ChangeKind::kQpAccess && change.region >= uint32_t(kPrivateRegions)) ++shared_changes;
    state = After(change, reply);
    if (change.kind == ChangeKind::kReregister && state.regions[change.region].rkey != old_key) ForgetKey(old_key);
    return true;
  }

  // The target's buffers, byte for byte, against the shadow (uncertain bytes excepted).
  bool CheckBuffers() {
    std::vector<uint8_t> actual;
    long damaged = 0;
    for (int r = 0; r < state.region_count; ++r) {
      actual.resize(info.buffer_bytes[r]);
      ReadAll(from_target, actual.data(), actual.size());
      for (size_t i = 0; i < actual.size(); ++i) {
        if (!uncertain[r][i] && actual[i] != shadow[r][i]) {
          if (damaged++ < 5) {
            std::fprintf(stderr, "safety: buffer %d byte %zu is %#x, expected %#x\n", r, i, actual[i], shadow[r][i]);
          }
        }
      }
    }
    if (damaged != 0) std::fprintf(stderr, "safety: %ld bytes differ from what the operations predict\n", damaged);
    return damaged == 0;
  }
};

int RunRequester(int from_target, int to_target, long operations) {
  Requester q;
  q.to_target = to_target;
  q.from_target = from_target;
  ReadAll(from_target, &q.info, sizeof(q.info));
  q.v = Open(0);
  WriteAll(to_target, &q.v.self, sizeof(q.v.self));
  char ready;
  ReadAll(from_target, &ready, 1);
  Connect(q.v, q.info.endpoint, kRemoteAll);
  q.local.resize(kMaxOpBytes + 64);
  q.local_mr = ibv_reg_mr(q.v.pd, q.local.data(), q.local.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!q.local_mr) Die("local ibv_reg_mr");
  int regions = q.info.region_count;
  std::copy(q.info.regions, q.info.regions + regions, q.state.regions);
  q.state.region_count = regions;
  q.state.qp_access = q.info.qp_access;
  q.dead_keys.push_back(q.info.dead_rkey);
  for (int r = 0; r < regions; ++r) {
    q.shadow.emplace_back(q.info.buffer_bytes[r], kCanary);
    q.uncertain.emplace_back(q.info.buffer_bytes[r], 0);
  }
  for (int r = 0; r < regions; ++r) {
    size_t begin = q.BufferOffset(r, q.info.regions[r].addr);
    for (uint64_t i = 0; i < q.info.regions[r].length; ++i) q.shadow[r][begin + i] = InitialByte(q.info.seed, r, begin + i);
  }
  q.random.seed(q.info.seed ^ 0x5eed);
  for (long op = 0; op < operations;) {
    if (q.random() % kOpsPerChange == 0) {
      if (!q.RunChange(&op, operations)) return 1;
      continue;
    }
    const TargetState states[1] = {q.state};
    if (!q.Run(op, q.RandomOp(), states, 1, false)) return 1;
    ++op;
  }
  Change done{};
  done.kind = ChangeKind::kDone;
  WriteAll(to_target, &done, sizeof(done));
  if (!q.CheckBuffers()) return 1;
  long total_changes = 0;
  for (long c : q.changes) total_changes += c;
  std::printf("safety: %ld operations on %d regions (%d of shared memory): %ld succeeded (%ld on shared memory), "
              "%ld access errors, %ld invalid requests, all as predicted; "
              "%ld changes (QP access %ld, rereg access %ld, rereg PD %ld, rereg range %ld, re-register %ld; "
              "%ld of regions of shared memory), %ld operations raced one\n",
              operations, regions, regions - kPrivateRegions, q.counts[0], q.shared_successes, q.counts[1],
              q.counts[2], total_changes, q.changes[size_t(ChangeKind::kQpAccess)],
              q.changes[size_t(ChangeKind::kReregAccess)], q.changes[size_t(ChangeKind::kReregPd)],
              q.changes[size_t(ChangeKind::kReregRange)], q.changes[size_t(ChangeKind::kReregister)],
              q.shared_changes, q.racing_ops);
  return 0;
}

}  // namespace

int main() {
  long operations = 1000000;
  if (const char* text = std::getenv("SAFETY_OPS")) operations = std::atol(text);
  int to_requester[2], to_target[2];
  if (pipe(to_requester) || pipe(to_target)) Die("pipe");
  pid_t target = fork();
  if (target < 0) Die("fork");
  if (target == 0) {
    close(to_requester[0]);
    close(to_target[1]);
    std::_Exit(RunTarget(to_requester[1], to_target[0]));
  }
  // Only the peer holds the other ends, so its death is end-of-file here, never a hang.
  close(to_requester[1]);
  close(to_target[0]);
  int rc = RunRequester(to_requester[0], to_target[1], operations);
  if (rc != 0) kill(target, SIGKILL);
  int status = 0;
  waitpid(target, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "safety: target process failed (status %#x)\n", status);
    return 1;
  }
  return rc;
}
