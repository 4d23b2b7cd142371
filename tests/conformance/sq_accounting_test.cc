// Send-queue accounting as on hardware: an unsignaled WR's slot is freed only when a later
// signaled WR completes, so a sender that never signals fills the SQ (ENOMEM), and one that
// signals every N-th WR and polls never does. A receive queue holds exactly the
// max_recv_wr that ibv_create_qp and ibv_query_qp report (which may exceed the request).
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint32_t kSendQueueDepth = 32;
constexpr int kSignaledPostsTotal = 20'000;
constexpr uint32_t kOddRecvDepth = 5;  // not a power of two: a provider may round it up

class SendQueueAccounting : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC, .send_wr = kSendQueueDepth}));
    CONFORMANCE_SETUP(MakeBuffer(&src_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&dst_, peer(), 4096));
  }
  int PostWrite(unsigned flags, uint64_t wr_id) {
    return PostSend(pair_.a->qp(), {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(src_, 0, 8)}, .flags = flags,
                                    .wr_id = wr_id, .remote_addr = dst_.addr(), .rkey = dst_.rkey()});
  }
  Pair pair_;
  Buffer src_, dst_;
};

TEST_P(SendQueueAccounting, NeverSignalingFillsTheQueue) {
  const uint32_t cap = pair_.a->cap().max_send_wr;
  ASSERT_GE(cap, kSendQueueDepth);
  uint32_t accepted = 0;
  int rc = 0;
  for (; accepted < 4 * cap + 16; ++accepted) {
    rc = PostWrite(0, accepted);
    if (rc != 0) break;
  }
  EXPECT_EQ(rc, ENOMEM) << "after " << accepted << " unsignaled WRs (cap.max_send_wr " << cap << ")";
  EXPECT_GE(accepted, cap) << "the SQ refused WRs before its capacity";
  EXPECT_LE(accepted, 2 * cap) << "unsignaled WRs did not occupy SQ slots";
  EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), std::chrono::milliseconds(20))) << "unsignaled WRs produced completions";
}

TEST_P(SendQueueAccounting, SignalingEveryNthNeverFills) {
  const uint32_t cap = pair_.a->cap().max_send_wr;
  const uint32_t every = cap / 2;  // at most 2 * every = cap WRs outstanding
  bool outstanding = false;
  for (int i = 0; i < kSignaledPostsTotal; ++i) {
    const bool signaled = (i % every) == every - 1;
    const int rc = PostWrite(signaled ? IBV_SEND_SIGNALED : 0, i);
    ASSERT_EQ(rc, 0) << "post " << i << " failed with " << strerror(rc) << " although every " << every
                     << "-th WR is signaled and polled (cap " << cap << ")";
    if (!signaled) continue;
    if (outstanding) {
      ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
    }
    outstanding = true;
  }
}

TEST_P(SendQueueAccounting, OverflowingListReportsBadWr) {
  const uint32_t cap = pair_.a->cap().max_send_wr;
  const uint32_t count = 2 * cap + 4;
  std::vector<ibv_sge> sges(count, Sge(src_, 0, 8));
  std::vector<ibv_send_wr> wrs(count);
  for (uint32_t i = 0; i < count; ++i) {
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].wr.rdma.remote_addr = dst_.addr();
    wrs[i].wr.rdma.rkey = dst_.rkey();
    wrs[i].next = i + 1 < count ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(pair_.a->qp(), wrs.data(), &bad), ENOMEM);
  ASSERT_NE(bad, nullptr);
  const ptrdiff_t first_refused = bad - wrs.data();
  EXPECT_GE(first_refused, static_cast<ptrdiff_t>(cap));
  EXPECT_LT(first_refused, static_cast<ptrdiff_t>(count));
}

// An empty list posts nothing: mlx5 (and softnic) return 0, rxe has returned EINVAL. Either
// way the QP stays usable.
TEST_P(SendQueueAccounting, EmptyListPostsNothing) {
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(pair_.a->qp(), nullptr, &bad);
  EXPECT_TRUE(rc == 0 || rc == EINVAL) << "ibv_post_send(NULL) returned " << rc;
  EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), std::chrono::milliseconds(20))) << "an empty post completed something";
  EXPECT_EQ(PostWrite(IBV_SEND_SIGNALED, 1), 0) << "the QP is unusable after an empty post";
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
}

TEST_P(SendQueueAccounting, RecvQueueHoldsWhatItReports) {
  std::unique_ptr<Endpoint> ep;
  CONFORMANCE_SETUP(MakeEndpoint(&ep, local(), {.type = IBV_QPT_RC, .recv_wr = kOddRecvDepth}));
  ASSERT_EQ(ModifyToInit(*ep, {}), 0);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(ep->qp(), &attr, IBV_QP_CAP, &init), 0);
  const uint32_t reported = init.cap.max_recv_wr;
  EXPECT_GE(reported, kOddRecvDepth);
  EXPECT_EQ(ep->cap().max_recv_wr, reported) << "ibv_create_qp and ibv_query_qp report different max_recv_wr";
  for (uint32_t i = 0; i < reported; ++i)
    ASSERT_EQ(PostRecv(ep->qp(), {Sge(src_, 0, 8)}, i), 0) << "RECV " << i << " of the " << reported << " reported";
  EXPECT_EQ(PostRecv(ep->qp(), {Sge(src_, 0, 8)}, reported), ENOMEM)
      << "the receive queue holds more than the " << reported << " WRs it reports";
}

CONFORMANCE_INSTANTIATE(SendQueueAccounting);

}  // namespace
}  // namespace conformance
