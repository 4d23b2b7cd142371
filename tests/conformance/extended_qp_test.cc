// The extended QP API: ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (and
// IBV_QP_INIT_ATTR_CREATE_FLAGS with no flag, which every kernel provider accepts) and the
// ibv_wr_* builders (start, opcode, set_sge / set_inline_data / set_ud_addr, complete or abort).
#include <arpa/inet.h>

#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                            IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
constexpr uint32_t kInlineBytes = 64;

class ExtendedQp : public VerbsTest {
 protected:
  void SetUpPair(ibv_qp_type type, uint64_t ops) {
    std::unique_ptr<Endpoint> a;
    int err = 0;
    std::string error;
    a = Endpoint::Create(local(), {.type = type, .send_sge = 2, .inline_bytes = kInlineBytes, .send_ops_flags = ops}, &err, &error);
    if (!a && IsUnsupported(err)) GTEST_SKIP() << error;
    ASSERT_TRUE(a != nullptr) << error;
    pair_.a = std::move(a);
    CONFORMANCE_SETUP(MakeEndpoint(&pair_.b, peer(), {.type = type}));
    ASSERT_EQ(Connect(*pair_.a, pair_.b->info()), 0);
    ASSERT_EQ(Connect(*pair_.b, pair_.a->info()), 0);
    if (type == IBV_QPT_UD) {
      CONFORMANCE_SETUP(MakeAh(&pair_.a_to_b, local(), pair_.b->info()));
    }
    qpx_ = ibv_qp_to_qp_ex(pair_.a->qp());
    ASSERT_NE(qpx_, nullptr) << "ibv_qp_to_qp_ex returned NULL for a QP made by ibv_create_qp_ex";
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 8192));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 8192));
  }
  void Begin(uint64_t wr_id) {
    qpx_->wr_id = wr_id;
    qpx_->wr_flags = IBV_SEND_SIGNALED;
  }

  Pair pair_;
  ibv_qp_ex* qpx_ = nullptr;
  Buffer local_buf_, remote_buf_;
};

TEST_P(ExtendedQp, RcBatchOfEveryOpcode) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kRcOps));
  const bool atomics = peer().attr().atomic_cap != IBV_ATOMIC_NONE;
  std::memset(local_buf_.data(), 0x21, 64);
  for (int i = 0; i < 64; ++i) remote_buf_.data()[1024 + i] = static_cast<uint8_t>(i);
  *reinterpret_cast<uint64_t*>(remote_buf_.data() + 2048) = 40;
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096, 256)}, 90), 0);
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096 + 256, 256)}, 91), 0);

  ibv_wr_start(qpx_);
  Begin(1);
  ibv_wr_rdma_write(qpx_, remote_buf_.rkey(), remote_buf_.addr());
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 64);
  Begin(2);
  ibv_wr_send(qpx_);
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 48);
  Begin(3);
  ibv_wr_rdma_read(qpx_, remote_buf_.rkey(), remote_buf_.addr() + 1024);
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr() + 512, 64);
  Begin(4);
  ibv_wr_send_imm(qpx_, htonl(0xabcd));
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 16);
  if (atomics) {
    Begin(5);
    ibv_wr_atomic_fetch_add(qpx_, remote_buf_.rkey(), remote_buf_.addr() + 2048, 2);
    ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr() + 1024, 8);
  }
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);

  const size_t expected = atomics ? 5 : 4;
  std::vector<ibv_wc> wcs = PollMany(pair_.a->send_cq(), expected);
  ASSERT_EQ(wcs.size(), expected);
  const ibv_wc_opcode opcodes[] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_RDMA_READ, IBV_WC_SEND, IBV_WC_FETCH_ADD};
  for (size_t i = 0; i < wcs.size(); ++i) {
    ASSERT_WC_STATUS(wcs[i], IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].opcode, opcodes[i]);
  }
  EXPECT_EQ(remote_buf_.data()[63], 0x21);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(local_buf_.data()[512 + i], i) << "READ byte " << i;
  if (atomics) {
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(local_buf_.data() + 1024), 40u);
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(remote_buf_.data() + 2048), 42u);
  }
  std::vector<ibv_wc> recvs = PollMany(pair_.b->recv_cq(), 2);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(recvs[0].byte_len, 48u);
  EXPECT_EQ(recvs[1].byte_len, 16u);
  EXPECT_TRUE(recvs[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(recvs[1].imm_data, htonl(0xabcd));
}

TEST_P(ExtendedQp, InlineWriteWithImm) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kRcOps));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 4096, 64)}, 7), 0);
  uint8_t payload[kInlineBytes];
  std::memset(payload, 0x6b, sizeof(payload));
  ibv_wr_start(qpx_);
  Begin(11);
  qpx_->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_wr_rdma_write_imm(qpx_, remote_buf_.rkey(), remote_buf_.addr(), htonl(77));
  ibv_wr_set_inline_data(qpx_, payload, sizeof(payload));
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  std::memset(payload, 0, sizeof(payload));  // inline data is copied by the post
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.imm_data, htonl(77));
  for (size_t i = 0; i < kInlineBytes; ++i) ASSERT_EQ(remote_buf_.data()[i], 0x6b);
}

