// Query verbs: ibv_query_device_ex agrees with ibv_query_device; ibv_query_gid_ex and
// ibv_query_gid_table agree with ibv_query_gid; softnic reports its documented profile.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kGidTableEntries = 64;

class QueryEx : public VerbsTest {};

TEST_P(QueryEx, DeviceExMatchesDevice) {
  ibv_device_attr_ex ex{};
  const int rc = ibv_query_device_ex(local().ctx(), nullptr, &ex);
  SKIP_IF_UNSUPPORTED(rc, "ibv_query_device_ex");
  ASSERT_EQ(rc, 0) << strerror(rc);
  const ibv_device_attr& attr = local().attr();
  EXPECT_EQ(ex.orig_attr.max_qp_wr, attr.max_qp_wr);
  EXPECT_EQ(ex.orig_attr.max_sge, attr.max_sge);
  EXPECT_EQ(ex.orig_attr.max_cqe, attr.max_cqe);
  EXPECT_EQ(ex.orig_attr.max_qp_rd_atom, attr.max_qp_rd_atom);
  EXPECT_EQ(ex.orig_attr.atomic_cap, attr.atomic_cap);
  EXPECT_EQ(ex.orig_attr.node_guid, attr.node_guid);
  EXPECT_EQ(ex.orig_attr.phys_port_cnt, attr.phys_port_cnt);
  EXPECT_STREQ(ex.orig_attr.fw_ver, attr.fw_ver);
  EXPECT_GE(attr.phys_port_cnt, 1);
  EXPECT_EQ(ex.phys_port_cnt_ex, static_cast<uint32_t>(attr.phys_port_cnt)) << "phys_port_cnt_ex";
  EXPECT_EQ(ex.orig_attr.vendor_id, attr.vendor_id);
  EXPECT_NE(attr.vendor_id, 0u) << "every provider reports an IEEE vendor id (rxe 0xffffff, mlx5 0x2c9)";
}

TEST_P(QueryEx, GidExMatchesGid) {
  ibv_gid_entry entry{};
  const int rc = ibv_query_gid_ex(local().ctx(), 1, local().gid_index(), &entry, 0);
  SKIP_IF_UNSUPPORTED(rc, "ibv_query_gid_ex");
  ASSERT_EQ(rc, 0) << strerror(rc);
  EXPECT_EQ(std::memcmp(entry.gid.raw, local().gid().raw, 16), 0);
  EXPECT_EQ(entry.gid_index, static_cast<uint32_t>(local().gid_index()));
  EXPECT_EQ(entry.port_num, 1u);
  if (local().roce()) {
    EXPECT_TRUE(entry.gid_type == IBV_GID_TYPE_ROCE_V1 || entry.gid_type == IBV_GID_TYPE_ROCE_V2)
        << "gid_type " << entry.gid_type << " on an Ethernet link";
  } else {
    EXPECT_EQ(entry.gid_type, IBV_GID_TYPE_IB);
  }
}

TEST_P(QueryEx, GidTableHoldsTheGid) {
  ibv_gid_entry entries[kGidTableEntries]{};
  const ssize_t n = ibv_query_gid_table(local().ctx(), entries, kGidTableEntries, 0);
  if (n < 0) {
    SKIP_IF_UNSUPPORTED(static_cast<int>(-n), "ibv_query_gid_table");
  }
  ASSERT_GE(n, 1) << "ibv_query_gid_table: " << (n < 0 ? strerror(static_cast<int>(-n)) : "no entries");
  bool found = false;
  for (ssize_t i = 0; i < n; ++i) {
    if (entries[i].port_num == 1 && entries[i].gid_index == static_cast<uint32_t>(local().gid_index())) {
      found = true;
      EXPECT_EQ(std::memcmp(entries[i].gid.raw, local().gid().raw, 16), 0);
    }
  }
  EXPECT_TRUE(found) << "GID index " << local().gid_index() << " of port 1 missing from the table";
}

TEST_P(QueryEx, PortAddressingMatchesLinkLayer) {
  const ibv_port_attr& port = local().port();
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  if (port.link_layer == IBV_LINK_LAYER_INFINIBAND) {
    EXPECT_NE(port.lid, 0) << "an IB port needs a LID";
  } else {
    EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  }
  uint16_t pkey = 0;
  ASSERT_EQ(ibv_query_pkey(local().ctx(), 1, 0, &pkey), 0);
  EXPECT_EQ(pkey & 0x7fff, 0x7fff) << "pkey index 0 is the default partition";
}

TEST_P(QueryEx, SoftnicProfile) {
  if (!local().softnic()) GTEST_SKIP() << "softnic's documented profile";
  const ibv_device_attr& attr = local().attr();
  EXPECT_GE(attr.max_sge, 30);
  EXPECT_EQ(attr.max_qp_rd_atom, 16);
  EXPECT_EQ(attr.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_NE(attr.node_guid, 0u);
  EXPECT_EQ(local().port().active_mtu, IBV_MTU_4096);
  const char* link = std::getenv("SOFTNIC_LINK");
  if (link != nullptr && std::string(link) == "roce") {
    EXPECT_EQ(local().port().link_layer, IBV_LINK_LAYER_ETHERNET) << "SOFTNIC_LINK=roce";
  } else {
    EXPECT_EQ(local().port().link_layer, IBV_LINK_LAYER_INFINIBAND);
  }
  EXPECT_NE(local().attr().node_guid, peer().attr().node_guid) << "two devices share a node GUID";
}

CONFORMANCE_INSTANTIATE(QueryEx);

}  // namespace
}  // namespace conformance
