// UD multicast (ibv_attach_mcast): a SEND to a group's address (remote QPN 0xFFFFFF) reaches
// every QP attached to the group, on any device, each through its own RECV and QKEY check,
// with the group's GID as the GRH's destination; a detached QP, or one whose QKEY differs,
// gets nothing; the sender completes once. Attaching takes a UD QP and a multicast GID
// (ff00::/8) and, on IB, a multicast LID (0xC000-0xFFFE), as the kernel checks; attaching
// twice is one membership, detaching a non-member is EINVAL.
#include <cstring>
#include <memory>
#include <vector>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint16_t kGroupLid = 0xc012;
constexpr uint32_t kMulticastQpn = 0xffffff;
constexpr size_t kMessageBytes = 64;
constexpr size_t kGrhDgidOffset = 24;

// A group's GID: on IB an IPoIB-style one (ff12:401b::/32); on RoCE an IPv4-mapped group
// (::ffff:239.64.27.x), which a RoCE v2 NIC routes by its IPv4 address and the kernel's CM forms
// for an IPv4 group.
ibv_gid GroupGid(uint8_t last, bool roce) {
  ibv_gid gid{};
  if (roce) {
    gid.raw[10] = gid.raw[11] = 0xff;
    gid.raw[12] = 239;
    gid.raw[13] = 64;
    gid.raw[14] = 27;
  } else {
    gid.raw[0] = 0xff;
    gid.raw[1] = 0x12;  // transient, link-local scope
    gid.raw[2] = 0x40;
    gid.raw[3] = 0x1b;
  }
  gid.raw[15] = last;
  return gid;
}

class Multicast : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    if (local().attr().max_mcast_grp == 0) GTEST_SKIP() << "the device reports no multicast groups";
    CONFORMANCE_SETUP(AddMember(&sender_, local()));
    CONFORMANCE_SETUP(MakeBuffer(&send_buf_, local(), 4096));
    for (size_t i = 0; i < kMessageBytes; ++i) send_buf_.data()[i] = static_cast<uint8_t>(0xa0 + i);
  }
  // A UD QP on `device`, ready to send and receive, with a buffer and one RECV posted.
  void AddMember(std::unique_ptr<Endpoint>* out, Device& device) {
    CONFORMANCE_SETUP(MakeEndpoint(out, device, {.type = IBV_QPT_UD}));
    ASSERT_EQ(Connect(**out, {}), 0);
    buffers_.emplace_back();
    CONFORMANCE_SETUP(MakeBuffer(&buffers_.back(), device, 4096));
    ASSERT_EQ(PostRecv((*out)->qp(), {Sge(buffers_.back(), 0, kGrhBytes + kMessageBytes)}, 7), 0);
  }
  ibv_gid Group(uint8_t last) { return GroupGid(last, local().roce()); }
  int Attach(const Endpoint& ep, const ibv_gid& gid) { return ibv_attach_mcast(ep.qp(), &gid, kGroupLid); }
  int Detach(const Endpoint& ep, const ibv_gid& gid) { return ibv_detach_mcast(ep.qp(), &gid, kGroupLid); }
  // Sends one message to the group, addressed by GID (global) or, on IB, by LID alone.
  void SendToGroup(const ibv_gid& gid, bool global, uint32_t qkey = kQkey) {
    ibv_ah_attr attr{};
    attr.dlid = kGroupLid;
    attr.port_num = local().port_num();
    attr.is_global = global || local().roce();
    attr.grh.dgid = gid;
    attr.grh.sgid_index = static_cast<uint8_t>(local().gid_index());
    attr.grh.hop_limit = 1;
    AhPtr ah(ibv_create_ah(local().pd(), &attr));
    ASSERT_TRUE(ah != nullptr) << "ibv_create_ah for a group: " << strerror(errno);
    ibv_send_wr wr{};
    ibv_sge sge = Sge(send_buf_, 0, kMessageBytes);
    wr.wr_id = 99;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah.get();
    wr.wr.ud.remote_qpn = kMulticastQpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(sender_->qp(), &wr, &bad), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(sender_->send_cq(), IBV_WC_SUCCESS));
  }
  // The member's one RECV completed with the message, from the sender, to `gid`.
  void ExpectDelivered(const Endpoint& member, const Buffer& buffer, const ibv_gid& gid, bool global) {
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(member.recv_cq(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.byte_len, kGrhBytes + kMessageBytes);
    EXPECT_EQ(wc.src_qp, sender_->qp()->qp_num);
    EXPECT_EQ(wc.qp_num, member.qp()->qp_num);
    EXPECT_EQ(std::memcmp(buffer.data() + kGrhBytes, send_buf_.data(), kMessageBytes), 0);
    if (global || local().roce()) {
      EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
      EXPECT_EQ(std::memcmp(buffer.data() + kGrhDgidOffset, gid.raw, sizeof(gid.raw)), 0)
          << "the GRH's destination is the group";
    }
  }
  void ExpectNothing(const Endpoint& member) {
    ibv_wc unexpected{};
    EXPECT_TRUE(StaysEmpty(member.recv_cq(), kQuietTimeMs, &unexpected)) << Describe(unexpected);
  }

  std::unique_ptr<Endpoint> sender_;
  Buffer send_buf_;
  std::vector<Buffer> buffers_;  // one per member, in AddMember order after the sender's
};

