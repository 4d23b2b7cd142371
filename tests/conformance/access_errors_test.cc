// Spec error table, row "bad rkey / out of range / missing access flag", and dereg:
// RC requester gets IBV_WC_REM_ACCESS_ERR, its QP goes to ERR and later WRs flush;
// UC drops the write at the responder while the requester completes normally.
// A responder QP whose qp_access_flags (ibv_modify_qp) lack the operation's
// IBV_ACCESS_REMOTE_WRITE / _READ / _ATOMIC refuses it whatever the MR allows: RC NAKs
// it (rxe, hfi1 and qib answer IBV_WC_REM_INV_REQ_ERR; a NIC may answer
// IBV_WC_REM_ACCESS_ERR), UC drops a WRITE.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kRegionBytes = 4000;  // not a page multiple: the page tail is outside the MR
constexpr size_t kMessageBytes = 64;

class AccessErrors : public VerbsTest {
 protected:
  // `qp_access` is both QPs' qp_access_flags; the responder is pair_.b.
  void SetUpPair(ibv_qp_type type, unsigned remote_access, unsigned qp_access = ConnectConfig{}.access) {
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = type}, {.access = qp_access}));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), kRegionBytes, remote_access));
    std::memset(local_buf_.data(), 0xab, 4096);
    remote_rkey_ = remote_buf_.rkey();
  }
  SendSpec Write(uint64_t remote_addr, uint32_t rkey, size_t length = kMessageBytes, uint64_t wr_id = 1) {
    return {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, length)}, .wr_id = wr_id,
            .remote_addr = remote_addr, .rkey = rkey};
  }
  // The RC consequences: REM_ACCESS_ERR, QP in ERR, the next WR flushed.
  void ExpectRcAccessError(const SendSpec& spec) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, spec, IBV_WC_REM_ACCESS_ERR));
    EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR) << "requester QP must move to ERR";
    ASSERT_EQ(PostSend(pair_.a->qp(), Write(remote_buf_.addr(), remote_rkey_, 8, 2)), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_WR_FLUSH_ERR));
  }
  // The RC consequences of a responder QP that does not enable the operation: softnic
  // answers as rxe does; another provider may report the NAK as a remote access error.
  void ExpectRcQpRefusal(const SendSpec& spec) {
    ASSERT_EQ(PostSend(pair_.a->qp(), spec), 0);
    int poll_error = 0;
    std::optional<ibv_wc> wc = PollOne(pair_.a->send_cq(), kCompletionTimeoutMs, &poll_error);
    ASSERT_EQ(poll_error, 0);
    ASSERT_TRUE(wc.has_value()) << "no completion for " << OpcodeName(spec.opcode);
    if (local().softnic()) {
      EXPECT_WC_STATUS(*wc, IBV_WC_REM_INV_REQ_ERR);
    } else {
      EXPECT_TRUE(wc->status == IBV_WC_REM_INV_REQ_ERR || wc->status == IBV_WC_REM_ACCESS_ERR)
          << "got " << ibv_wc_status_str(wc->status) << ", expected a remote invalid request or access error";
    }
    EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_ERR) << "requester QP must move to ERR";
    ASSERT_EQ(PostSend(pair_.a->qp(), Write(remote_buf_.addr(), remote_rkey_, 8, 2)), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_WR_FLUSH_ERR));
  }
  // Moves the responder's qp_access_flags while it is in RTS.
  void SetResponderAccess(unsigned qp_access) {
    ibv_qp_attr attr{};
    attr.qp_access_flags = qp_access;
    ASSERT_EQ(ibv_modify_qp(pair_.b->qp(), &attr, IBV_QP_ACCESS_FLAGS), 0) << "RTS -> RTS with qp_access_flags";
  }
  // The UC consequences: success at the requester, nothing written, QP still usable.
  void ExpectUcDropped(const SendSpec& spec) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, spec, IBV_WC_SUCCESS));
    EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 8, 3),
                                          IBV_WC_SUCCESS));
    EXPECT_EQ(remote_buf_.data()[0], 0xab) << "a valid UC write after the dropped one must land";
  }
  bool RemoteUntouched(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (remote_buf_.data()[i] != 0) return false;
    return true;
  }

  Pair pair_;
  Buffer local_buf_, remote_buf_;
  uint32_t remote_rkey_ = 0;  // still known after remote_buf_ is deregistered
};