TEST_P(ExtendedQp, UdSendWithUdAddr) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 1024)}, 3), 0);
  std::memset(local_buf_.data(), 0x55, 100);
  ibv_wr_start(qpx_);
  Begin(12);
  ibv_wr_send_imm(qpx_, htonl(5));
  ibv_wr_set_ud_addr(qpx_, pair_.a_to_b.get(), pair_.b->qp()->qp_num, kQkey);
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 100);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.byte_len, kGrhBytes + 100);
  EXPECT_EQ(wc.imm_data, htonl(5));
  EXPECT_EQ(wc.src_qp, pair_.a->qp()->qp_num);
  EXPECT_EQ(remote_buf_.data()[kGrhBytes + 99], 0x55);
}

TEST_P(ExtendedQp, AbortPostsNothing) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kRcOps));
  std::memset(local_buf_.data(), 0x31, 64);
  ibv_wr_start(qpx_);
  Begin(13);
  ibv_wr_rdma_write(qpx_, remote_buf_.rkey(), remote_buf_.addr());
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 64);
  ibv_wr_abort(qpx_);
  EXPECT_TRUE(StaysEmpty(pair_.a->send_cq())) << "an aborted WR completed";
  EXPECT_EQ(remote_buf_.data()[0], 0) << "an aborted WRITE reached remote memory";
  // The QP accepts the next batch.
  ibv_wr_start(qpx_);
  Begin(14);
  ibv_wr_rdma_write(qpx_, remote_buf_.rkey(), remote_buf_.addr());
  ibv_wr_set_sge(qpx_, local_buf_.lkey(), local_buf_.addr(), 64);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.wr_id, 14u);
  EXPECT_EQ(remote_buf_.data()[63], 0x31);
}

TEST_P(ExtendedQp, SetSgeListGathers) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kRcOps));
  std::memset(local_buf_.data(), 0x01, 32);
  std::memset(local_buf_.data() + 256, 0x02, 32);
  const ibv_sge sges[] = {Sge(local_buf_, 0, 32), Sge(local_buf_, 256, 32)};
  ibv_wr_start(qpx_);
  Begin(15);
  ibv_wr_rdma_write(qpx_, remote_buf_.rkey(), remote_buf_.addr());
  ibv_wr_set_sge_list(qpx_, 2, sges);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  EXPECT_EQ(remote_buf_.data()[31], 0x01);
  EXPECT_EQ(remote_buf_.data()[32], 0x02);
  EXPECT_EQ(remote_buf_.data()[63], 0x02);
  EXPECT_EQ(remote_buf_.data()[64], 0);
}

TEST_P(ExtendedQp, CreateFlagsMaskWithNoFlag) {
  CqPtr cq(ibv_create_cq(local().ctx(), 16, nullptr, nullptr, 0));
  ASSERT_TRUE(cq != nullptr) << strerror(errno);
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_RC;
  init.send_cq = cq.get();
  init.recv_cq = cq.get();
  init.cap.max_send_wr = 4;
  init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  init.pd = local().pd();
  init.create_flags = 0;
  QpPtr qp(ibv_create_qp_ex(local().ctx(), &init));
  ASSERT_TRUE(qp != nullptr) << "ibv_create_qp_ex with IBV_QP_INIT_ATTR_CREATE_FLAGS and create_flags 0: "
                             << strerror(errno);
  EXPECT_EQ(QueryState(qp.get()), IBV_QPS_RESET);
}

CONFORMANCE_INSTANTIATE(ExtendedQp);

}  // namespace
}  // namespace conformance
