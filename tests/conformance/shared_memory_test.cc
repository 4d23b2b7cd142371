// Registered memory that is already shared stays shared, for every kind (shared_memory.h).
// The test process maps the memory twice (X and Y) and registers a region of X that starts
// and ends inside a page; a requester process does remote WRITEs, atomics and READs on it;
// an attacher process maps the same memory afresh. Every mapping, in this process and in
// the attacher, sees the WRITEs and atomics; READs see every mapping's stores; after
// ibv_rereg_mr drops an access right, or after ibv_dereg_mr, remote access fails; after
// ibv_rereg_mr moves the region within the memory, the new range is as shared as the old
// one was and the old one is reached no more.
#include <linux/capability.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "process_fixture.h"
#include "shared_memory.h"

namespace conformance {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kSmallBytes = 64 << 10;
constexpr size_t kHugeBytes = 2 * kHugePageBytes;
constexpr size_t kRegionOffset = kPageBytes + 24;  // inside a page, and inside a huge page
constexpr size_t kRegionTailBytes = kPageBytes + 40;  // what the region leaves at the end
constexpr uint32_t kOpBytes = 64;
constexpr std::chrono::milliseconds kOpTimeoutMs{20'000};

enum class OpKind : uint32_t { kWrite, kRead, kFetchAdd, kCompareSwap, kStore, kLoad, kQuit };

// One step a helper takes, at `offset` from the region's start.
struct Op {
  OpKind kind = OpKind::kQuit;
  uint32_t length = 0;
  uint64_t offset = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  std::array<uint8_t, kOpBytes> data{};
  uint32_t rkey = 0;     // non-zero: this key and `address` instead of the region's
  uint64_t address = 0;
};

struct OpResult {
  int32_t status = -1;  // ibv_wc_status of the requester's completion; 0 for loads and stores
  uint32_t pad = 0;
  std::array<uint8_t, kOpBytes> data{};
};

struct AttachSpec {
  SharedHandle handle;
  uint64_t region_offset = 0;
};

std::array<uint8_t, kOpBytes> Pattern(uint8_t seed) {
  std::array<uint8_t, kOpBytes> bytes;
  for (uint32_t i = 0; i < kOpBytes; ++i) bytes[i] = uint8_t(seed * 31 + i * 7 + 1);
  return bytes;
}

// Executes one requester step on `side`; an error completion leaves the QP in ERR, so
// it is connected again for the next step.
OpResult Execute(Side& side, const Op& op) {
  OpResult result;
  bool atomic = op.kind == OpKind::kFetchAdd || op.kind == OpKind::kCompareSwap;
  uint32_t length = atomic ? 8 : op.length;
  if (op.kind == OpKind::kWrite) std::memcpy(side.buffer.data(), op.data.data(), length);
  ibv_wr_opcode opcode = op.kind == OpKind::kWrite     ? IBV_WR_RDMA_WRITE
                         : op.kind == OpKind::kRead    ? IBV_WR_RDMA_READ
                         : op.kind == OpKind::kFetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                                        : IBV_WR_ATOMIC_CMP_AND_SWP;
  if (PostSend(side.ep->qp(), {.opcode = opcode, .sges = {Sge(side.buffer, 0, length)},
                               .remote_addr = op.rkey != 0 ? op.address : side.remote.mr.addr + op.offset,
                               .rkey = op.rkey != 0 ? op.rkey : side.remote.mr.rkey,
                               .compare_add = op.compare_add, .swap = op.swap}) != 0) {
    return result;
  }
  std::optional<ibv_wc> wc = PollOne(side.ep->send_cq());
  if (!wc) return result;
  result.status = wc->status;
  std::memcpy(result.data.data(), side.buffer.data(), length);
  if (wc->status != IBV_WC_SUCCESS) {
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    ibv_modify_qp(side.ep->qp(), &reset, IBV_QP_STATE);
    Connect(*side.ep, side.remote.qp);
  }
  return result;
}

CONFORMANCE_HELPER(shared_requester) {
  if (args.size() != 1) return HelperFail("shared_requester DEVICE");
  Side side;
  std::string error;
  if (!OpenAndConnect(args[0], kPageBytes, {}, channel, &side, &error)) return HelperFail(error);
  for (;;) {
    Op op;
    if (!channel.RecvValue(&op, kOpTimeoutMs)) return HelperFail("no step from the test");
    if (op.kind == OpKind::kQuit) return 0;
    if (!channel.SendValue(Execute(side, op))) return HelperFail("sending a result");
  }
}

CONFORMANCE_HELPER(shared_attacher) {
  AttachSpec spec;
  if (!channel.RecvValue(&spec, kHandshakeTimeoutMs)) return HelperFail("no memory to attach");
  int fd = spec.handle.path[0] == '\0' && spec.handle.shmid < 0 ? channel.RecvFd(kHandshakeTimeoutMs) : -1;
  std::string error;
  uint8_t* mapping = AttachShared(spec.handle, fd, &error);
  if (fd >= 0) close(fd);
  if (mapping == nullptr) return HelperFail(error);
  uint8_t* region = mapping + spec.region_offset;
  if (!channel.SendValue(OpResult{.status = 0})) return HelperFail("ack");
  for (;;) {
    Op op;
    if (!channel.RecvValue(&op, kOpTimeoutMs)) return HelperFail("no step from the test");
    if (op.kind == OpKind::kQuit) break;
    OpResult result{.status = 0};
    if (op.kind == OpKind::kStore) std::memcpy(region + op.offset, op.data.data(), op.length);
    if (op.kind == OpKind::kLoad) std::memcpy(result.data.data(), region + op.offset, op.length);
    if (!channel.SendValue(result)) return HelperFail("sending a result");
  }
  DetachShared(spec.handle, mapping);
  return 0;
}

// Drops, in the calling thread only, what /proc/self/map_files needs: how an unprivileged
// program registers.
void DropMapFilesCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return;
  for (int capability : {CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE}) {
    data[capability / 32].effective &= ~(1u << (capability % 32));
  }
  syscall(SYS_capset, &header, data);
}

class SharedMemory : public ProcessTest {
 protected:
  // Creates the memory (skips when the machine lacks the kind) and its second mapping.
  void MakeMemory(SharedKind kind) {
    std::string reason;
    bool unavailable = false;
    memory_ = SharedArea::Create(kind, IsHuge(kind) ? kHugeBytes : kSmallBytes, IPC_PRIVATE, &reason, &unavailable);
    if (unavailable) GTEST_SKIP() << SharedKindName(kind) << " memory is not available here: " << reason;
    ASSERT_TRUE(memory_ != nullptr) << SharedKindName(kind) << ": " << reason;
    y_ = memory_->MapAgain(&reason);
    ASSERT_TRUE(y_ != nullptr) << reason;
  }

