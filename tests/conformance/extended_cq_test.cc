// The extended CQ API: ibv_create_cq_ex, ibv_start_poll / ibv_next_poll / ibv_end_poll and
// the ibv_wc_read_* accessors.
#include <arpa/inet.h>

#include <cstring>
#include <thread>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint64_t kWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                              IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID;

class ExtendedCq : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 64;
    attr.wc_flags = kWcFlags;
    cqx_ = ibv_create_cq_ex(peer().ctx(), &attr);
    if (cqx_ == nullptr && IsUnsupported(errno)) GTEST_SKIP() << "ibv_create_cq_ex: " << strerror(errno);
    ASSERT_NE(cqx_, nullptr) << "ibv_create_cq_ex(wc_flags 0x" << std::hex << kWcFlags << "): " << strerror(errno);
    cq_.reset(ibv_cq_ex_to_cq(cqx_));
  }
  void MakeQps(ibv_qp_type type) {
    QpConfig b_config{.type = type, .send_cq = cq_.get(), .recv_cq = cq_.get()};
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = type}, {}, &b_config));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 4096));
  }
  // ibv_start_poll until a completion is there (ENOENT means empty), bounded.
  int StartPoll() {
    ibv_poll_cq_attr attr{};
    const auto deadline = Clock::now() + kCompletionTimeoutMs;
    for (;;) {
      const int rc = ibv_start_poll(cqx_, &attr);
      if (rc != ENOENT || Clock::now() > deadline) return rc;
      std::this_thread::yield();
    }
  }

  ibv_cq_ex* cqx_ = nullptr;
  CqPtr cq_;
  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

TEST_P(ExtendedCq, EmptyCqStartPollIsEnoent) {
  ibv_poll_cq_attr attr{};
  EXPECT_EQ(ibv_start_poll(cqx_, &attr), ENOENT);
}

TEST_P(ExtendedCq, ReadAccessorsOnRecv) {
  CONFORMANCE_SETUP(MakeQps(IBV_QPT_UD));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 1024)}, 61), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_SEND_WITH_IMM, .sges = {Sge(local_buf_, 0, 77)},
                                         .imm_host = 0x10203040, .ah = pair_.a_to_b.get(),
                                         .remote_qpn = pair_.b->qp()->qp_num},
                                        IBV_WC_SUCCESS));
  ASSERT_EQ(StartPoll(), 0) << "no completion on the extended CQ";
  EXPECT_EQ(cqx_->status, IBV_WC_SUCCESS) << ibv_wc_status_str(cqx_->status);
  EXPECT_EQ(cqx_->wr_id, 61u);
  EXPECT_EQ(ibv_wc_read_opcode(cqx_), IBV_WC_RECV);
  EXPECT_EQ(ibv_wc_read_byte_len(cqx_), kGrhBytes + 77);
  EXPECT_EQ(ibv_wc_read_imm_data(cqx_), htonl(0x10203040));
  EXPECT_TRUE(ibv_wc_read_wc_flags(cqx_) & IBV_WC_WITH_IMM);
  EXPECT_EQ(ibv_wc_read_qp_num(cqx_), pair_.b->qp()->qp_num);
  EXPECT_EQ(ibv_wc_read_src_qp(cqx_), pair_.a->qp()->qp_num);
  if (!local().roce()) {
    EXPECT_EQ(ibv_wc_read_slid(cqx_), local().port().lid);
  }
  EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
  ibv_end_poll(cqx_);
}

TEST_P(ExtendedCq, NextPollWalksSeveral) {
  CONFORMANCE_SETUP(MakeQps(IBV_QPT_RC));
  constexpr int kSends = 3;
  for (int i = 0; i < kSends; ++i) ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, i * 64, 64)}, 200 + i), 0);
  for (int i = 0; i < kSends; ++i) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(
        *pair_.a, {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, 8 + i)}, .wr_id = static_cast<uint64_t>(i)},
        IBV_WC_SUCCESS));
  }
  ASSERT_EQ(StartPoll(), 0);
  for (int i = 0; i < kSends; ++i) {
    if (i > 0) {
      ASSERT_EQ(ibv_next_poll(cqx_), 0) << "completion " << i << " missing";
    }
    EXPECT_EQ(cqx_->status, IBV_WC_SUCCESS);
    EXPECT_EQ(cqx_->wr_id, 200u + i);
    EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 8u + i);
    EXPECT_EQ(ibv_wc_read_opcode(cqx_), IBV_WC_RECV);
  }
  EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
  ibv_end_poll(cqx_);
  ibv_poll_cq_attr attr{};
  EXPECT_EQ(ibv_start_poll(cqx_, &attr), ENOENT) << "completions came back after end_poll";
}

TEST_P(ExtendedCq, SendSideErrorStatus) {
  // A's send CQ is plain; route b's sends (a READ with a bad rkey) through the extended CQ.
  CONFORMANCE_SETUP(MakeQps(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 8)},
                                         .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()},
                                        IBV_WC_SUCCESS));
  ASSERT_EQ(PostSend(pair_.b->qp(), {.opcode = IBV_WR_RDMA_READ, .sges = {Sge(remote_buf_, 0, 8)}, .wr_id = 99,
                                     .remote_addr = local_buf_.addr(), .rkey = local_buf_.rkey() ^ 0x77u}),
            0);
  ASSERT_EQ(StartPoll(), 0);
  EXPECT_EQ(cqx_->wr_id, 99u);
  EXPECT_EQ(cqx_->status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(cqx_->status);
  ibv_end_poll(cqx_);
}

CONFORMANCE_INSTANTIATE(ExtendedCq);

}  // namespace
}  // namespace conformance
