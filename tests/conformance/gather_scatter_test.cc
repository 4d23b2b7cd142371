// Gather/scatter with many SGEs: SEND gathers and RECV scatters, WRITE gathers, READ
// scatters, with SGEs of uneven sizes spread over the buffer.
#include <cstring>
#include <numeric>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint32_t kWantedSges = 30;
constexpr uint32_t kMinSges = 16;

class GatherScatter : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    sges_ = std::min<uint32_t>({kWantedSges, static_cast<uint32_t>(local().attr().max_sge),
                                static_cast<uint32_t>(peer().attr().max_sge)});
    if (sges_ < kMinSges) GTEST_SKIP() << "max_sge " << sges_ << " < " << kMinSges;
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 1 << 16));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 1 << 16));
  }
  void MakeSgePair(ibv_qp_type type) {
    // Some providers cap SGEs per WQE below max_sge; step down until the QP is created.
    for (uint32_t n = sges_; n >= kMinSges; --n) {
      int err = 0;
      std::string error;
      QpConfig config{.type = type, .send_sge = n, .recv_sge = n};
      pair_.a = Endpoint::Create(local(), config, &err, &error);
      pair_.b = Endpoint::Create(peer(), config, &err, &error);
      if (pair_.a && pair_.b) {
        sges_ = n;
        break;
      }
    }
    ASSERT_TRUE(pair_.a && pair_.b) << "no QP with >= " << kMinSges << " SGEs could be created";
    ASSERT_EQ(Connect(*pair_.a, pair_.b->info()), 0);
    ASSERT_EQ(Connect(*pair_.b, pair_.a->info()), 0);
    if (type == IBV_QPT_UD) {
      CONFORMANCE_SETUP(MakeAh(&pair_.a_to_b, local(), pair_.b->info()));
    }
  }
  // SGE i has 1 + 7*i bytes (uneven, some not 8-byte aligned), spaced 8 bytes apart.
  std::vector<ibv_sge> Sges(const Buffer& buffer, size_t base, uint32_t count, size_t* total) const {
    std::vector<ibv_sge> out;
    size_t offset = base;
    *total = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const size_t length = 1 + 7 * i;
      out.push_back(Sge(buffer, offset, length));
      offset += length + 8;
      *total += length;
    }
    return out;
  }
  static void Fill(const std::vector<ibv_sge>& sges, uint8_t seed) {
    uint8_t value = seed;
    for (const ibv_sge& sge : sges)
      for (uint32_t i = 0; i < sge.length; ++i) reinterpret_cast<uint8_t*>(sge.addr)[i] = value++;
  }
  static std::vector<uint8_t> Gather(const std::vector<ibv_sge>& sges) {
    std::vector<uint8_t> out;
    for (const ibv_sge& sge : sges)
      out.insert(out.end(), reinterpret_cast<uint8_t*>(sge.addr), reinterpret_cast<uint8_t*>(sge.addr) + sge.length);
    return out;
  }

  uint32_t sges_ = 0;
  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

TEST_P(GatherScatter, SendGatherRecvScatter) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    SCOPED_TRACE(QpTypeName(type));
    pair_ = Pair();
    CONFORMANCE_SETUP(MakeSgePair(type));
    size_t send_total = 0, recv_total = 0;
    std::vector<ibv_sge> send = Sges(local_buf_, 0, sges_, &send_total);
    if (type == IBV_QPT_UD) {
      while (send_total > local().active_mtu_bytes()) {
        send_total -= send.back().length;
        send.pop_back();
      }
    }
    // The receive side scatters in reverse-sized pieces, so boundaries do not line up.
    std::vector<ibv_sge> recv;
    size_t offset = 0;
    if (type == IBV_QPT_UD) {
      recv.push_back(Sge(remote_buf_, 0, kGrhBytes));
      offset = 64;
    }
    for (uint32_t i = static_cast<uint32_t>(recv.size()); i < sges_; ++i) {
      const size_t length = 8 + 9 * (sges_ - i);
      recv.push_back(Sge(remote_buf_, offset, length));
      offset += length + 16;
      recv_total += length;
    }
    ASSERT_GE(recv_total, send_total);
    Fill(send, static_cast<uint8_t>(type));
    ASSERT_EQ(PostRecv(pair_.b->qp(), recv, 5), 0);
    SendSpec spec{.opcode = IBV_WR_SEND, .sges = send, .ah = pair_.a_to_b.get(),
                  .remote_qpn = pair_.b->qp()->qp_num};
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, spec, IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    const size_t skip = type == IBV_QPT_UD ? kGrhBytes : 0;
    EXPECT_EQ(wc.byte_len, send_total + skip);
    std::vector<uint8_t> got = Gather(std::vector<ibv_sge>(recv.begin() + (skip ? 1 : 0), recv.end()));
    got.resize(send_total);
    EXPECT_EQ(got, Gather(send));
  }
}

