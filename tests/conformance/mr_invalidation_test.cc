// Any change to a registered region takes effect before the verb returns, for every
// requester, whatever it cached: after ibv_rereg_mr drops IBV_ACCESS_REMOTE_WRITE, moves the
// MR to another PD or to another range, and after ibv_dereg_mr, the next WRITE through the
// old rkey (or to the old range) gets IBV_WC_REM_ACCESS_ERR and writes nothing (UC: the
// write is dropped). Each test first warms the requester with several WRITEs through the
// key, so that a cached translation would be used if it survived; MultiProcessMrInvalidation
// does the same with the requester in another process. A registration of pages registered
// before reaches what the owner stores there now: after a deregistration (the pages keep
// what made them shareable), and after the owner unmapped them and mapped new memory at the
// same address (nothing of the old pages may be reached).
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "process_fixture.h"

namespace conformance {
namespace {

constexpr size_t kRegionBytes = 4096;
constexpr size_t kMessageBytes = 32;
constexpr uint64_t kWarmWrites = 3;
constexpr unsigned kNoRemoteWrite = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// True when ibv_rereg_mr failed because the provider does not implement that change.
bool ReregUnsupported(int rc) {
  return rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS);
}

bool AllZero(const uint8_t* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (data[i] != 0) return false;
  return true;
}

class MrInvalidation : public VerbsTest {
 protected:
  void SetUpPair(ibv_qp_type type) {
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = type}));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), kRegionBytes));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), kRegionBytes));
    for (size_t i = 0; i < kRegionBytes; ++i) local_buf_.data()[i] = static_cast<uint8_t>(i * 7 + 1);
    rkey_ = remote_buf_.rkey();
  }
  SendSpec Write(uint64_t remote_addr, uint32_t rkey, uint64_t wr_id) {
    return {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, kMessageBytes)}, .wr_id = wr_id,
            .remote_addr = remote_addr, .rkey = rkey};
  }
  // Several successful WRITEs through the key, each checked at the responder.
  void WarmUp() {
    for (uint64_t i = 0; i < kWarmWrites; ++i) {
      std::memset(remote_buf_.data(), 0, kMessageBytes);
      ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), rkey_, i), IBV_WC_SUCCESS));
      ASSERT_EQ(std::memcmp(remote_buf_.data(), local_buf_.data(), kMessageBytes), 0) << "warm-up WRITE " << i;
    }
    std::memset(remote_buf_.data(), 0, kRegionBytes);
  }
  // RC: REM_ACCESS_ERR, QP to ERR, nothing written to the region.
  void ExpectRefusedWrite(uint64_t remote_addr, uint32_t rkey) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_addr, rkey, 100), IBV_WC_REM_ACCESS_ERR));
    EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR) << "requester QP must move to ERR";
    EXPECT_TRUE(AllZero(remote_buf_.data(), kRegionBytes)) << "written through an invalidated translation";
  }
  int Rereg(int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    errno = 0;
    return ibv_rereg_mr(remote_buf_.mr(), flags, pd, addr, length, access);
  }

  Pair pair_;
  Buffer local_buf_, remote_buf_;
  uint32_t rkey_ = 0;  // the remote key before any change
};

TEST_P(MrInvalidation, RcWriteAfterReregDropsRemoteWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  const int rc = Rereg(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kNoRemoteWrite);
  if (ReregUnsupported(rc)) GTEST_SKIP() << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS) not supported";
  ASSERT_EQ(rc, 0) << "ibv_rereg_mr(CHANGE_ACCESS): " << strerror(errno);
  ExpectRefusedWrite(remote_buf_.addr(), remote_buf_.rkey());
}

TEST_P(MrInvalidation, RcWriteAfterReregToAnotherPd) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  PdPtr other_pd(ibv_alloc_pd(peer().ctx()));
  ASSERT_TRUE(other_pd != nullptr) << strerror(errno);
  const int rc = Rereg(IBV_REREG_MR_CHANGE_PD, other_pd.get(), nullptr, 0, 0);
  if (ReregUnsupported(rc)) GTEST_SKIP() << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_PD) not supported";
  ASSERT_EQ(rc, 0) << "ibv_rereg_mr(CHANGE_PD): " << strerror(errno);
  EXPECT_EQ(remote_buf_.mr()->pd, other_pd.get()) << "ibv_rereg_mr must point mr->pd at the new PD";
  ExpectRefusedWrite(remote_buf_.addr(), remote_buf_.rkey());
  remote_buf_.Deregister();  // before its PD goes
}

