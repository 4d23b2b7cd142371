// Immediate data: SEND_WITH_IMM and RDMA_WRITE_WITH_IMM carry imm_data in network byte
// order with IBV_WC_WITH_IMM; WRITE_WITH_IMM consumes a RECV and completes it as
// IBV_WC_RECV_RDMA_WITH_IMM while its payload goes to the remote address, not the RECV.
#include <arpa/inet.h>

#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 100;

class ImmediateData : public PairTest<> {
 protected:
  // The pair with the message's bytes in place.
  void SetUpFilledPair(ibv_qp_type type) {
    CONFORMANCE_SETUP(SetUpPair(type, {}, 8192));
    std::memset(local_buf_.data(), 0x4d, kMessageBytes);
  }
  void ExpectImm(const ibv_wc& wc, uint32_t imm_host) {
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM) << Describe(wc);
    EXPECT_EQ(wc.imm_data, htonl(imm_host)) << "imm_data must be in network byte order";
  }
};

TEST_P(ImmediateData, SendWithImm) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    SCOPED_TRACE(QpTypeName(type));
    pair_ = Pair();
    CONFORMANCE_SETUP(SetUpFilledPair(type));
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 21), 0);
    const uint32_t imm = 0x01020304;
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                          {.opcode = IBV_WR_SEND_WITH_IMM, .sges = {Sge(local_buf_, 0, kMessageBytes)},
                                           .imm_host = imm, .ah = pair_.a_to_b.get(),
                                           .remote_qpn = pair_.b->qp()->qp_num},
                                          IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    ExpectImm(wc, imm);
    EXPECT_EQ(wc.byte_len, kMessageBytes + (type == IBV_QPT_UD ? kGrhBytes : 0));
  }
}

TEST_P(ImmediateData, WriteWithImmConsumesRecv) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC}) {
    SCOPED_TRACE(QpTypeName(type));
    pair_ = Pair();
    CONFORMANCE_SETUP(SetUpFilledPair(type));
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096, 64)}, 31), 0);
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096 + 64, 64)}, 32), 0);
    const uint32_t imm = 0xdeadbeef;
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                          {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                                           .sges = {Sge(local_buf_, 0, kMessageBytes)},
                                           .remote_addr = remote_buf_.addr() + 128, .rkey = remote_buf_.rkey(),
                                           .imm_host = imm},
                                          IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.wr_id, 31u) << "WRITE_WITH_IMM consumes the first posted RECV";
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(wc.byte_len, kMessageBytes) << "byte_len is the WRITE's length";
    ExpectImm(wc, imm);
    EXPECT_EQ(remote_buf_.data()[128], 0x4d);
    EXPECT_EQ(remote_buf_.data()[128 + kMessageBytes - 1], 0x4d);
    EXPECT_EQ(remote_buf_.data()[4096], 0) << "the WRITE payload must not land in the RECV buffer";
    EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), std::chrono::milliseconds(20))) << "only one RECV consumed";
  }
}

TEST_P(ImmediateData, ZeroLengthWriteWithImm) {
  CONFORMANCE_SETUP(SetUpFilledPair(IBV_QPT_RC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096, 64)}, 41), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .sges = {},
                                         .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey(),
                                         .imm_host = 7},
                                        IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.byte_len, 0u);
  ExpectImm(wc, 7);
}

TEST_P(ImmediateData, RcWriteWithImmWithoutRecvIsRnr) {
  CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC}, {.rnr_retry = 1, .min_rnr_timer = 1}));
  CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
  CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 4096));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .sges = {Sge(local_buf_, 0, 16)},
                                         .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey(),
                                         .imm_host = 1},
                                        IBV_WC_RNR_RETRY_EXC_ERR));
}

TEST_P(ImmediateData, PlainSendHasNoImmFlag) {
  CONFORMANCE_SETUP(SetUpFilledPair(IBV_QPT_RC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 51), 0);
  ASSERT_NO_FATAL_FAILURE(
      PostAndExpect(*pair_.a, {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, kMessageBytes)}}, IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc.byte_len, kMessageBytes);
  EXPECT_EQ(wc.qp_num, pair_.b->qp()->qp_num);
}

CONFORMANCE_INSTANTIATE(ImmediateData);

}  // namespace
}  // namespace conformance