  // Opens the registering side and the requester, connected by RC; `register_region`
  // registers on the opened PD.
  void ConnectRequester(const std::function<ibv_mr*(ibv_pd*)>& register_region) {
    CONFORMANCE_SETUP(Spawn(&requester_, "shared_requester", {local_name()}));
    std::string error;
    device_ = Device::Open(peer_name(), &error);
    ASSERT_TRUE(device_ != nullptr) << error;
    mr_.reset(register_region(device_->pd()));
    ASSERT_TRUE(mr_ != nullptr) << "ibv_reg_mr on " << SharedKindName(memory_->handle().kind)
                                << " memory: " << strerror(errno);
    int err = 0;
    endpoint_ = Endpoint::Create(*device_, {.type = IBV_QPT_RC}, &err, &error);
    ASSERT_TRUE(endpoint_ != nullptr) << error;
    Hello mine{endpoint_->info(), {uint64_t(uintptr_t(mr_->addr)), mr_->rkey, 0, mr_->length}};
    Hello theirs{};
    ASSERT_TRUE(requester_->channel().SendValue(mine));
    ASSERT_TRUE(requester_->channel().RecvValue(&theirs, kHandshakeTimeoutMs)) << "the requester never said hello";
    ASSERT_EQ(conformance::Connect(*endpoint_, theirs.qp), 0);
  }