TEST_P(MrInvalidation, RcWriteAfterDeregWithWarmCache) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  remote_buf_.Deregister();
  ExpectRefusedWrite(remote_buf_.addr(), rkey_);
}

TEST_P(MrInvalidation, RcWriteAfterReregTranslationReachesOnlyTheNewRange) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> moved(static_cast<uint8_t*>(std::aligned_alloc(kRegionBytes, kRegionBytes)));
  ASSERT_TRUE(moved != nullptr);
  std::memset(moved.get(), 0, kRegionBytes);
  const int rc = Rereg(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, moved.get(), kRegionBytes, 0);
  if (ReregUnsupported(rc)) GTEST_SKIP() << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_TRANSLATION) not supported";
  ASSERT_EQ(rc, 0) << "ibv_rereg_mr(CHANGE_TRANSLATION): " << strerror(errno);
  EXPECT_EQ(remote_buf_.mr()->addr, moved.get());
  EXPECT_EQ(remote_buf_.mr()->length, kRegionBytes);
  const uint64_t new_addr = reinterpret_cast<uintptr_t>(moved.get());
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(new_addr, remote_buf_.rkey(), 50), IBV_WC_SUCCESS));
  EXPECT_EQ(std::memcmp(moved.get(), local_buf_.data(), kMessageBytes), 0) << "the WRITE missed the new range";
  EXPECT_TRUE(AllZero(remote_buf_.data(), kRegionBytes)) << "the WRITE went to the old range";
  ExpectRefusedWrite(remote_buf_.addr(), remote_buf_.rkey());
  remote_buf_.Deregister();  // before `moved` is freed
}

TEST_P(MrInvalidation, RcWriteAfterReregistrationReachesTheNewRegion) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  remote_buf_.Deregister();
  // The freed table entry is the likeliest one for the next registration.
  Buffer other;
  CONFORMANCE_SETUP(MakeBuffer(&other, peer(), kRegionBytes));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(other.addr(), other.rkey(), 60), IBV_WC_SUCCESS));
  EXPECT_EQ(std::memcmp(other.data(), local_buf_.data(), kMessageBytes), 0) << "the WRITE missed the new region";
  EXPECT_TRUE(AllZero(remote_buf_.data(), kRegionBytes)) << "the WRITE went to the deregistered region";
  if (other.rkey() != rkey_) ExpectRefusedWrite(remote_buf_.addr(), rkey_);
}

TEST_P(MrInvalidation, RcReregKeepingRemoteWriteStillWrites) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  const int rc = Rereg(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (ReregUnsupported(rc)) GTEST_SKIP() << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS) not supported";
  ASSERT_EQ(rc, 0) << "ibv_rereg_mr(CHANGE_ACCESS): " << strerror(errno);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 70), IBV_WC_SUCCESS));
  EXPECT_EQ(std::memcmp(remote_buf_.data(), local_buf_.data(), kMessageBytes), 0);
}

TEST_P(MrInvalidation, UcWriteAfterReregDropsRemoteWriteDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC));
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  const int rc = Rereg(IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kNoRemoteWrite);
  if (ReregUnsupported(rc)) GTEST_SKIP() << "ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS) not supported";
  ASSERT_EQ(rc, 0) << "ibv_rereg_mr(CHANGE_ACCESS): " << strerror(errno);
  for (uint64_t i = 0; i < kWarmWrites; ++i)
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 80 + i), IBV_WC_SUCCESS));
  EXPECT_TRUE(AllZero(remote_buf_.data(), kRegionBytes)) << "UC write landed after rereg dropped REMOTE_WRITE";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
}