TEST_P(AccessErrors, RcBadRkeyWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  ExpectRcAccessError(Write(remote_buf_.addr(), remote_buf_.rkey() ^ 0x5a5a0001u));
}

TEST_P(AccessErrors, RcOutOfRangeWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  ExpectRcAccessError(Write(remote_buf_.addr() + kRegionBytes - 8, remote_buf_.rkey(), 16));
  EXPECT_TRUE(RemoteUntouched(kRegionBytes, 4096)) << "bytes past the region were written";
}

TEST_P(AccessErrors, RcWriteBelowRegion) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  ExpectRcAccessError(Write(remote_buf_.addr() - 8, remote_buf_.rkey(), 16));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes));
}

TEST_P(AccessErrors, RcOutOfRangeRead) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  ExpectRcAccessError({.opcode = IBV_WR_RDMA_READ, .sges = {Sge(local_buf_, 0, 16)}, .wr_id = 1,
                       .remote_addr = remote_buf_.addr() + kRegionBytes - 4, .rkey = remote_buf_.rkey()});
}

TEST_P(AccessErrors, RcWriteWithoutRemoteWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
  ExpectRcAccessError(Write(remote_buf_.addr(), remote_buf_.rkey()));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes));
}

TEST_P(AccessErrors, RcReadWithoutRemoteRead) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  ExpectRcAccessError({.opcode = IBV_WR_RDMA_READ, .sges = {Sge(local_buf_, 0, 16)}, .wr_id = 1,
                       .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()});
}

TEST_P(AccessErrors, RcAtomicWithoutRemoteAtomic) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  if (peer().attr().atomic_cap == IBV_ATOMIC_NONE) GTEST_SKIP() << "device has no atomics";
  ExpectRcAccessError({.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .sges = {Sge(local_buf_, 0, 8)}, .wr_id = 1,
                       .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey(), .compare_add = 1});
  EXPECT_TRUE(RemoteUntouched(0, 8));
}

TEST_P(AccessErrors, RcRkeyOfAnotherPd) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  PdPtr other_pd(ibv_alloc_pd(peer().ctx()));
  ASSERT_TRUE(other_pd != nullptr) << strerror(errno);
  std::string error;
  Buffer other = Buffer::Make(other_pd.get(), 4096, kAllRemoteAccess, &error);
  ASSERT_TRUE(static_cast<bool>(other)) << error;
  ExpectRcAccessError(Write(other.addr(), other.rkey()));
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_EQ(other.data()[i], 0) << "written through a foreign PD";
}

TEST_P(AccessErrors, UcBadRkeyWriteDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC, kAllRemoteAccess));
  ExpectUcDropped(Write(remote_buf_.addr(), remote_buf_.rkey() ^ 0x5a5a0001u));
}

TEST_P(AccessErrors, UcOutOfRangeWriteDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC, kAllRemoteAccess));
  const SendSpec spec = Write(remote_buf_.addr() + kRegionBytes - 8, remote_buf_.rkey(), 16);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, spec, IBV_WC_SUCCESS));
  EXPECT_TRUE(RemoteUntouched(kRegionBytes - 8, 4096)) << "UC write out of range must be dropped whole";
  ExpectUcDropped(Write(remote_buf_.addr(), remote_buf_.rkey() ^ 0x11u));
}

TEST_P(AccessErrors, UcWriteWithoutRemoteWriteDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey()), IBV_WC_SUCCESS));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes));
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
}

TEST_P(AccessErrors, RcWriteAfterDeregFails) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  const uint32_t rkey = remote_buf_.rkey();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), rkey), IBV_WC_SUCCESS));
  EXPECT_EQ(remote_buf_.data()[0], 0xab);
  std::memset(remote_buf_.data(), 0, kRegionBytes);
  remote_buf_.Deregister();
  ExpectRcAccessError(Write(remote_buf_.addr(), rkey));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes)) << "memory written through a deregistered rkey";
}

