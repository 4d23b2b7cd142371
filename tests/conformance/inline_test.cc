// Inline limits: a QP asking for more inline data than the device can do is not created;
// an inline post above the QP's cap fails with nothing posted and the QP stays usable.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint32_t kRequestedInlineBytes = 64;
constexpr uint32_t kAbsurdInlineBytes = 1u << 20;  // no device inlines 1 MiB into a WQE

class InlineLimits : public VerbsTest {};

TEST_P(InlineLimits, CreateAboveDeviceLimitFails) {
  int err = 0;
  std::string error;
  std::unique_ptr<Endpoint> ep =
      Endpoint::Create(local(), {.type = IBV_QPT_RC, .inline_bytes = kAbsurdInlineBytes}, &err, &error);
  EXPECT_EQ(ep, nullptr) << "ibv_create_qp accepted max_inline_data " << kAbsurdInlineBytes << " (cap returned "
                         << (ep ? ep->cap().max_inline_data : 0) << ")";
}

TEST_P(InlineLimits, SoftnicDefaultLimitIs256) {
  if (!local().softnic()) GTEST_SKIP() << "the 256-byte default is softnic's profile";
  int err = 0;
  std::string error;
  std::unique_ptr<Endpoint> ep = Endpoint::Create(local(), {.type = IBV_QPT_RC, .inline_bytes = 256}, &err, &error);
  ASSERT_NE(ep, nullptr) << error;
  EXPECT_GE(ep->cap().max_inline_data, 256u);
  ep = Endpoint::Create(local(), {.type = IBV_QPT_RC, .inline_bytes = 257}, &err, &error);
  EXPECT_EQ(ep, nullptr) << "max_inline_data 257 accepted above the 256-byte default";
}

TEST_P(InlineLimits, PostAboveCapFailsAndPostsNothing) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    SCOPED_TRACE(QpTypeName(type));
    Pair pair;
    CONFORMANCE_SETUP(MakePair(&pair, {.type = type, .inline_bytes = kRequestedInlineBytes}));
    const uint32_t cap = pair.a->cap().max_inline_data;
    ASSERT_GE(cap, kRequestedInlineBytes) << "cap.max_inline_data below the requested value";
    Buffer src, dst;
    CONFORMANCE_SETUP(MakeBuffer(&src, local(), 8192));
    CONFORMANCE_SETUP(MakeBuffer(&dst, peer(), 8192));
    const size_t offset = type == IBV_QPT_UD ? kGrhBytes : 0;
    ASSERT_EQ(PostRecv(pair.b->qp(), {Sge(dst, 0, 8192)}, 1), 0);
    std::memset(src.data(), 0x3c, 8192);
    auto spec = [&](size_t length) {
      SendSpec s{.opcode = IBV_WR_SEND, .sges = {Sge(src, 0, length)}, .flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
      s.ah = pair.a_to_b.get();
      s.remote_qpn = pair.b->qp()->qp_num;
      return s;
    };
    bool bad_is_wr = false;
    const int rc = PostSend(pair.a->qp(), spec(cap + 1), &bad_is_wr);
    EXPECT_NE(rc, 0) << "inline SEND of " << cap + 1 << " bytes accepted with cap.max_inline_data " << cap;
    if (rc != 0) {
      EXPECT_TRUE(bad_is_wr);
    }
    EXPECT_TRUE(StaysEmpty(pair.a->send_cq()));
    EXPECT_TRUE(StaysEmpty(pair.b->recv_cq()));
    // The QP is usable; an inline SEND at exactly the cap goes through, and the source
    // buffer may be reused as soon as ibv_post_send returns.
    const size_t length = std::min<size_t>(cap, type == IBV_QPT_UD ? local().active_mtu_bytes() : cap);
    ASSERT_EQ(PostSend(pair.a->qp(), spec(length)), 0);
    std::memset(src.data(), 0, 8192);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair.a->send_cq(), IBV_WC_SUCCESS));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair.b->recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.byte_len, length + offset);
    for (size_t i = 0; i < length; ++i) ASSERT_EQ(dst.data()[offset + i], 0x3c) << "inline byte " << i;
  }
}

TEST_P(InlineLimits, InlineWriteNeedsNoLkey) {
  Pair pair;
  CONFORMANCE_SETUP(MakePair(&pair, {.type = IBV_QPT_RC, .inline_bytes = kRequestedInlineBytes}));
  Buffer dst;
  CONFORMANCE_SETUP(MakeBuffer(&dst, peer(), 4096));
  uint8_t unregistered[kRequestedInlineBytes];
  std::memset(unregistered, 0x7e, sizeof(unregistered));
  ibv_sge sge{reinterpret_cast<uint64_t>(unregistered), kRequestedInlineBytes, 0};
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair.a,
                                        {.opcode = IBV_WR_RDMA_WRITE, .sges = {sge},
                                         .flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .remote_addr = dst.addr(),
                                         .rkey = dst.rkey()},
                                        IBV_WC_SUCCESS));
  for (size_t i = 0; i < kRequestedInlineBytes; ++i) ASSERT_EQ(dst.data()[i], 0x7e);
}

CONFORMANCE_INSTANTIATE(InlineLimits);

}  // namespace
}  // namespace conformance