// A registration of `bytes` at `at` on the peer, read and written through by the requester:
// the READ must return `expect` (the owner's latest stores), the WRITE must reach the owner.
void ReadThenWriteThrough(Pair& pair, Buffer& local, ibv_pd* pd, uint8_t* at, size_t bytes,
                          uint8_t expect) {
  MrPtr mr(ibv_reg_mr(pd, at, bytes, kAllRemoteAccess));
  ASSERT_TRUE(mr != nullptr) << "ibv_reg_mr: " << strerror(errno);
  std::memset(local.data(), 0, kMessageBytes);
  const uint64_t last = reinterpret_cast<uintptr_t>(at) + bytes - kMessageBytes;  // the range's last page too
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair.a, {.opcode = IBV_WR_RDMA_READ, .sges = {Sge(local, 0, kMessageBytes)},
                                                  .wr_id = 90, .remote_addr = last, .rkey = mr->rkey},
                                        IBV_WC_SUCCESS));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(local.data()[i], expect) << "READ byte " << i;
  std::memset(local.data(), expect + 1, kMessageBytes);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair.a, {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local, 0, kMessageBytes)},
                                                  .wr_id = 91, .remote_addr = last, .rkey = mr->rkey},
                                        IBV_WC_SUCCESS));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(at[bytes - kMessageBytes + i], expect + 1) << "WRITE byte " << i;
}

TEST_P(MrInvalidation, RegistrationAgainReachesTheOwnersStoresAndNewMappings) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  constexpr size_t kBytes = 2 * kRegionBytes;
  void* mapped = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED) << strerror(errno);
  auto* at = static_cast<uint8_t*>(mapped);
  ibv_pd* pd = peer().pd();
  std::memset(at, 'A', kBytes);
  ASSERT_NO_FATAL_FAILURE(ReadThenWriteThrough(pair_, local_buf_, pd, at, kBytes, 'A'));
  std::memset(at, 'C', kBytes);  // deregistered: stores of the owner alone
  ASSERT_NO_FATAL_FAILURE(ReadThenWriteThrough(pair_, local_buf_, pd, at, kBytes, 'C'));
  ASSERT_EQ(munmap(at, kBytes), 0);
  void* again = mmap(at, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (again != at) {
    if (again != MAP_FAILED) munmap(again, kBytes);
    GTEST_SKIP() << "the address could not be mapped again";
  }
  std::memset(at, 'E', kBytes);
  ASSERT_NO_FATAL_FAILURE(ReadThenWriteThrough(pair_, local_buf_, pd, at, kBytes, 'E'));
  munmap(at, kBytes);
}

TEST_P(MrInvalidation, ReregRejectsInvalidArguments) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  EXPECT_EQ(Rereg(IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, kRegionBytes, 0), IBV_REREG_MR_ERR_INPUT)
      << "CHANGE_TRANSLATION without an address";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(Rereg(0, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE), IBV_REREG_MR_ERR_INPUT)
      << "access without CHANGE_ACCESS";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(Rereg(IBV_REREG_MR_FLAGS_SUPPORTED << 1, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT)
      << "unknown flags";
  EXPECT_EQ(errno, EINVAL);
  ASSERT_NO_FATAL_FAILURE(WarmUp());  // a refused rereg changed nothing
}

CONFORMANCE_INSTANTIATE(MrInvalidation);

// ---- the requester in another process ----------------------------------------------

enum class Change : uint8_t { kDropRemoteWrite, kAnotherPd, kDereg };
constexpr uint8_t kWarm = 'w';
constexpr uint8_t kChanged = 'c';

// Warms its QP with WRITEs to the test's buffer, waits for the test to change the MR, and
// reports the status of one more WRITE.
CONFORMANCE_HELPER(mr_invalidation_writer) {
  if (args.size() != 1) return HelperFail("mr_invalidation_writer DEVICE");
  Side side;
  std::string error;
  if (!OpenAndConnect(args[0], kRegionBytes, {}, channel, &side, &error)) return HelperFail(error);
  auto write = [&](uint64_t wr_id) -> std::optional<ibv_wc> {
    const int rc = PostSend(side.ep->qp(), {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(side.buffer, 0, kMessageBytes)},
                                            .wr_id = wr_id, .remote_addr = side.remote.mr.addr,
                                            .rkey = side.remote.mr.rkey});
    if (rc != 0) return std::nullopt;
    return PollOne(side.ep->send_cq());
  };
  std::memset(side.buffer.data(), 0x77, kMessageBytes);
  for (uint64_t i = 0; i < kWarmWrites; ++i) {
    std::optional<ibv_wc> wc = write(i);
    if (!wc || wc->status != IBV_WC_SUCCESS) return HelperFail("warm-up WRITE " + std::to_string(i) + " failed");
  }
  uint8_t message = kWarm;
  if (!channel.SendValue(message)) return HelperFail("telling the test the cache is warm");
  if (!channel.RecvValue(&message, kHandshakeTimeoutMs) || message != kChanged) return HelperFail("no change from the test");
  std::optional<ibv_wc> wc = write(kWarmWrites);
  if (!wc) return HelperFail("no completion for the WRITE after the change");
  const uint32_t status = wc->status;
  return channel.SendValue(status) ? 0 : HelperFail("sending the status");
}