  void Attach() {
    CONFORMANCE_SETUP(Spawn(&attacher_, "shared_attacher", {}));
    AttachSpec spec{memory_->handle(), kRegionOffset};
    ASSERT_TRUE(attacher_->channel().SendValue(spec));
    if (memory_->fd() >= 0) {
      ASSERT_TRUE(attacher_->channel().SendFd(memory_->fd()));
    }
    OpResult ack;
    ASSERT_TRUE(attacher_->channel().RecvValue(&ack, kHandshakeTimeoutMs)) << "the attacher could not map the memory";
  }

  static OpResult Step(Child& child, const Op& op) {
    OpResult result;
    EXPECT_TRUE(child.channel().SendValue(op) && child.channel().RecvValue(&result, kOpTimeoutMs))
        << "helper " << child.pid() << " did not answer";
    return result;
  }
  OpResult Remote(const Op& op) { return Step(*requester_, op); }

  // Every mapping of the region at `offset` holds `expected`: X and Y here, and the attacher's.
  void ExpectEverywhere(uint64_t offset, const uint8_t* expected, uint32_t length, const char* what) {
    uint8_t* x = memory_->data() + kRegionOffset;
    uint8_t* y = y_ + kRegionOffset;
    EXPECT_EQ(std::memcmp(x + offset, expected, length), 0) << what << ": not seen through the registered mapping";
    EXPECT_EQ(std::memcmp(y + offset, expected, length), 0) << what << ": not seen through a second mapping";
    OpResult loaded = Step(*attacher_, {.kind = OpKind::kLoad, .length = length, .offset = offset});
    EXPECT_EQ(std::memcmp(loaded.data.data(), expected, length), 0) << what << ": not seen by another process";
  }

  void Finish() {
    for (Child* child : {requester_.get(), attacher_.get()}) {
      if (child == nullptr) continue;
      EXPECT_TRUE(child->channel().SendValue(Op{.kind = OpKind::kQuit}));
      ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*child));
    }
  }

  void RunKind(SharedKind kind);

  std::unique_ptr<SharedArea> memory_;
  uint8_t* y_ = nullptr;
  std::unique_ptr<Child> requester_, attacher_;
  std::unique_ptr<Device> device_;
  MrPtr mr_;  // declared after the device: deregistered before it closes
  std::unique_ptr<Endpoint> endpoint_;
};

