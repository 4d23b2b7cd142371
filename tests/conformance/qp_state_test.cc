// QP state machine: invalid transitions and incomplete attribute masks fail (EINVAL or the
// provider's error), leave the QP where it was, and the QP can still be connected and used.
#include <cstring>
#include <string>

#include "verbs_fixture.h"

namespace conformance {
namespace {

class QpStateMachine : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    CONFORMANCE_SETUP(MakeEndpoint(&pair_.a, local(), {.type = IBV_QPT_RC}));
    CONFORMANCE_SETUP(MakeEndpoint(&pair_.b, peer(), {.type = IBV_QPT_RC}));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 4096));
  }
  // Finishes the connection both ways and checks a WRITE goes through.
  void ConnectAndWrite() {
    ibv_qp_state state = QueryState(pair_.a->qp());
    if (state == IBV_QPS_RESET) {
      ASSERT_EQ(ModifyToInit(*pair_.a, {}), 0);
    }
    state = QueryState(pair_.a->qp());
    if (state == IBV_QPS_INIT) {
      ASSERT_EQ(ModifyToRtr(*pair_.a, pair_.b->info(), {}), 0);
    }
    ASSERT_EQ(ModifyToRts(*pair_.a, {}), 0);
    ASSERT_EQ(Connect(*pair_.b, pair_.a->info()), 0);
    std::memset(local_buf_.data(), 0x61, 32);
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                          {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 32)},
                                           .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()},
                                          IBV_WC_SUCCESS));
    EXPECT_EQ(remote_buf_.data()[31], 0x61);
  }
  int Modify(ibv_qp_attr attr, int mask) { return ibv_modify_qp(pair_.a->qp(), &attr, mask); }
  // Connects, then leaves a flushed RECV (`recv_id`) and a flushed WRITE (`send_id`) of A
  // unpolled in A's CQs.
  void LeaveFlushedCompletions(uint64_t recv_id, uint64_t send_id) {
    ConnectAndWrite();
    ASSERT_EQ(PostRecv(pair_.a->qp(), {Sge(local_buf_, 1024, 64)}, recv_id), 0);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(Modify(attr, IBV_QP_STATE), 0);
    ASSERT_EQ(PostSend(pair_.a->qp(), {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 8)}, .wr_id = send_id,
                                       .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()}),
              0);
  }
  // Neither of A's CQs reports a completion; `which` names those that should be gone.
  void ExpectNoStaleCompletions(const std::string& which) {
    ibv_wc stale{};
    EXPECT_TRUE(StaysEmpty(pair_.a->recv_cq(), kQuietTimeMs, &stale))
        << "a receive completion " << which << ": " << Describe(stale);
    EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), kQuietTimeMs, &stale))
        << "a send completion " << which << ": " << Describe(stale);
  }

  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

TEST_P(QpStateMachine, NewQpIsReset) { EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET); }

TEST_P(QpStateMachine, ResetToRtrRefused) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = pair_.b->qp()->qp_num;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr = AhAttr(local(), pair_.b->info(), false);
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, ResetToRtsRefused) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  EXPECT_NE(Modify(attr, IBV_QP_STATE), 0);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, InitWithoutAccessFlagsRefused) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0)
      << "RC RESET->INIT requires IBV_QP_ACCESS_FLAGS";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, InitWithoutPortRefused) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS), 0)
      << "RESET->INIT requires IBV_QP_PORT";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, RtrWithoutDestQpnRefused) {
  ASSERT_EQ(ModifyToInit(*pair_.a, {}), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.ah_attr = AhAttr(local(), pair_.b->info(), false);
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                             IBV_QP_MIN_RNR_TIMER),
            0)
      << "RC INIT->RTR requires IBV_QP_DEST_QPN";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_INIT);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, RtrWithoutAvRefused) {
  ASSERT_EQ(ModifyToInit(*pair_.a, {}), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = pair_.b->qp()->qp_num;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0)
      << "RC INIT->RTR requires IBV_QP_AV";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_INIT);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, RtsWithoutRetryAttrsRefused) {
  ASSERT_EQ(ModifyToInit(*pair_.a, {}), 0);
  ASSERT_EQ(ModifyToRtr(*pair_.a, pair_.b->info(), {}), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = kStartPsn;
  EXPECT_NE(Modify(attr, IBV_QP_STATE | IBV_QP_SQ_PSN), 0)
      << "RC RTR->RTS requires TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTR);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, InitToRtsRefused) {
  ASSERT_EQ(ModifyToInit(*pair_.a, {}), 0);
  EXPECT_NE(ModifyToRts(*pair_.a, {}), 0) << "INIT->RTS skips RTR";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_INIT);
  ConnectAndWrite();
}