class MultiProcessMrInvalidation : public ProcessTest {
 protected:
  void RunChange(Change change) {
    std::unique_ptr<Child> child;
    CONFORMANCE_SETUP(Spawn(&child, "mr_invalidation_writer", {local_name()}));
    std::unique_ptr<Device> device;
    std::unique_ptr<Endpoint> ep;
    ASSERT_NO_FATAL_FAILURE(OpenEndpoint(peer_name(), {.type = IBV_QPT_RC}, &device, &ep));
    std::string error;
    Buffer buffer = Buffer::Make(device->pd(), kRegionBytes, kAllRemoteAccess, &error);
    ASSERT_TRUE(static_cast<bool>(buffer)) << error;
    Hello mine{ep->info(), {buffer.addr(), buffer.rkey(), 0, kRegionBytes}};
    Hello theirs{};
    ASSERT_TRUE(child->channel().SendValue(mine));
    ASSERT_TRUE(child->channel().RecvValue(&theirs, kHandshakeTimeoutMs)) << "the helper never said hello";
    ASSERT_EQ(Connect(*ep, theirs.qp), 0);
    uint8_t message = 0;
    ASSERT_TRUE(child->channel().RecvValue(&message, kCompletionTimeoutMs) && message == kWarm)
        << "the helper's warm-up WRITEs failed";
    ASSERT_EQ(buffer.data()[0], 0x77) << "the warm-up WRITEs did not land";
    std::memset(buffer.data(), 0, kRegionBytes);
    PdPtr other_pd;
    errno = 0;
    int rc = 0;
    switch (change) {
      case Change::kDropRemoteWrite:
        rc = ibv_rereg_mr(buffer.mr(), IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kNoRemoteWrite);
        break;
      case Change::kAnotherPd:
        other_pd.reset(ibv_alloc_pd(device->ctx()));
        ASSERT_TRUE(other_pd != nullptr);
        rc = ibv_rereg_mr(buffer.mr(), IBV_REREG_MR_CHANGE_PD, other_pd.get(), nullptr, 0, 0);
        break;
      case Change::kDereg: buffer.Deregister(); break;
    }
    if (ReregUnsupported(rc)) GTEST_SKIP() << "this ibv_rereg_mr change is not supported";
    ASSERT_EQ(rc, 0) << "ibv_rereg_mr: " << strerror(errno);
    ASSERT_TRUE(child->channel().SendValue(kChanged));
    uint32_t status = 0;
    ASSERT_TRUE(child->channel().RecvValue(&status, kCompletionTimeoutMs)) << "the helper sent no status";
    EXPECT_EQ(status, IBV_WC_REM_ACCESS_ERR)
        << "got " << ibv_wc_status_str(static_cast<ibv_wc_status>(status)) << " in the other process";
    EXPECT_TRUE(AllZero(buffer.data(), kRegionBytes)) << "the other process wrote through an invalidated translation";
    ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*child));
    buffer.Deregister();  // before its PD goes
  }
};

TEST_P(MultiProcessMrInvalidation, ReregDropsRemoteWrite) { RunChange(Change::kDropRemoteWrite); }
TEST_P(MultiProcessMrInvalidation, ReregToAnotherPd) { RunChange(Change::kAnotherPd); }
TEST_P(MultiProcessMrInvalidation, Dereg) { RunChange(Change::kDereg); }

CONFORMANCE_INSTANTIATE(MultiProcessMrInvalidation);

}  // namespace
}  // namespace conformance