void SharedMemory::RunKind(SharedKind kind) {
  CONFORMANCE_SETUP(MakeMemory(kind));
  const size_t length = memory_->bytes() - kRegionOffset - kRegionTailBytes;
  uint8_t* region = memory_->data() + kRegionOffset;
  CONFORMANCE_SETUP(ConnectRequester([&](ibv_pd* pd) {
    return ibv_reg_mr(pd, region, length, int(kAllRemoteAccess));
  }));
  CONFORMANCE_SETUP(Attach());

  // WRITEs at the start, across a page (a huge page, for huge kinds) and at the end.
  const size_t page = IsHuge(kind) ? kHugePageBytes : kPageBytes;
  const uint64_t crossing = (kRegionOffset / page + 1) * page - kRegionOffset - kOpBytes / 2;
  uint8_t seed = 1;
  for (uint64_t offset : {uint64_t{0}, crossing, uint64_t(length - kOpBytes)}) {
    Op write{.kind = OpKind::kWrite, .length = kOpBytes, .offset = offset, .data = Pattern(seed++)};
    ASSERT_EQ(Remote(write).status, IBV_WC_SUCCESS) << "WRITE at region offset " << offset;
    ExpectEverywhere(offset, write.data.data(), kOpBytes, "a remote WRITE");
  }

  if (device_->attr().atomic_cap != IBV_ATOMIC_NONE) {
    const uint64_t counter = 128;
    OpResult added = Remote({.kind = OpKind::kFetchAdd, .offset = counter, .compare_add = 5});
    ASSERT_EQ(added.status, IBV_WC_SUCCESS);
    uint64_t value = 5;
    ExpectEverywhere(counter, reinterpret_cast<uint8_t*>(&value), 8, "a FETCH_AND_ADD");
    OpResult swapped = Remote({.kind = OpKind::kCompareSwap, .offset = counter, .compare_add = 5, .swap = 0xabc});
    ASSERT_EQ(swapped.status, IBV_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(swapped.data.data(), &value, 8), 0) << "CMP_AND_SWP returned another original";
    value = 0xabc;
    ExpectEverywhere(counter, reinterpret_cast<uint8_t*>(&value), 8, "a CMP_AND_SWP");
  }

  // Stores through each mapping, each seen by a remote READ.
  struct Store {
    uint64_t offset;
    uint8_t* mapping;  // null: the attacher stores
    const char* who;
  };
  for (const Store& store : {Store{256, y_ + kRegionOffset, "a second mapping"}, Store{512, nullptr, "another process"},
                             Store{768, region, "the registered mapping"}}) {
    std::array<uint8_t, kOpBytes> data = Pattern(seed++);
    if (store.mapping != nullptr) {
      std::memcpy(store.mapping + store.offset, data.data(), kOpBytes);
    } else {
      Step(*attacher_, {.kind = OpKind::kStore, .length = kOpBytes, .offset = store.offset, .data = data});
    }
    OpResult read = Remote({.kind = OpKind::kRead, .length = kOpBytes, .offset = store.offset});
    ASSERT_EQ(read.status, IBV_WC_SUCCESS);
    EXPECT_EQ(read.data, data) << "a remote READ does not see a store through " << store.who;
  }

  // Access rights changed by ibv_rereg_mr hold for shared memory too.
  if (ibv_rereg_mr(mr_.get(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0) {
    EXPECT_EQ(Remote({.kind = OpKind::kRead, .length = kOpBytes, .offset = 0}).status, IBV_WC_REM_ACCESS_ERR)
        << "a READ after ibv_rereg_mr took REMOTE_READ away";
  } else {
    ASSERT_TRUE(IsUnsupported(errno)) << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS): " << strerror(errno);
  }

  // A range moved by ibv_rereg_mr stays shared memory: every mapping sees a WRITE at its
  // start, and the old start, outside it now, refuses one.
  uint8_t* moved = region + kPageBytes;
  if (ibv_rereg_mr(mr_.get(), IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr, moved,
                   length - kPageBytes, int(kAllRemoteAccess)) == 0) {
    Op write{.kind = OpKind::kWrite, .length = kOpBytes, .data = Pattern(seed++), .rkey = mr_->rkey,
             .address = uint64_t(uintptr_t(moved))};
    ASSERT_EQ(Remote(write).status, IBV_WC_SUCCESS) << "a WRITE at the start of the range ibv_rereg_mr moved to";
    ExpectEverywhere(kPageBytes, write.data.data(), kOpBytes, "a remote WRITE after ibv_rereg_mr of the range");
    write.data = Pattern(seed++);
    write.address = uint64_t(uintptr_t(region));
    EXPECT_EQ(Remote(write).status, IBV_WC_REM_ACCESS_ERR) << "a WRITE at the region's old start";
  } else {
    ASSERT_TRUE(IsUnsupported(errno)) << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION): " << strerror(errno);
  }

  // After ibv_dereg_mr remote access fails, and the memory stays as it was.
  std::array<uint8_t, kOpBytes> before;
  std::memcpy(before.data(), region, kOpBytes);
  mr_.reset();
  EXPECT_EQ(Remote({.kind = OpKind::kWrite, .length = kOpBytes, .offset = 0, .data = Pattern(seed++)}).status,
            IBV_WC_REM_ACCESS_ERR)
      << "a WRITE after ibv_dereg_mr";
  ExpectEverywhere(0, before.data(), kOpBytes, "the memory after a refused WRITE");
  Finish();
}

