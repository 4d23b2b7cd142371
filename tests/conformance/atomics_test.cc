// Atomics on one QP: CMP_AND_SWP and FETCH_AND_ADD return the original value (host byte
// order) and update the target; a misaligned target is IBV_WC_REM_INV_REQ_ERR.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

class Atomics : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    if (peer().attr().atomic_cap == IBV_ATOMIC_NONE) GTEST_SKIP() << peer().name() << " has no atomics";
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC}));
    CONFORMANCE_SETUP(MakeBuffer(&result_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&target_, peer(), 4096));
  }
  uint64_t& Target(size_t offset = 0) { return *reinterpret_cast<uint64_t*>(target_.data() + offset); }
  uint64_t Result() const { return *reinterpret_cast<const uint64_t*>(result_.data()); }
  SendSpec Atomic(ibv_wr_opcode opcode, uint64_t compare_add, uint64_t swap, size_t offset = 0) {
    return {.opcode = opcode, .sges = {Sge(result_, 0, 8)}, .wr_id = 5, .remote_addr = target_.addr() + offset,
            .rkey = target_.rkey(), .compare_add = compare_add, .swap = swap};
  }
  Pair pair_;
  Buffer result_, target_;
};

TEST_P(Atomics, CmpSwapSwapsOnlyOnMatch) {
  Target() = 100;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 100, 200), IBV_WC_SUCCESS));
  EXPECT_EQ(Result(), 100u) << "returns the original value";
  EXPECT_EQ(Target(), 200u) << "swapped on match";
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 100, 300), IBV_WC_SUCCESS));
  EXPECT_EQ(Result(), 200u) << "returns the original value on a mismatch too";
  EXPECT_EQ(Target(), 200u) << "no swap on mismatch";
}

TEST_P(Atomics, FetchAddWrapsAndKeepsHostOrder) {
  Target() = 0x0102030405060708ull;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 0x10, 0), IBV_WC_SUCCESS));
  EXPECT_EQ(Result(), 0x0102030405060708ull) << "original value in host byte order";
  EXPECT_EQ(Target(), 0x0102030405060718ull) << "add in host byte order";
  Target() = ~0ull;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 2, 0), IBV_WC_SUCCESS));
  EXPECT_EQ(Result(), ~0ull);
  EXPECT_EQ(Target(), 1u) << "64-bit wrap-around";
}

TEST_P(Atomics, NeighboursUntouched) {
  Target(8) = 7;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8), IBV_WC_SUCCESS));
  EXPECT_EQ(Target(0), 0u);
  EXPECT_EQ(Target(8), 8u);
  EXPECT_EQ(Target(16), 0u);
}

TEST_P(Atomics, MisalignedIsRemoteInvalidRequest) {
  Target() = 11;
  ASSERT_NO_FATAL_FAILURE(
      PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 4), IBV_WC_REM_INV_REQ_ERR));
  EXPECT_EQ(Target(), 11u);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR);
}

TEST_P(Atomics, MisalignedCmpSwapIsRemoteInvalidRequest) {
  ASSERT_NO_FATAL_FAILURE(
      PostAndExpect(*pair_.a, Atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 0, 1, 12), IBV_WC_REM_INV_REQ_ERR));
  EXPECT_EQ(Target(8), 0u);
  EXPECT_EQ(Target(16), 0u);
}

TEST_P(Atomics, ManyOutstandingFetchAdds) {
  constexpr int kOutstanding = 8;
  Buffer results;
  CONFORMANCE_SETUP(MakeBuffer(&results, local(), 4096));
  for (int i = 0; i < kOutstanding; ++i) {
    SendSpec spec = Atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0);
    spec.sges = {Sge(results, i * 8, 8)};
    spec.wr_id = i;
    ASSERT_EQ(PostSend(pair_.a->qp(), spec), 0);
  }
  std::vector<ibv_wc> wcs = PollMany(pair_.a->send_cq(), kOutstanding);
  ASSERT_EQ(wcs.size(), size_t{kOutstanding});
  for (int i = 0; i < kOutstanding; ++i) {
    ASSERT_WC_STATUS(wcs[i], IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[i].wr_id, static_cast<uint64_t>(i)) << "completions in posting order";
    EXPECT_EQ(reinterpret_cast<uint64_t*>(results.data())[i], static_cast<uint64_t>(i));
  }
  EXPECT_EQ(Target(), static_cast<uint64_t>(kOutstanding));
}

CONFORMANCE_INSTANTIATE(Atomics);

}  // namespace
}  // namespace conformance
