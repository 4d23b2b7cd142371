// Transport x opcode matrix: RC allows every opcode, UC no READ/atomics, UD only
// SEND/SEND_WITH_IMM. A refused opcode fails in ibv_post_send, posts nothing, and
// leaves the QP usable.
#include <arpa/inet.h>

#include <cstring>
#include <tuple>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 256;
constexpr uint32_t kImm = 0xc0ffee01;
constexpr size_t kRecvOffset = 2048;  // RECVs land away from the WRITE target

using MatrixParam = std::tuple<DevicePair, ibv_qp_type, ibv_wr_opcode>;

bool Allowed(ibv_qp_type type, ibv_wr_opcode opcode) {
  switch (type) {
    case IBV_QPT_RC: return true;
    case IBV_QPT_UC:
      return opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM || opcode == IBV_WR_SEND ||
             opcode == IBV_WR_SEND_WITH_IMM;
    case IBV_QPT_UD: return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
    default: return false;
  }
}

bool IsAtomic(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

ibv_wc_opcode ExpectedSendWcOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

class OpcodeMatrix : public testing::TestWithParam<MatrixParam>, protected VerbsBase {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(OpenDevices(std::get<0>(GetParam())));
    type_ = std::get<1>(GetParam());
    opcode_ = std::get<2>(GetParam());
    if (IsAtomic(opcode_) && Allowed(type_, opcode_) && peer().attr().atomic_cap == IBV_ATOMIC_NONE)
      GTEST_SKIP() << peer().name() << " has atomic_cap IBV_ATOMIC_NONE";
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = type_}));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 4096));
    for (size_t i = 0; i < kMessageBytes; ++i) local_buf_.data()[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  SendSpec Spec(ibv_wr_opcode opcode) {
    SendSpec spec{.opcode = opcode, .sges = {Sge(local_buf_, 0, IsAtomic(opcode) ? 8 : kMessageBytes)},
                  .wr_id = 42, .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey(), .imm_host = kImm};
    if (type_ == IBV_QPT_UD) {
      spec.ah = pair_.a_to_b.get();
      spec.remote_qpn = pair_.b->qp()->qp_num;
    }
    return spec;
  }
  size_t RecvOffset() const { return type_ == IBV_QPT_UD ? kGrhBytes : 0; }

  // A refused opcode: it fails at post time, nothing completes or lands, and the QP stays
  // usable: a SEND (allowed everywhere) goes through.
  void ExpectRefused() {
    bool bad_is_wr = false;
    const int rc = PostSend(pair_.a->qp(), Spec(opcode_), &bad_is_wr);
    EXPECT_NE(rc, 0) << OpcodeName(opcode_) << " on " << QpTypeName(type_) << " must be refused at post time";
    if (rc != 0) {
      EXPECT_TRUE(bad_is_wr) << "bad_wr must point at the refused WR";
    }
    ibv_wc wc{};
    EXPECT_TRUE(StaysEmpty(pair_.a->send_cq(), kQuietTimeMs, &wc)) << "refused WR completed: " << Describe(wc);
    EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), kQuietTimeMs, &wc)) << "refused WR delivered: " << Describe(wc);
    for (size_t i = 0; i < kRecvOffset; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "refused WR wrote remote memory";
    EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Spec(IBV_WR_SEND), IBV_WC_SUCCESS));
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
    EXPECT_EQ(std::memcmp(remote_buf_.data() + kRecvOffset + RecvOffset(), local_buf_.data(), kMessageBytes), 0);
  }

  // An allowed opcode: its send completion, and what it did to local and remote memory.
  void ExpectTransferred() {
    uint64_t* remote_word = reinterpret_cast<uint64_t*>(remote_buf_.data());
    uint64_t* local_word = reinterpret_cast<uint64_t*>(local_buf_.data());
    SendSpec spec = Spec(opcode_);
    if (opcode_ == IBV_WR_RDMA_READ) {
      for (size_t i = 0; i < kMessageBytes; ++i) remote_buf_.data()[i] = static_cast<uint8_t>(i ^ 0x5a);
    } else if (IsAtomic(opcode_)) {
      *remote_word = 5;
      spec.compare_add = opcode_ == IBV_WR_ATOMIC_CMP_AND_SWP ? 5 : 3;
      spec.swap = 9;
    }
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, spec, IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.opcode, ExpectedSendWcOpcode(opcode_));
    EXPECT_EQ(wc.qp_num, pair_.a->qp()->qp_num);
    switch (opcode_) {
      case IBV_WR_RDMA_WRITE:
      case IBV_WR_RDMA_WRITE_WITH_IMM:
        EXPECT_EQ(std::memcmp(remote_buf_.data(), local_buf_.data(), kMessageBytes), 0);
        break;
      case IBV_WR_RDMA_READ:
        for (size_t i = 0; i < kMessageBytes; ++i)
          ASSERT_EQ(local_buf_.data()[i], static_cast<uint8_t>(i ^ 0x5a)) << "READ byte " << i;
        break;
      case IBV_WR_ATOMIC_CMP_AND_SWP:
        EXPECT_EQ(*local_word, 5u) << "CMP_AND_SWP returns the original value";
        EXPECT_EQ(*remote_word, 9u);
        EXPECT_EQ(wc.byte_len, 8u);
        break;
      case IBV_WR_ATOMIC_FETCH_AND_ADD:
        EXPECT_EQ(*local_word, 5u) << "FETCH_AND_ADD returns the original value";
        EXPECT_EQ(*remote_word, 8u);
        EXPECT_EQ(wc.byte_len, 8u);
        break;
      default:
        break;
    }
  }

  // The responder's RECV completion of a SEND or a WRITE_WITH_IMM.
  void ExpectReceived() {
    const bool with_imm = opcode_ == IBV_WR_SEND_WITH_IMM || opcode_ == IBV_WR_RDMA_WRITE_WITH_IMM;
    ibv_wc rwc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &rwc));
    EXPECT_EQ(rwc.wr_id, 77u);
    EXPECT_EQ(rwc.qp_num, pair_.b->qp()->qp_num);
    if (opcode_ == IBV_WR_RDMA_WRITE_WITH_IMM) {
      EXPECT_EQ(rwc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    } else {
      EXPECT_EQ(rwc.opcode, IBV_WC_RECV);
      EXPECT_EQ(rwc.byte_len, kMessageBytes + RecvOffset());
      EXPECT_EQ(std::memcmp(remote_buf_.data() + kRecvOffset + RecvOffset(), local_buf_.data(), kMessageBytes), 0);
    }
    if (with_imm) {
      EXPECT_TRUE(rwc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(rwc.imm_data, htonl(kImm)) << "imm_data is in network byte order";
    } else {
      EXPECT_FALSE(rwc.wc_flags & IBV_WC_WITH_IMM);
    }
    if (type_ == IBV_QPT_UD) {
      EXPECT_EQ(rwc.src_qp, pair_.a->qp()->qp_num);
    }
  }

  ibv_qp_type type_ = IBV_QPT_RC;
  ibv_wr_opcode opcode_ = IBV_WR_SEND;
  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

TEST_P(OpcodeMatrix, AllowedOrRefused) {
  const bool needs_recv = opcode_ == IBV_WR_SEND || opcode_ == IBV_WR_SEND_WITH_IMM ||
                          opcode_ == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (needs_recv || !Allowed(type_, opcode_)) {
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, kRecvOffset, 2048)}, 77), 0);
  }
  if (!Allowed(type_, opcode_)) {
    ExpectRefused();
    return;
  }
  ASSERT_NO_FATAL_FAILURE(ExpectTransferred());
  if (!needs_recv) {
    EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), std::chrono::milliseconds(20)));
    return;
  }
  ExpectReceived();
}

std::string MatrixName(const testing::TestParamInfo<MatrixParam>& info) {
  return DevicePairName(std::get<0>(info.param)) + "_" + QpTypeName(std::get<1>(info.param)) + "_" +
         OpcodeName(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Devices, OpcodeMatrix,
                         testing::Combine(testing::ValuesIn(DevicePairs()),
                                          testing::Values(IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD),
                                          testing::Values(IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
                                                          IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
                                                          IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD)),
                         MatrixName);

}  // namespace
}  // namespace conformance