TEST_P(SharedMemory, SysV) { RunKind(SharedKind::kSysv); }
TEST_P(SharedMemory, SysVHugetlb) { RunKind(SharedKind::kSysvHuge); }
TEST_P(SharedMemory, SharedFile) { RunKind(SharedKind::kFile); }
TEST_P(SharedMemory, Memfd) { RunKind(SharedKind::kMemfd); }
TEST_P(SharedMemory, HugetlbfsFile) { RunKind(SharedKind::kHugetlbfsFile); }
TEST_P(SharedMemory, HugetlbMemfd) { RunKind(SharedKind::kHugeMemfd); }

// A registering thread without the privilege /proc/self/map_files needs: a memfd whose
// descriptor is open and a file whose path still names it register, and stay shared; a
// memfd whose only descriptor is closed cannot be named for peers, which softnic says;
// private memory registers again after a deregistration (on softnic it is then mapped
// shared, from an anchor whose name is gone).
TEST_P(SharedMemory, RegistersWithoutMapFilesPrivilege) {
  CONFORMANCE_SETUP(MakeMemory(SharedKind::kMemfd));
  std::string reason;
  bool unavailable = false;
  std::unique_ptr<SharedArea> file =
      SharedArea::Create(SharedKind::kFile, kSmallBytes, IPC_PRIVATE, &reason, &unavailable);
  ASSERT_TRUE(file != nullptr) << reason;
  std::unique_ptr<SharedArea> closed =
      SharedArea::Create(SharedKind::kMemfd, kSmallBytes, IPC_PRIVATE, &reason, &unavailable);
  ASSERT_TRUE(closed != nullptr) << reason;
  closed->CloseFd();
  std::vector<uint8_t> heap(kSmallBytes);
  ibv_mr* file_mr = nullptr;
  ibv_mr* closed_mr = nullptr;
  ibv_mr* heap_mr = nullptr;
  int closed_errno = 0;
  int heap_errno = 0;
  CONFORMANCE_SETUP(ConnectRequester([&](ibv_pd* pd) {
    ibv_mr* memfd_mr = nullptr;
    std::thread([&] {
      DropMapFilesCapabilities();
      memfd_mr = ibv_reg_mr(pd, memory_->data(), kSmallBytes, int(kAllRemoteAccess));
      file_mr = ibv_reg_mr(pd, file->data(), kSmallBytes, int(kAllRemoteAccess));
      closed_mr = ibv_reg_mr(pd, closed->data(), kSmallBytes, int(kAllRemoteAccess));
      closed_errno = errno;
      ibv_dereg_mr(ibv_reg_mr(pd, heap.data(), heap.size(), int(kAllRemoteAccess)));
      heap_mr = ibv_reg_mr(pd, heap.data(), heap.size(), int(kAllRemoteAccess));
      heap_errno = errno;
    }).join();
    return memfd_mr;
  }));
  MrPtr file_owner(file_mr), closed_owner(closed_mr), heap_owner(heap_mr);
  ASSERT_TRUE(file_mr != nullptr) << "ibv_reg_mr on a shared file mapping: " << strerror(errno);
  ASSERT_TRUE(heap_mr != nullptr) << "ibv_reg_mr on heap memory registered before: " << strerror(heap_errno);
  if (device_->softnic()) {
    EXPECT_TRUE(closed_mr == nullptr && closed_errno == EACCES)
        << "softnic registered memory that no peer can map (errno " << closed_errno << ")";
  }
  CONFORMANCE_SETUP(Attach());
  Op write{.kind = OpKind::kWrite, .length = kOpBytes, .offset = kRegionOffset, .data = Pattern(9)};
  ASSERT_EQ(Remote(write).status, IBV_WC_SUCCESS);
  ExpectEverywhere(0, write.data.data(), kOpBytes, "a remote WRITE into a memfd");
  write.data = Pattern(10);
  write.rkey = file_mr->rkey;
  write.address = uint64_t(uintptr_t(file->data())) + kRegionOffset;
  ASSERT_EQ(Remote(write).status, IBV_WC_SUCCESS);
  std::string error;
  uint8_t* file_again = file->MapAgain(&error);
  ASSERT_TRUE(file_again != nullptr) << error;
  EXPECT_EQ(std::memcmp(file_again + kRegionOffset, write.data.data(), kOpBytes), 0)
      << "the file stopped being shared";
  write.data = Pattern(11);
  write.rkey = heap_mr->rkey;
  write.address = uint64_t(uintptr_t(heap.data())) + kRegionOffset;
  ASSERT_EQ(Remote(write).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(heap.data() + kRegionOffset, write.data.data(), kOpBytes), 0)
      << "a WRITE into heap memory registered a second time";
  Finish();
}

