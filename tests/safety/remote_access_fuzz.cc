// Randomized remote-access safety test, for any provider.
//
// A target process registers regions fenced by PROT_NONE guard pages, with random offsets,
// lengths and access flags, plus one deregistered key: regions of private memory, and
// regions of memory that is already shared (every kind of shared_memory.h the machine
// has: SysV with and without huge pages, shared files, memfds, hugetlbfs files), which a
// provider must reach where it is. A requester process issues SAFETY_OPS (default
// 1,000,000) random RDMA WRITE / READ / FETCH_ADD / CMP_SWAP with random keys, addresses
// and lengths. Every completion must carry exactly the status the rules predict (success,
// or IBV_WC_REM_ACCESS_ERR / IBV_WC_REM_INV_REQ_ERR), successful READs and atomics must
// return what a shadow copy predicts, and at the end the target checks that no byte
// outside a region changed: neither on the region's pages nor elsewhere in its shared
// memory (a huge page or a SysV segment is larger than the region). A stray access past
// the memory faults on a guard page and fails the test.
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
#include <random>
#include <memory>
#include <vector>

#include "shared_memory.h"

namespace {

constexpr size_t kPageBytes = 4096;
constexpr int kPrivateRegions = 8;
constexpr int kMaxRegions = kPrivateRegions + 6;  // and one per kind of shared memory
constexpr size_t kRegionPages = 4;  // the most a region spans; private memory has just these
constexpr uint8_t kCanary = 0xa5;
constexpr uint32_t kMaxOpBytes = 2 * kPageBytes;
constexpr auto kPollDeadline = std::chrono::seconds(10);

struct RegionInfo {
  uint64_t addr;
  uint64_t length;
  uint32_t rkey;
  uint32_t access;
};

struct Endpoint {
  uint32_t qpn;
  uint16_t lid;
  uint8_t gid[16];
};

struct TargetInfo {
  Endpoint endpoint;
  RegionInfo regions[kMaxRegions];
  int region_count;
  uint32_t dead_rkey;
  uint64_t seed;
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "safety: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::exit(1);
}

void WriteAll(int fd, const void* data, size_t bytes) {
  if (write(fd, data, bytes) != ssize_t(bytes)) Die("pipe write");
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

void Connect(Verbs& v, const Endpoint& peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  if (ibv_modify_qp(v.qp, &attr, IBV_QP_STATE)) Die("to RESET");
  attr = {};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
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

// Memory under a region: its pages (private), or shared memory of one kind.
struct Area {
  uint8_t* base;
  size_t bytes;
  std::unique_ptr<conformance::SharedArea> shared;
};

std::vector<Area> MakeAreas() {
  std::vector<Area> areas;
  for (int r = 0; r < kPrivateRegions; ++r) {
    size_t total = (kRegionPages + 2) * kPageBytes;
    auto* base = static_cast<uint8_t*>(mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) Die("mmap");
    if (mprotect(base + kPageBytes, kRegionPages * kPageBytes, PROT_READ | PROT_WRITE)) Die("mprotect");
    areas.push_back(Area{base + kPageBytes, kRegionPages * kPageBytes, nullptr});
  }
  for (conformance::SharedKind kind : conformance::AllSharedKinds()) {
    std::string reason;
    bool unavailable = false;
    size_t bytes = conformance::IsHuge(kind) ? conformance::kHugePageBytes : kRegionPages * kPageBytes;
    auto shared = conformance::SharedArea::Create(kind, bytes, IPC_PRIVATE, &reason, &unavailable);
    if (shared == nullptr && !unavailable) Die(("creating " + conformance::SharedKindName(kind) + " memory: " + reason).c_str());
    if (shared == nullptr) {
      std::fprintf(stderr, "safety: no %s region: %s\n", conformance::SharedKindName(kind).c_str(), reason.c_str());
      continue;
    }
    uint8_t* base = shared->data();
    areas.push_back(Area{base, bytes, std::move(shared)});
  }
  return areas;
}

// The target: fenced regions, then wait for the requester, then check the fences.
int RunTarget(int to_requester, int from_requester) {
  Verbs v = Open(1);
  std::mt19937_64 random(std::random_device{}());
  TargetInfo info{};
  info.seed = random();
  std::vector<Area> areas = MakeAreas();
  info.region_count = int(areas.size());
  const uint32_t access_choices[] = {
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
      IBV_ACCESS_REMOTE_READ,
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
      IBV_ACCESS_LOCAL_WRITE};
  for (int r = 0; r < info.region_count; ++r) {
    Area& area = areas[size_t(r)];
    std::memset(area.base, kCanary, area.bytes);
    // Anywhere in the area, up to kRegionPages long: at its start, its end, or inside a
    // huge page, where the rest of the page is the provider's to leave alone.
    uint64_t offset = random() % (area.bytes - (kRegionPages - 1) * kPageBytes);
    uint64_t span = std::min<uint64_t>(area.bytes - offset, kRegionPages * kPageBytes);
    uint64_t length = 8 + random() % (span - 8);
    for (uint64_t i = 0; i < length; ++i) area.base[offset + i] = InitialByte(info.seed, r, i);
    uint32_t access = access_choices[random() % (sizeof(access_choices) / sizeof(access_choices[0]))];
    ibv_mr* mr = ibv_reg_mr(v.pd, area.base + offset, length, int(access));
    if (!mr) Die("ibv_reg_mr");
    info.regions[r] = RegionInfo{uint64_t(uintptr_t(area.base + offset)), length, mr->rkey, access};
  }
  ibv_mr* dead = ibv_reg_mr(v.pd, areas[0].base, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                    IBV_ACCESS_REMOTE_READ);
  if (!dead) Die("ibv_reg_mr (to deregister)");
  info.dead_rkey = dead->rkey;
  ibv_dereg_mr(dead);
  info.endpoint = v.self;
  WriteAll(to_requester, &info, sizeof(info));
  Endpoint peer;
  ReadAll(from_requester, &peer, sizeof(peer));
  Connect(v, peer);
  char ready = 'r';
  WriteAll(to_requester, &ready, 1);
  char done;
  ReadAll(from_requester, &done, 1);
  int damaged = 0;
  for (int r = 0; r < info.region_count; ++r) {
    const Area& area = areas[size_t(r)];
    uint64_t begin = info.regions[r].addr - uintptr_t(area.base);
    uint64_t end = begin + info.regions[r].length;
    for (uint64_t i = 0; i < area.bytes; ++i) {
      if ((i < begin || i >= end) && area.base[i] != kCanary) ++damaged;
    }
  }
  if (damaged != 0) std::fprintf(stderr, "safety: %d bytes outside regions were modified\n", damaged);
  if (damaged == 0) std::printf("safety: no byte outside the %d regions changed\n", info.region_count);
  std::fflush(stdout);  // the target leaves with _Exit
  return damaged == 0 ? 0 : 1;
}

struct Expectation {
  ibv_wc_status status;
};

int RunRequester(int from_target, int to_target, long operations) {
  TargetInfo info;
  ReadAll(from_target, &info, sizeof(info));
  Verbs v = Open(0);
  WriteAll(to_target, &v.self, sizeof(v.self));
  char ready;
  ReadAll(from_target, &ready, 1);
  Connect(v, info.endpoint);
  std::vector<uint8_t> local(kMaxOpBytes + 64);
  ibv_mr* local_mr = ibv_reg_mr(v.pd, local.data(), local.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!local_mr) Die("local ibv_reg_mr");
  std::vector<std::vector<uint8_t>> shadow(size_t(info.region_count));
  for (int r = 0; r < info.region_count; ++r) {
    shadow[r].resize(info.regions[r].length);
    for (uint64_t i = 0; i < info.regions[r].length; ++i) shadow[r][i] = InitialByte(info.seed, r, i);
  }
  std::mt19937_64 random(info.seed ^ 0x5eed);
  long counts[3] = {0, 0, 0};  // success, access errors, invalid-request errors
  long shared_successes = 0;
  for (long op = 0; op < operations; ++op) {
    int r = int(random() % uint64_t(info.region_count));
    const RegionInfo& region = info.regions[r];
    int kind = int(random() % 4);  // write, read, fetch-add, compare-swap
    bool atomic = kind >= 2;
    uint32_t key;
    uint32_t pick = random() % 100;
    int key_region = r;
    if (pick < 80) {
      key = region.rkey;
    } else if (pick < 88) {
      key = uint32_t(random());
      key_region = -1;
    } else if (pick < 94) {
      key = info.dead_rkey;
      key_region = -1;
    } else {
      key_region = int(random() % uint64_t(info.region_count));
      key = info.regions[key_region].rkey;
    }
    const RegionInfo& keyed = key_region >= 0 ? info.regions[key_region] : region;
    uint64_t length = atomic ? 8 : 1 + random() % kMaxOpBytes;
    int64_t offset;
    if (random() % 10 < 7) {
      offset = int64_t(random() % std::max<uint64_t>(region.length, 1));
    } else {
      offset = int64_t(random() % (3 * kPageBytes)) - int64_t(kPageBytes) +
               (random() % 2 ? int64_t(region.length) : 0);
    }
    uint64_t address = region.addr + uint64_t(offset);
    if (atomic && random() % 10 < 9) address &= ~uint64_t{7};
    uint32_t needed = kind == 0 ? IBV_ACCESS_REMOTE_WRITE
                                : kind == 1 ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_ATOMIC;
    bool key_valid = key_region >= 0 && (keyed.access & needed) == needed;
    bool in_range = key_region >= 0 && address >= keyed.addr && length <= keyed.length &&
                    address - keyed.addr <= keyed.length - length;
    bool aligned = (address & 7) == 0;
    bool expect_ok = key_valid && in_range && (!atomic || aligned);
    // A misaligned atomic that would otherwise pass is an invalid request; one that also
    // fails the key or range checks may be reported either way by a provider.
    bool either_error = atomic && !aligned && !(key_valid && in_range);
    ibv_wc_status expected = expect_ok ? IBV_WC_SUCCESS
                             : (atomic && !aligned) ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_ACCESS_ERR;

    for (uint64_t i = 0; i < length && kind == 0; ++i) local[i] = uint8_t(random());
    ibv_sge sge{uintptr_t(local.data()), uint32_t(length), local_mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = uint64_t(op);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    uint64_t add = random() % 1000, compare = 0, swap = random();
    if (kind == 0 || kind == 1) {
      wr.opcode = kind == 0 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = address;
      wr.wr.rdma.rkey = key;
    } else {
      wr.opcode = kind == 2 ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
      wr.wr.atomic.remote_addr = address;
      wr.wr.atomic.rkey = key;
      if (expect_ok) std::memcpy(&compare, &shadow[key_region][address - keyed.addr], 8);
      if (random() % 2) compare ^= 1;  // half the swaps must not happen
      wr.wr.atomic.compare_add = kind == 2 ? add : compare;
      wr.wr.atomic.swap = swap;
    }
    if (ibv_post_send(v.qp, &wr, &bad)) Die("ibv_post_send");
    ibv_wc wc{};
    auto deadline = std::chrono::steady_clock::now() + kPollDeadline;
    int polled;
    while ((polled = ibv_poll_cq(v.cq, 1, &wc)) == 0) {
      if (std::chrono::steady_clock::now() > deadline) Die("no completion within 10 s");
    }
    if (polled < 0) Die("ibv_poll_cq");
    bool status_ok = wc.status == expected ||
                     (either_error && (wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_REM_INV_REQ_ERR));
    if (!status_ok) {
      std::fprintf(stderr,
                   "safety: op %ld kind %d key %#x (region %d access %#x) addr %#lx len %lu: "
                   "status %s, expected %s\n",
                   op, kind, key, key_region, keyed.access, (unsigned long)address,
                   (unsigned long)length, ibv_wc_status_str(wc.status), ibv_wc_status_str(expected));
      return 1;
    }
    if (wc.status == IBV_WC_SUCCESS) {
      ++counts[0];
      if (key_region >= kPrivateRegions) ++shared_successes;
      uint8_t* mirror = &shadow[key_region][address - keyed.addr];
      if (kind == 0) {
        std::memcpy(mirror, local.data(), length);
      } else if (std::memcmp(local.data(), mirror, atomic ? 8 : length) != 0) {
        std::fprintf(stderr, "safety: op %ld kind %d returned data differing from the shadow copy\n", op, kind);
        return 1;
      }
      uint64_t old_value;
      std::memcpy(&old_value, mirror, 8);
      if (kind == 2) old_value += add;
      if (kind == 3 && old_value == compare) old_value = swap;
      if (atomic) std::memcpy(mirror, &old_value, 8);
    } else {
      ++counts[wc.status == IBV_WC_REM_ACCESS_ERR ? 1 : 2];
      Connect(v, info.endpoint);  // the error moved the QP to ERR
    }
  }
  char done = 'd';
  WriteAll(to_target, &done, 1);
  std::printf("safety: %ld operations on %d regions (%d of shared memory): %ld succeeded (%ld on shared memory), "
              "%ld access errors, %ld invalid requests, all as predicted\n",
              operations, info.region_count, info.region_count - kPrivateRegions, counts[0], shared_successes,
              counts[1], counts[2]);
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
