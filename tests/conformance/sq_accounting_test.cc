// Send-queue accounting as on hardware: an unsignaled WR's slot is freed only when a later
// signaled WR completes, so a sender that never signals fills the SQ (ENOMEM), and one that
// signals every N-th WR and polls never does. A receive queue holds exactly the
// max_recv_wr that ibv_create_qp and ibv_query_qp report (which may exceed the request).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

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

// ibv_post_send may be called from several threads on one QP: two threads posting WRITEs of
// one shape at once (whatever a provider caches for that shape is filled and used by both)
// lose none, complete each exactly once, leave each thread's bytes where it wrote them, and
// give back every send-queue slot.
TEST_P(SendQueueAccounting, TwoThreadsPostOnOneQp) {
  if (const char* single = std::getenv("SOFTNIC_SINGLE_THREADED"); single && std::strcmp(single, "1") == 0) {
    GTEST_SKIP() << "SOFTNIC_SINGLE_THREADED promises one posting thread per QP";
  }
  // Few enough WRs for a provider emulated under TCG (rxe in the VM tier: a few hundred per second).
  constexpr uint32_t kThreads = 2, kPerThread = 500, kBytes = 32, kStride = 64;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::atomic<int> failure{0};
  auto post = [&](uint32_t thread) {
    const SendSpec write{.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(src_, thread * kStride, kBytes)},
                         .remote_addr = dst_.addr() + thread * kStride, .rkey = dst_.rkey()};
    for (uint32_t i = 0; i < kPerThread && std::chrono::steady_clock::now() < deadline;) {
      SendSpec numbered = write;
      numbered.wr_id = uint64_t{thread} << 32 | i;
      const int rc = PostSend(pair_.a->qp(), numbered);
      if (rc == 0) {
        ++i;
      } else if (rc == ENOMEM) {
        std::this_thread::yield();  // the SQ is full until the poller retires completions
      } else {
        failure.store(rc);
        return;
      }
    }
  };
  for (uint32_t t = 0; t < kThreads; ++t) std::memset(src_.data() + t * kStride, 0x10 + t, kBytes);
  std::vector<std::thread> posters;
  for (uint32_t t = 0; t < kThreads; ++t) posters.emplace_back(post, t);
  std::vector<std::vector<uint8_t>> seen(kThreads, std::vector<uint8_t>(kPerThread, 0));
  uint32_t completed = 0, bad = 0;
  while (completed < kThreads * kPerThread && std::chrono::steady_clock::now() < deadline && failure.load() == 0) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(pair_.a->send_cq(), 1, &wc);
    if (n <= 0) continue;
    ++completed;
    const uint64_t thread = wc.wr_id >> 32, i = wc.wr_id & 0xffffffffu;
    if (wc.status != IBV_WC_SUCCESS || thread >= kThreads || i >= kPerThread || seen[thread][i]++ != 0) ++bad;
  }
  for (std::thread& poster : posters) poster.join();
  ASSERT_EQ(failure.load(), 0) << "ibv_post_send failed: " << strerror(failure.load());
  EXPECT_EQ(completed, kThreads * kPerThread) << "completions within the deadline";
  EXPECT_EQ(bad, 0u) << "completions failed, unknown or repeated";
  for (uint32_t t = 0; t < kThreads; ++t) {
    for (uint32_t b = 0; b < kBytes; ++b) {
      ASSERT_EQ(dst_.data()[t * kStride + b], 0x10 + t) << "thread " << t << "'s byte " << b;
    }
  }  // Every slot came back: the queue takes a full window again.
  for (uint32_t i = 0; i < pair_.a->cap().max_send_wr; ++i) {
    ASSERT_EQ(PostWrite(IBV_SEND_SIGNALED, i), 0) << "WR " << i << " of a full window after the threads";
  }
  for (uint32_t i = 0; i < pair_.a->cap().max_send_wr; ++i) {
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  }
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