// Moving a registration off a SysV segment (ibv_rereg_mr to private memory) lets the
// segment go: the provider holds no attachment of it any more, as after ibv_dereg_mr.
// Moving it back holds the segment again, until the deregistration.
uint64_t Attachments(int shmid) {
  shmid_ds status{};
  return shmctl(shmid, IPC_STAT, &status) == 0 ? uint64_t(status.shm_nattch) : ~uint64_t{0};
}

TEST_P(SharedMemory, ReregOffSysvReleasesSegment) {
  CONFORMANCE_SETUP(MakeMemory(SharedKind::kSysv));
  std::string error;
  device_ = Device::Open(peer_name(), &error);
  ASSERT_TRUE(device_ != nullptr) << error;
  const int shmid = memory_->handle().shmid;
  const uint64_t unregistered = Attachments(shmid);
  std::vector<uint8_t> heap(kSmallBytes);
  MrPtr mr(ibv_reg_mr(device_->pd(), memory_->data(), kSmallBytes, int(kAllRemoteAccess)));
  ASSERT_TRUE(mr != nullptr) << "ibv_reg_mr on a SysV segment: " << strerror(errno);
  if (ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, heap.data(), heap.size(), 0) != 0) {
    ASSERT_TRUE(IsUnsupported(errno)) << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION): " << strerror(errno);
    GTEST_SKIP() << "ibv_rereg_mr of the range is not supported";
  }
  EXPECT_EQ(Attachments(shmid), unregistered) << "the segment is still held after the region moved off it";
  ASSERT_EQ(ibv_rereg_mr(mr.get(), IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, memory_->data(), kSmallBytes, 0), 0)
      << "ibv_rereg_mr back onto the segment: " << strerror(errno);
  if (device_->softnic()) {
    EXPECT_EQ(Attachments(shmid), unregistered + 1) << "softnic holds no attachment of the segment registered again";
  }
  mr.reset();
  EXPECT_EQ(Attachments(shmid), unregistered) << "the segment is still held after ibv_dereg_mr";
}

// The owner of a SysV and a memfd registration dies: like any dead peer, RC access gets
// IBV_WC_RETRY_EXC_ERR, also to the memfd that no peer mapped while the owner lived (its
// descriptor went with it). Before that, the segment stays reachable after IPC_RMID, as
// on Linux a segment marked for removal lives while attached.
constexpr ConnectConfig kShortRetry{.timeout = 10, .retry_cnt = 2, .rnr_retry = 2, .min_rnr_timer = 1};

struct OwnerHello {
  Hello hello;  // the SysV registration
  RemoteMr memfd;
};