TEST_P(QpStateMachine, RtsBackToRtrRefused) {
  ConnectAndWrite();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_NE(Modify(attr, IBV_QP_STATE), 0);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
  std::memset(local_buf_.data(), 0x62, 32);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 32)},
                                         .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()},
                                        IBV_WC_SUCCESS));
  EXPECT_EQ(remote_buf_.data()[0], 0x62);
}

TEST_P(QpStateMachine, ErrFlushesThenResetReconnects) {
  ConnectAndWrite();
  ASSERT_EQ(PostRecv(pair_.a->qp(), {Sge(local_buf_, 1024, 64)}, 11), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(Modify(attr, IBV_QP_STATE), 0);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR);
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->recv_cq(), IBV_WC_WR_FLUSH_ERR, &wc));
  EXPECT_EQ(wc.wr_id, 11u);
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(Modify(attr, IBV_QP_STATE), 0);
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RESET);
  // b still expects a's old PSN stream; reset b too and reconnect both.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(pair_.b->qp(), &reset, IBV_QP_STATE), 0);
  ConnectAndWrite();
}

// A WRITE of the shape the QP just posted several times, after the QP moved to ERR, is
// flushed and touches nothing: no cached check outlives the transition.
TEST_P(QpStateMachine, ErrFlushesTheWarmShape) {
  ConnectAndWrite();
  SendSpec write{.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 32)}, .wr_id = 31,
                 .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()};
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, write, IBV_WC_SUCCESS));
  std::memset(remote_buf_.data(), 0, 32);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(Modify(attr, IBV_QP_STATE), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, write, IBV_WC_WR_FLUSH_ERR));
  for (size_t i = 0; i < 32; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written by a flushed WRITE";
}

// RESET discards the QP's completions still in its CQs (libmlx5 and libmlx4 purge them), so
// the first completion after reconnecting is the new WR's, not a stale flush.
TEST_P(QpStateMachine, ResetPurgesUnpolledCompletions) {
  ASSERT_NO_FATAL_FAILURE(LeaveFlushedCompletions(21, 22));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(Modify(attr, IBV_QP_STATE), 0);
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(pair_.b->qp(), &reset, IBV_QP_STATE), 0);
  ExpectNoStaleCompletions("from before RESET");
  ConnectAndWrite();  // its WRITE's completion must be the first on the send CQ
}

// Destroying a QP discards its completions still in the CQs that outlive it (libmlx5 cleans
// them out as it destroys the QP): a consumer that polls on must not meet a wr_id naming
// what it freed with the QP (libfabric's rxm closes a connection's endpoint, then drains
// the shared CQ).
TEST_P(QpStateMachine, DestroyPurgesUnpolledCompletions) {
  ASSERT_NO_FATAL_FAILURE(LeaveFlushedCompletions(41, 42));
  pair_.a->DestroyQp();
  ExpectNoStaleCompletions("of a destroyed QP");
}

// A CQ that a QP completes into cannot be destroyed (the kernel answers EBUSY): it stays
// usable, and the QP's own destroy still finds it.
TEST_P(QpStateMachine, CqInUseIsNotDestroyed) {
  ConnectAndWrite();
  EXPECT_EQ(ibv_destroy_cq(pair_.a->send_cq()), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(pair_.a->recv_cq()), EBUSY);
  SendSpec write{.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 32)}, .wr_id = 51,
                 .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()};
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, write, IBV_WC_SUCCESS));  // the QP still completes into it
  pair_.a->DestroyQp();
}

TEST_P(QpStateMachine, QueryReportsConnectionAttributes) {
  ConnectAndWrite();
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(pair_.a->qp(), &attr, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU | IBV_QP_CAP, &init),
            0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(attr.dest_qp_num, pair_.b->qp()->qp_num);
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
  EXPECT_GE(init.cap.max_send_wr, 64u);
}

CONFORMANCE_INSTANTIATE(QpStateMachine);

}  // namespace
}  // namespace conformance
