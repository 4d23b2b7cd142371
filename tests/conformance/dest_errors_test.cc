// Spec error table, row "destination QP gone / not ready": RC retries and ends in
// IBV_WC_RETRY_EXC_ERR (small timeout/retry_cnt keep it short); UC/UD drop silently.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 64;

class DestErrors : public PairTest<> {
 protected:
  // `a` connected towards a `b` that stays in `b_state` (RESET or INIT).
  void SetUpHalfConnected(ibv_qp_type type, ibv_qp_state b_state) {
    CONFORMANCE_SETUP(MakeEndpoint(&pair_.a, local(), {.type = type}));
    CONFORMANCE_SETUP(MakeEndpoint(&pair_.b, peer(), {.type = type}));
    ASSERT_EQ(Connect(*pair_.a, pair_.b->info(), kShortRetry), 0);
    if (b_state == IBV_QPS_INIT) {
      ASSERT_EQ(ModifyToInit(*pair_.b, kShortRetry), 0);
    }
    if (type == IBV_QPT_UD) CONFORMANCE_SETUP(MakeAh(&pair_.a_to_b, local(), pair_.b->info()));
    CONFORMANCE_SETUP(SetUpBuffers());
  }
  SendSpec Write() {
    return {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, kMessageBytes)}, .wr_id = 1,
            .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()};
  }
  // Several WRITEs of one shape: whatever a provider caches about its peer is warm.
  void WarmUp() {
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_SUCCESS));
    std::memset(remote_buf_.data(), 0, kMessageBytes);
  }
  SendSpec Send(uint32_t qpn) {
    return {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, kMessageBytes)}, .wr_id = 1,
            .ah = pair_.a_to_b.get(), .remote_qpn = qpn};
  }

};

TEST_P(DestErrors, RcDestroyedQpRetryExceeded) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC}, kShortRetry));
  CONFORMANCE_SETUP(SetUpBuffers());
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  pair_.b->DestroyQp();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_RETRY_EXC_ERR));
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR);
}

// A responder moved to ERR drops what reaches it, however warm the requester is.
TEST_P(DestErrors, RcDestMovedToErrorRetryExceeded) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC}, kShortRetry));
  CONFORMANCE_SETUP(SetUpBuffers());
  std::memset(local_buf_.data(), 0x5c, kMessageBytes);
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(pair_.b->qp(), &attr, IBV_QP_STATE), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_RETRY_EXC_ERR));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written through a QP in ERR";
}

TEST_P(DestErrors, RcDestInResetRetryExceeded) {
  CONFORMANCE_SETUP(SetUpHalfConnected(IBV_QPT_RC, IBV_QPS_RESET));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_RETRY_EXC_ERR));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written through a RESET QP";
}

TEST_P(DestErrors, RcDestInInitRetryExceeded) {
  CONFORMANCE_SETUP(SetUpHalfConnected(IBV_QPT_RC, IBV_QPS_INIT));
  std::memset(local_buf_.data(), 0x5c, kMessageBytes);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_RETRY_EXC_ERR));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written through an INIT QP";
}

TEST_P(DestErrors, UcDestroyedQpDropped) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_UC}, kShortRetry));
  CONFORMANCE_SETUP(SetUpBuffers());
  pair_.b->DestroyQp();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0), IBV_WC_SUCCESS));
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
}

TEST_P(DestErrors, UcDestInInitDropped) {
  CONFORMANCE_SETUP(SetUpHalfConnected(IBV_QPT_UC, IBV_QPS_INIT));
  std::memset(local_buf_.data(), 0x5c, kMessageBytes);
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 3), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(0), IBV_WC_SUCCESS));
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq()));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written through an INIT QP";
}

TEST_P(DestErrors, UdDestroyedQpDropped) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_UD}));
  CONFORMANCE_SETUP(SetUpBuffers());
  const uint32_t qpn = pair_.b->qp()->qp_num;
  pair_.b->DestroyQp();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(qpn), IBV_WC_SUCCESS));
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
}

TEST_P(DestErrors, UdDestInInitDropped) {
  CONFORMANCE_SETUP(SetUpHalfConnected(IBV_QPT_UD, IBV_QPS_INIT));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 3), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(pair_.b->qp()->qp_num), IBV_WC_SUCCESS));
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq())) << "a UD QP in INIT received a message";
}

TEST_P(DestErrors, UdWrongQkeyDropped) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_UD}));
  CONFORMANCE_SETUP(SetUpBuffers());
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 3), 0);
  ibv_sge sge = Sge(local_buf_, 0, kMessageBytes);
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = pair_.a_to_b.get();
  wr.wr.ud.remote_qpn = pair_.b->qp()->qp_num;
  wr.wr.ud.remote_qkey = kQkey + 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(pair_.a->qp(), &wr, &bad), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq())) << "a UD message with the wrong Q_Key was delivered";
}

CONFORMANCE_INSTANTIATE(DestErrors);

}  // namespace
}  // namespace conformance