TEST_P(Multicast, SendReachesEveryAttachedQpOnEveryDevice) {
  const ibv_gid group = Group(1);
  std::unique_ptr<Endpoint> near, far_a, far_b, outsider;
  CONFORMANCE_SETUP(AddMember(&near, local()));
  CONFORMANCE_SETUP(AddMember(&far_a, peer()));
  CONFORMANCE_SETUP(AddMember(&far_b, peer()));
  CONFORMANCE_SETUP(AddMember(&outsider, peer()));
  for (const Endpoint* member : {near.get(), far_a.get(), far_b.get()}) ASSERT_EQ(Attach(*member, group), 0);
  for (bool global : {true, false}) {
    if (!global && local().roce()) continue;  // RoCE addresses groups by GID only
    ASSERT_NO_FATAL_FAILURE(SendToGroup(group, global));
    ExpectDelivered(*near, buffers_[1], group, global);
    ExpectDelivered(*far_a, buffers_[2], group, global);
    ExpectDelivered(*far_b, buffers_[3], group, global);
    ExpectNothing(*outsider);
    for (size_t i = 1; i <= 3; ++i) {
      const Endpoint* member = i == 1 ? near.get() : i == 2 ? far_a.get() : far_b.get();
      ASSERT_EQ(PostRecv(member->qp(), {Sge(buffers_[i], 0, kGrhBytes + kMessageBytes)}, 7), 0);
    }
  }
}

TEST_P(Multicast, DetachedQpAndOtherGroupsGetNothing) {
  const ibv_gid group = Group(2);
  const ibv_gid other = Group(3);
  std::unique_ptr<Endpoint> stays, leaves, elsewhere;
  CONFORMANCE_SETUP(AddMember(&stays, peer()));
  CONFORMANCE_SETUP(AddMember(&leaves, peer()));
  CONFORMANCE_SETUP(AddMember(&elsewhere, peer()));
  ASSERT_EQ(Attach(*stays, group), 0);
  ASSERT_EQ(Attach(*leaves, group), 0);
  ASSERT_EQ(Attach(*elsewhere, other), 0);
  ASSERT_EQ(Detach(*leaves, group), 0);
  ASSERT_NO_FATAL_FAILURE(SendToGroup(group, true));
  ExpectDelivered(*stays, buffers_[1], group, true);
  ExpectNothing(*leaves);
  ExpectNothing(*elsewhere);
}

TEST_P(Multicast, MemberWithAnotherQkeyGetsNothing) {
  const ibv_gid group = Group(4);
  std::unique_ptr<Endpoint> member;
  CONFORMANCE_SETUP(AddMember(&member, peer()));
  ASSERT_EQ(Attach(*member, group), 0);
  ASSERT_NO_FATAL_FAILURE(SendToGroup(group, true, kQkey + 1));
  ExpectNothing(*member);
}

TEST_P(Multicast, DestroyedMemberLeavesTheGroup) {
  const ibv_gid group = Group(5);
  std::unique_ptr<Endpoint> member;
  CONFORMANCE_SETUP(AddMember(&member, peer()));
  ASSERT_EQ(Attach(*member, group), 0);
  member->DestroyQp();
  ASSERT_NO_FATAL_FAILURE(SendToGroup(group, true));  // completes; nobody receives
}

TEST_P(Multicast, AttachAndDetachFollowTheKernelsRules) {
  const ibv_gid group = Group(6);
  std::unique_ptr<Endpoint> member, rc;
  CONFORMANCE_SETUP(AddMember(&member, peer()));
  CONFORMANCE_SETUP(MakeEndpoint(&rc, peer(), {.type = IBV_QPT_RC}));
  EXPECT_EQ(Attach(*rc, group), EINVAL) << "only UD QPs join groups";
  EXPECT_EQ(Attach(*member, peer().gid()), EINVAL) << "a unicast GID is no group";
  if (!peer().roce()) {
    EXPECT_EQ(ibv_attach_mcast(member->qp(), &group, peer().port().lid), EINVAL) << "a unicast LID on IB";
    EXPECT_EQ(ibv_attach_mcast(member->qp(), &group, 0xffff), EINVAL) << "the permissive LID";
  }
  EXPECT_EQ(Detach(*member, group), EINVAL) << "detach of a QP that is no member";
  ASSERT_EQ(Attach(*member, group), 0);
  EXPECT_EQ(Attach(*member, group), 0) << "attaching twice is one membership";
  EXPECT_EQ(Detach(*member, group), 0);
  EXPECT_EQ(Detach(*member, group), EINVAL) << "one detach ends the one membership";
}

CONFORMANCE_INSTANTIATE(Multicast);

}  // namespace
}  // namespace conformance