CONFORMANCE_HELPER(shared_owner) {
  if (args.size() != 1) return HelperFail("shared_owner DEVICE");
  OwnerHello hello;
  std::string reason, error;
  bool unavailable = false;
  std::unique_ptr<SharedArea> sysv = SharedArea::Create(SharedKind::kSysv, kSmallBytes, IPC_PRIVATE, &reason, &unavailable);
  if (!sysv) return HelperFail(reason);
  std::unique_ptr<SharedArea> memfd = SharedArea::Create(SharedKind::kMemfd, kSmallBytes, IPC_PRIVATE, &reason, &unavailable);
  if (!memfd) return HelperFail(reason);
  std::unique_ptr<Device> device = Device::Open(args[0], &error);
  if (!device) return HelperFail(error);
  MrPtr sysv_mr(ibv_reg_mr(device->pd(), sysv->data(), kSmallBytes, int(kAllRemoteAccess)));
  MrPtr memfd_mr(ibv_reg_mr(device->pd(), memfd->data(), kSmallBytes, int(kAllRemoteAccess)));
  if (!sysv_mr || !memfd_mr) return HelperFail(std::string("ibv_reg_mr: ") + strerror(errno));
  if (shmctl(sysv->handle().shmid, IPC_RMID, nullptr) != 0) return HelperFail(std::string("IPC_RMID: ") + strerror(errno));
  int err = 0;
  std::unique_ptr<Endpoint> ep = Endpoint::Create(*device, {.type = IBV_QPT_RC}, &err, &error);
  if (!ep) return HelperFail(error);
  hello.hello = {ep->info(), {uint64_t(uintptr_t(sysv->data())), sysv_mr->rkey, 0, kSmallBytes}};
  hello.memfd = {uint64_t(uintptr_t(memfd->data())), memfd_mr->rkey, 0, kSmallBytes};
  QpInfo theirs;
  if (!channel.SendValue(hello) || !channel.RecvValue(&theirs, kHandshakeTimeoutMs)) return HelperFail("handshake");
  if (Connect(*ep, theirs, kShortRetry) != 0) return HelperFail("connecting");
  if (!channel.SendValue(uint8_t{1})) return HelperFail("ready");
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // until killed
}

TEST_P(SharedMemory, OwnerDeathEndsAccess) {
  std::unique_ptr<Child> owner;
  CONFORMANCE_SETUP(Spawn(&owner, "shared_owner", {peer_name()}));
  std::unique_ptr<Device> device;
  std::unique_ptr<Endpoint> ep;
  ASSERT_NO_FATAL_FAILURE(OpenEndpoint(local_name(), {.type = IBV_QPT_RC}, &device, &ep));
  std::string error;
  Buffer buffer = Buffer::Make(device->pd(), kPageBytes, kAllRemoteAccess, &error);
  ASSERT_TRUE(static_cast<bool>(buffer)) << error;
  OwnerHello hello;
  ASSERT_TRUE(owner->channel().RecvValue(&hello, kHandshakeTimeoutMs)) << "the owner never said hello";
  ASSERT_TRUE(owner->channel().SendValue(ep->info()));
  ASSERT_EQ(Connect(*ep, hello.hello.qp, kShortRetry), 0);
  uint8_t ready = 0;
  ASSERT_TRUE(owner->channel().RecvValue(&ready, kHandshakeTimeoutMs));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*ep,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(buffer, 0, kOpBytes)},
                                         .remote_addr = hello.hello.mr.addr, .rkey = hello.hello.mr.rkey},
                                        IBV_WC_SUCCESS))
      << "a WRITE into a registered SysV segment marked for removal";
  owner->Kill();
  ASSERT_TRUE(owner->Wait(kCompletionTimeoutMs).has_value());
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*ep,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(buffer, 0, kOpBytes)},
                                         .remote_addr = hello.memfd.addr, .rkey = hello.memfd.rkey},
                                        IBV_WC_RETRY_EXC_ERR))
      << "a WRITE into the memfd of a dead owner";
}

CONFORMANCE_INSTANTIATE(SharedMemory);

}  // namespace
}  // namespace conformance
