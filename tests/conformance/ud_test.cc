// UD: the 40-byte GRH area precedes the payload (byte_len counts it, IBV_WC_GRH when a GRH
// was carried, always on RoCE); SENDs above the path MTU are refused; src_qp identifies
// the sender.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 200;

class UdGrhMtu : public VerbsTest {
 protected:
  void SetUpUd(bool global) {
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_UD}, {.global = global}));
    CONFORMANCE_SETUP(MakeBuffer(&send_buf_, local(), 16384));
    CONFORMANCE_SETUP(MakeBuffer(&recv_buf_, peer(), 16384));
  }
  SendSpec Send(size_t length) {
    return {.opcode = IBV_WR_SEND, .sges = {Sge(send_buf_, 0, length)}, .wr_id = 8, .ah = pair_.a_to_b.get(),
            .remote_qpn = pair_.b->qp()->qp_num};
  }
  void SendAndCheck(bool global) {
    for (size_t i = 0; i < kMessageBytes; ++i) send_buf_.data()[i] = static_cast<uint8_t>(i + 1);
    ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, 0, kGrhBytes + kMessageBytes)}, 4), 0);
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(kMessageBytes), IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.byte_len, kGrhBytes + kMessageBytes) << "UD byte_len includes the 40-byte GRH";
    EXPECT_EQ(std::memcmp(recv_buf_.data() + kGrhBytes, send_buf_.data(), kMessageBytes), 0)
        << "payload must start after the 40-byte GRH";
    EXPECT_EQ(wc.src_qp, pair_.a->qp()->qp_num);
    EXPECT_EQ(wc.qp_num, pair_.b->qp()->qp_num);
    if (global || local().roce()) {
      EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH) << "a GRH was sent, IBV_WC_GRH must be set";
    }
    if (!local().roce()) {
      EXPECT_EQ(wc.slid, local().port().lid) << "slid is the sender's LID";
    }
  }
  Pair pair_;
  Buffer send_buf_, recv_buf_;
};

TEST_P(UdGrhMtu, GrhAreaPrecedesPayload) {
  CONFORMANCE_SETUP(SetUpUd(false));
  SendAndCheck(false);
}

// On IB without a global route no GRH travels: IBV_WC_GRH stays clear and the buffer's
// GRH area is left as it was posted (a NIC writes what arrived; HERD's client keeps that area
// on a line of its own so that a response is written into one line fewer).
TEST_P(UdGrhMtu, GrhAreaLeftAsPostedWithoutGrh) {
  if (local().roce()) GTEST_SKIP() << "RoCE carries a GRH in every packet";
  CONFORMANCE_SETUP(SetUpUd(false));
  std::memset(recv_buf_.data(), 0xA5, kGrhBytes);
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, 0, kGrhBytes + kMessageBytes)}, 4), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(kMessageBytes), IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.byte_len, kGrhBytes + kMessageBytes) << "byte_len counts the GRH area, written or not";
  EXPECT_FALSE(wc.wc_flags & IBV_WC_GRH) << "no GRH was sent";
  for (size_t i = 0; i < kGrhBytes; ++i) {
    ASSERT_EQ(recv_buf_.data()[i], 0xA5) << "GRH area byte " << i << " written though no GRH was sent";
  }
}

TEST_P(UdGrhMtu, GlobalRouteSetsWcGrh) {
  CONFORMANCE_SETUP(SetUpUd(true));
  SendAndCheck(true);
  if (!(pair_.a->device().gid().raw[10] == 0xff && pair_.a->device().gid().raw[11] == 0xff)) {
    // IB/RoCEv1-style GRH (not an IPv4-mapped RoCEv2 GID): the source GID is bytes 8..23.
    EXPECT_EQ(std::memcmp(recv_buf_.data() + 8, local().gid().raw, 16), 0) << "GRH SGID is the sender's GID";
  }
}

TEST_P(UdGrhMtu, SendAtPathMtuDelivered) {
  CONFORMANCE_SETUP(SetUpUd(false));
  const size_t mtu = std::min(local().active_mtu_bytes(), peer().active_mtu_bytes());
  std::memset(send_buf_.data(), 0x99, mtu);
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, 0, kGrhBytes + mtu)}, 4), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(mtu), IBV_WC_SUCCESS));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS, &wc));
  EXPECT_EQ(wc.byte_len, kGrhBytes + mtu);
  EXPECT_EQ(recv_buf_.data()[kGrhBytes + mtu - 1], 0x99);
}

TEST_P(UdGrhMtu, SendAbovePathMtuRefused) {
  CONFORMANCE_SETUP(SetUpUd(false));
  const size_t mtu = std::min(local().active_mtu_bytes(), peer().active_mtu_bytes());
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, 0, 16384)}, 4), 0);
  bool bad_is_wr = false;
  const int rc = PostSend(pair_.a->qp(), Send(mtu + 1), &bad_is_wr);
  if (rc == 0) {
    // Some hardware refuses at execution instead: an error completion, never a delivery.
    std::optional<ibv_wc> wc = PollOne(pair_.a->send_cq());
    ADD_FAILURE() << "UD SEND of " << mtu + 1 << " bytes (path MTU " << mtu << ") accepted by ibv_post_send; "
                  << (wc ? "completion: " + Describe(*wc) : std::string("no completion"));
  } else {
    EXPECT_TRUE(bad_is_wr);
    EXPECT_TRUE(StaysEmpty(pair_.a->send_cq()));
  }
  ibv_wc unexpected{};
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), kQuietTimeMs, &unexpected))
      << "oversized UD SEND was delivered: " << Describe(unexpected);
  // The QP remains usable.
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(64), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
}

TEST_P(UdGrhMtu, OneQpReachesTwoDestinations) {
  CONFORMANCE_SETUP(SetUpUd(false));
  std::unique_ptr<Endpoint> c;
  CONFORMANCE_SETUP(MakeEndpoint(&c, peer(), {.type = IBV_QPT_UD}));
  ASSERT_EQ(Connect(*c, {}), 0);
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, 0, 1024)}, 1), 0);
  ASSERT_EQ(PostRecv(c->qp(), {Sge(recv_buf_, 1024, 1024)}, 2), 0);
  send_buf_.data()[0] = 0xb0;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(16), IBV_WC_SUCCESS));
  SendSpec to_c = Send(16);
  to_c.remote_qpn = c->qp()->qp_num;
  send_buf_.data()[0] = 0xc0;
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, to_c, IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(c->recv_cq(), IBV_WC_SUCCESS));
  EXPECT_EQ(recv_buf_.data()[kGrhBytes], 0xb0);
  EXPECT_EQ(recv_buf_.data()[1024 + kGrhBytes], 0xc0);
}

CONFORMANCE_INSTANTIATE(UdGrhMtu);

}  // namespace
}  // namespace conformance