TEST_P(GatherScatter, WriteGather) {
  CONFORMANCE_SETUP(MakeSgePair(IBV_QPT_RC));
  size_t total = 0;
  std::vector<ibv_sge> sges = Sges(local_buf_, 0, sges_, &total);
  Fill(sges, 0x10);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = sges,
                                         .remote_addr = remote_buf_.addr() + 3, .rkey = remote_buf_.rkey()},
                                        IBV_WC_SUCCESS));
  std::vector<uint8_t> expected = Gather(sges);
  EXPECT_EQ(std::vector<uint8_t>(remote_buf_.data() + 3, remote_buf_.data() + 3 + total), expected);
  EXPECT_EQ(remote_buf_.data()[3 + total], 0) << "WRITE went past its gathered length";
}

TEST_P(GatherScatter, ReadScatter) {
  CONFORMANCE_SETUP(MakeSgePair(IBV_QPT_RC));
  size_t total = 0;
  std::vector<ibv_sge> sges = Sges(local_buf_, 0, sges_, &total);
  for (size_t i = 0; i < total; ++i) remote_buf_.data()[5 + i] = static_cast<uint8_t>(i * 13 + 7);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_RDMA_READ, .sges = sges,
                                         .remote_addr = remote_buf_.addr() + 5, .rkey = remote_buf_.rkey()},
                                        IBV_WC_SUCCESS));
  std::vector<uint8_t> got = Gather(sges);
  for (size_t i = 0; i < total; ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(i * 13 + 7)) << "byte " << i;
  // The 8-byte gaps between SGEs are untouched.
  EXPECT_EQ(local_buf_.data()[sges[0].length], 0);
}

TEST_P(GatherScatter, TooManySgesRefused) {
  CONFORMANCE_SETUP(MakeSgePair(IBV_QPT_RC));
  const uint32_t over = std::max(pair_.a->cap().max_send_sge, pair_.a->cap().max_recv_sge) + 1;
  size_t total = 0;
  std::vector<ibv_sge> sges = Sges(local_buf_, 0, over, &total);
  EXPECT_NE(PostSend(pair_.a->qp(), {.opcode = IBV_WR_RDMA_WRITE, .sges = sges, .remote_addr = remote_buf_.addr(),
                                     .rkey = remote_buf_.rkey()}),
            0)
      << over << " SGEs accepted with cap.max_send_sge " << pair_.a->cap().max_send_sge;
  EXPECT_NE(PostRecv(pair_.a->qp(), sges, 1), 0)
      << over << " SGEs accepted with cap.max_recv_sge " << pair_.a->cap().max_recv_sge;
  EXPECT_TRUE(StaysEmpty(pair_.a->send_cq()));
}

TEST_P(GatherScatter, ZeroLengthSend) {
  Pair pair;
  CONFORMANCE_SETUP(MakePair(&pair, {.type = IBV_QPT_RC}));
  ASSERT_EQ(PostRecv(pair.b->qp(), {Sge(remote_buf_, 0, 64)}, 3), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair.a, {.opcode = IBV_WR_SEND, .sges = {}}, IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.byte_len, 0u);
}

CONFORMANCE_INSTANTIATE(GatherScatter);

}  // namespace
}  // namespace conformance