TEST_P(AccessErrors, RcReadAfterDeregFails) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  const uint32_t rkey = remote_buf_.rkey();
  remote_buf_.Deregister();
  ExpectRcAccessError({.opcode = IBV_WR_RDMA_READ, .sges = {Sge(local_buf_, 0, 16)}, .wr_id = 1,
                       .remote_addr = remote_buf_.addr(), .rkey = rkey});
}

// The MR allows everything; only the responder QP's qp_access_flags refuse.
constexpr unsigned kQpLocalOnly = IBV_ACCESS_LOCAL_WRITE;

TEST_P(AccessErrors, RcWriteToQpWithoutRemoteWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess, kQpLocalOnly));
  ExpectRcQpRefusal(Write(remote_buf_.addr(), remote_buf_.rkey()));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes)) << "written through a QP without IBV_ACCESS_REMOTE_WRITE";
}

TEST_P(AccessErrors, RcWriteWithImmToQpWithoutRemoteWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 8)}, 7), 0);
  SendSpec spec = Write(remote_buf_.addr() + 64, remote_buf_.rkey());
  spec.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  spec.imm_host = 0x1234;
  ExpectRcQpRefusal(spec);
  EXPECT_TRUE(RemoteUntouched(64, kRegionBytes));
  ibv_wc unexpected{};
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), kQuietTimeMs, &unexpected) ||
              unexpected.status == IBV_WC_WR_FLUSH_ERR)
      << "the refused WRITE_WITH_IMM consumed a RECV: " << Describe(unexpected);
}

TEST_P(AccessErrors, RcReadFromQpWithoutRemoteRead) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess, kQpLocalOnly));
  std::memset(remote_buf_.data(), 0x5c, kMessageBytes);
  std::memset(local_buf_.data(), 0, kMessageBytes);
  ExpectRcQpRefusal({.opcode = IBV_WR_RDMA_READ, .sges = {Sge(local_buf_, 0, kMessageBytes)}, .wr_id = 1,
                     .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey()});
  for (size_t i = 0; i < kMessageBytes; ++i) ASSERT_NE(local_buf_.data()[i], 0x5c) << "read through a QP without REMOTE_READ";
}

TEST_P(AccessErrors, RcAtomicOnQpWithoutRemoteAtomic) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess, kQpLocalOnly));
  if (peer().attr().atomic_cap == IBV_ATOMIC_NONE) GTEST_SKIP() << "device has no atomics";
  ExpectRcQpRefusal({.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .sges = {Sge(local_buf_, 0, 8)}, .wr_id = 1,
                     .remote_addr = remote_buf_.addr(), .rkey = remote_buf_.rkey(), .compare_add = 1});
  EXPECT_TRUE(RemoteUntouched(0, 8)) << "FETCH_AND_ADD through a QP without REMOTE_ATOMIC";
}

TEST_P(AccessErrors, RcWriteAfterResponderDropsRemoteWrite) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kAllRemoteAccess));
  // Several WRITEs first: whatever a provider caches about its peer is warm.
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 32, 10 + i),
                                          IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(SetResponderAccess(IBV_ACCESS_REMOTE_READ));
  std::memset(remote_buf_.data(), 0, kRegionBytes);
  ExpectRcQpRefusal(Write(remote_buf_.addr(), remote_buf_.rkey(), 32, 13));  // the warm WRITEs' shape
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes)) << "written after the responder dropped IBV_ACCESS_REMOTE_WRITE";
}

TEST_P(AccessErrors, UcWriteToQpWithoutRemoteWriteDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC, kAllRemoteAccess, kQpLocalOnly));
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 32, 10 + i),
                                          IBV_WC_SUCCESS));
  EXPECT_TRUE(RemoteUntouched(0, kRegionBytes)) << "UC write landed through a QP without IBV_ACCESS_REMOTE_WRITE";
  EXPECT_EQ(QueryState(pair_.a->qp()), IBV_QPS_RTS);
  ASSERT_NO_FATAL_FAILURE(SetResponderAccess(IBV_ACCESS_REMOTE_WRITE));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.addr(), remote_buf_.rkey(), 8, 20),
                                        IBV_WC_SUCCESS));
  EXPECT_EQ(remote_buf_.data()[0], 0xab) << "a UC write must land once the responder enables remote writes";
}

CONFORMANCE_INSTANTIATE(AccessErrors);

}  // namespace
}  // namespace conformance
