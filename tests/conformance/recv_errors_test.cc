// Spec error table, rows "no RECV posted" and "RECV buffer too small".
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 64;
constexpr size_t kSmallRecvBytes = 16;

class RecvErrors : public PairTest<> {
 protected:
  SendSpec Send(uint8_t fill, uint64_t wr_id = 1) {
    std::memset(local_buf_.data(), fill, kMessageBytes);
    return {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, kMessageBytes)}, .wr_id = wr_id,
            .ah = pair_.a_to_b.get(), .remote_qpn = pair_.b->qp()->qp_num};
  }
  size_t RecvOffset() const { return pair_.b->type() == IBV_QPT_UD ? kGrhBytes : 0; }
  // UC/UD: a SEND without a RECV vanishes; the next one (after posting a RECV) arrives.
  void ExpectDroppedThenDelivered() {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x11), IBV_WC_SUCCESS));
    ASSERT_TRUE(StaysEmpty(pair_.b->recv_cq())) << "a completion appeared without a posted RECV";
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, RecvOffset() + kMessageBytes)}, 7), 0);
    ibv_wc unexpected{};
    ASSERT_TRUE(StaysEmpty(pair_.b->recv_cq(), kQuietTimeMs, &unexpected))
        << "the dropped message was delivered later: " << Describe(unexpected);
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x22, 2), IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(remote_buf_.data()[RecvOffset()], 0x22) << "received the dropped message instead of the second";
  }
};

TEST_P(RecvErrors, RcNoRecvRnrRetryExceeded) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, {.rnr_retry = 1, .min_rnr_timer = 1}));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x11), IBV_WC_RNR_RETRY_EXC_ERR));
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR);
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq()));
}

TEST_P(RecvErrors, RcNoRecvThenRecvWithInfiniteRnrRetry) {
  // rnr_retry 7 retries forever: a RECV posted a little later is still met.
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, {.rnr_retry = 7, .min_rnr_timer = 1}));
  ASSERT_EQ(PostSend(pair_.a->qp(), Send(0x33)), 0);
  EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), std::chrono::milliseconds(50)))
      << "the SEND completed although no RECV was posted";
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, kMessageBytes)}, 9), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
  EXPECT_EQ(remote_buf_.data()[0], 0x33);
}

// A WRITE posted behind a SEND that waits for a RECV waits too, even when the QP has just
// posted several WRITEs of its shape (whatever a provider caches for them is warm).
TEST_P(RecvErrors, RcWarmWriteWaitsBehindRnrStalledSend) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, {.rnr_retry = 7, .min_rnr_timer = 1}));
  constexpr size_t kWriteFrom = 1024, kWriteTo = 2048, kWriteBytes = 32, kFenceTo = 3072;
  std::memset(local_buf_.data() + kWriteFrom, 0x5a, kWriteBytes);
  // A provider may remember a signaled and an unsignaled shape apart: warm and stall each.
  for (unsigned flags : {unsigned{IBV_SEND_SIGNALED}, 0u}) {
    SCOPED_TRACE(flags != 0 ? "signaled WRITEs" : "unsignaled WRITEs");
    SendSpec write{.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, kWriteFrom, kWriteBytes)}, .flags = flags,
                   .wr_id = 77, .remote_addr = remote_buf_.addr() + kWriteTo, .rkey = remote_buf_.rkey()};
    for (int i = 0; i < 3; ++i) ASSERT_EQ(PostSend(pair_.a->qp(), write), 0);
    SendSpec fence{.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 8)}, .wr_id = 88,
                   .remote_addr = remote_buf_.addr() + kFenceTo, .rkey = remote_buf_.rkey()};
    // Completions come in order: the fence's means every WRITE before it is done.
    auto drain_through_fence = [&] {
      ASSERT_EQ(PostSend(pair_.a->qp(), fence), 0);
      ibv_wc wc{};
      do {
        ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS, &wc));
      } while (wc.wr_id != fence.wr_id);
    };
    ASSERT_NO_FATAL_FAILURE(drain_through_fence());
    std::memset(remote_buf_.data() + kWriteTo, 0, kWriteBytes);
    ASSERT_EQ(PostSend(pair_.a->qp(), Send(0x33)), 0);
    ASSERT_EQ(PostSend(pair_.a->qp(), write), 0);
    ibv_wc early{};
    EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), std::chrono::milliseconds(50), &early))
        << "completed before the stalled SEND met a RECV: " << Describe(early);
    for (size_t i = 0; i < kWriteBytes; ++i)
      ASSERT_EQ(remote_buf_.data()[kWriteTo + i], 0) << "the WRITE overtook the stalled SEND";
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, kMessageBytes)}, 9), 0);
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.wr_id, 1u) << "the SEND completes first";
    if (flags != 0) {
      ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS, &wc));
      EXPECT_EQ(wc.wr_id, 77u);
    }
    ASSERT_NO_FATAL_FAILURE(drain_through_fence());
    EXPECT_EQ(remote_buf_.data()[kWriteTo], 0x5a);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
  }
}

TEST_P(RecvErrors, UcNoRecvDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC));
  ExpectDroppedThenDelivered();
}

TEST_P(RecvErrors, UdNoRecvDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD));
  ExpectDroppedThenDelivered();
}

TEST_P(RecvErrors, RcRecvTooSmall) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, kSmallRecvBytes)}, 5), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x44), IBV_WC_REM_INV_REQ_ERR));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_LOC_LEN_ERR, &wc));
  EXPECT_EQ(wc.wr_id, 5u);
  for (size_t i = kSmallRecvBytes; i < 4096; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "overflowed the RECV at " << i;
}

TEST_P(RecvErrors, UcRecvTooSmall) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, kSmallRecvBytes)}, 5), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x44), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_LOC_LEN_ERR));
  for (size_t i = kSmallRecvBytes; i < 4096; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "overflowed the RECV at " << i;
}

TEST_P(RecvErrors, UdRecvTooSmall) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, kGrhBytes + kSmallRecvBytes)}, 5), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0x44), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_LOC_LEN_ERR));
  for (size_t i = kGrhBytes + kSmallRecvBytes; i < 4096; ++i)
    ASSERT_EQ(remote_buf_.data()[i], 0) << "overflowed the RECV at " << i;
}

CONFORMANCE_INSTANTIATE(RecvErrors);

}  // namespace
}  // namespace conformance
