// Unit tests of softnic's self-contained libibverbs exports (softnic/abi/): enum
// strings, rate conversions, fork status, kernel-struct copies, sysfs reads and the
// verbs softnic rejects. The binary links softnic's libibverbs.so.1, and the first test
// proves that this, not the system library, is what the calls reach; the distribution's
// library is loaded separately, in its own namespace, as the oracle for exact values.
#include <dlfcn.h>
#include <endian.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "softnic/abi/private_api.h"

namespace {

namespace fs = std::filesystem;

// Every value of each enum's range (C++ allows any value that fits the enum's bits):
// the enumerators plus some that are not, to cover the "unknown" answers.
constexpr int kNodeTypeFirst = IBV_NODE_UNKNOWN;
constexpr int kNodeTypeLast = 7;
constexpr int kPortStateLast = 7;
constexpr int kEventTypeLast = 31;
constexpr int kWcStatusLast = 31;
constexpr int kRateLast = 31;
static_assert(kNodeTypeLast >= IBV_NODE_UNSPECIFIED && kPortStateLast > IBV_PORT_ACTIVE_DEFER &&
              kEventTypeLast > IBV_EVENT_WQ_FATAL && kWcStatusLast > IBV_WC_TM_RNDV_INCOMPLETE &&
              kRateLast > IBV_RATE_1200_GBPS);

TEST(AbiHelpers, CallsReachSoftnicLibrary) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ibv_wc_status_str), &info), 0);
  EXPECT_EQ(fs::canonical(info.dli_fname), fs::canonical(SOFTNIC_LIBIBVERBS_PATH));
}

TEST(AbiHelpers, StatusStringsNameEnumerators) {
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded");
  EXPECT_STREQ(ibv_wc_status_str(static_cast<ibv_wc_status>(kWcStatusLast)), "unknown");
  EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(ibv_node_type_str(static_cast<ibv_node_type>(0)), "unknown");
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE), "port active");
}

TEST(AbiHelpers, RateConversionsRoundTrip) {
  for (int value = IBV_RATE_2_5_GBPS; value <= IBV_RATE_1200_GBPS; ++value) {
    const auto rate = static_cast<ibv_rate>(value);
    SCOPED_TRACE(value);
    const int mbps = ibv_rate_to_mbps(rate);
    ASSERT_GT(mbps, 0);
    EXPECT_EQ(mbps_to_ibv_rate(mbps), rate);
    const int mult = ibv_rate_to_mult(rate);
    if (mult != -1) {
      EXPECT_EQ(mult_to_ibv_rate(mult), rate);
    }
  }
  EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
  EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
  EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_100_GBPS), -1);  // no 2.5 Gb/s multiple defined
  EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_MAX), -1);
  EXPECT_EQ(mult_to_ibv_rate(0), IBV_RATE_MAX);
  EXPECT_EQ(mult_to_ibv_rate(3), IBV_RATE_MAX);
  EXPECT_EQ(mbps_to_ibv_rate(100000), IBV_RATE_MAX);
}

// The distribution's libibverbs in a separate link-map namespace, so that it neither
// replaces nor is replaced by softnic's library of the same soname.
class DistributionLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlmopen(LM_ID_NEWLM, RDMALAB_SYSTEM_LIBIBVERBS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      GTEST_SKIP() << "cannot load " << RDMALAB_SYSTEM_LIBIBVERBS_PATH << ": " << dlerror();
    }
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  template <typename Fn>
  Fn* lookup(const char* name) {
    void* symbol = dlsym(handle_, name);
    EXPECT_NE(symbol, nullptr) << name;
    return reinterpret_cast<Fn*>(symbol);
  }
  // Softnic's `ours` and the distribution's function of the same `name` give the same string
  // for every value first..last of the enum.
  template <typename Enum>
  void ExpectSameStrings(const char* (*ours)(Enum), const char* name, int first, int last) {
    auto* theirs = lookup<const char*(Enum)>(name);
    ASSERT_NE(theirs, nullptr);
    for (int v = first; v <= last; ++v) {
      EXPECT_STREQ(ours(static_cast<Enum>(v)), theirs(static_cast<Enum>(v))) << name << " " << v;
    }
  }
  void* handle_ = nullptr;
};

TEST_F(DistributionLibrary, SameStrings) {
  ExpectSameStrings(ibv_wc_status_str, "ibv_wc_status_str", 0, kWcStatusLast);
  ExpectSameStrings(ibv_port_state_str, "ibv_port_state_str", 0, kPortStateLast);
  ExpectSameStrings(ibv_node_type_str, "ibv_node_type_str", kNodeTypeFirst, kNodeTypeLast);
  ExpectSameStrings(ibv_event_type_str, "ibv_event_type_str", 0, kEventTypeLast);
}

TEST_F(DistributionLibrary, SameRates) {
  auto* to_mult = lookup<decltype(ibv_rate_to_mult)>("ibv_rate_to_mult");
  auto* to_mbps = lookup<decltype(ibv_rate_to_mbps)>("ibv_rate_to_mbps");
  auto* from_mult = lookup<decltype(mult_to_ibv_rate)>("mult_to_ibv_rate");
  auto* from_mbps = lookup<decltype(mbps_to_ibv_rate)>("mbps_to_ibv_rate");
  ASSERT_TRUE(to_mult && to_mbps && from_mult && from_mbps);
  for (int v = 0; v <= kRateLast; ++v) {
    const auto rate = static_cast<ibv_rate>(v);
    EXPECT_EQ(ibv_rate_to_mult(rate), to_mult(rate)) << v;
    EXPECT_EQ(ibv_rate_to_mbps(rate), to_mbps(rate)) << v;
    const int mult = to_mult(rate), mbps = to_mbps(rate);
    EXPECT_EQ(mult_to_ibv_rate(mult), from_mult(mult)) << v;
    EXPECT_EQ(mbps_to_ibv_rate(mbps), from_mbps(mbps)) << v;
  }
}

TEST(AbiHelpers, ForkNeedsNoPreparation) {
  EXPECT_EQ(ibv_fork_init(), 0);
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
  char buf[64];
  EXPECT_EQ(ibv_dontfork_range(buf, sizeof buf), 0);
  EXPECT_EQ(ibv_dofork_range(buf, sizeof buf), 0);
}

TEST(AbiHelpers, UnsupportedVerbsFailWithEopnotsupp) {
  errno = 0;
  EXPECT_EQ(ibv_import_device(0), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(nullptr, 1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(nullptr, 1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(nullptr, 1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(nullptr, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_ece ece{};
  EXPECT_EQ(ibv_query_ece(nullptr, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_set_ece(nullptr, &ece), EOPNOTSUPP);
}

TEST(AbiHelpers, PathRecordSurvivesKernelRoundTrip) {
  ibv_sa_path_rec original{};
  for (size_t i = 0; i < sizeof original.dgid.raw; ++i) {
    original.dgid.raw[i] = static_cast<uint8_t>(i + 1);
    original.sgid.raw[i] = static_cast<uint8_t>(0xf0 - i);
  }
  original.dlid = htobe16(0x1234);
  original.slid = htobe16(0x0042);
  original.flow_label = htobe32(0xabcde);
  original.hop_limit = 64;
  original.traffic_class = 3;
  original.reversible = 1;
  original.numb_path = 1;
  original.pkey = htobe16(0xffff);
  original.sl = 5;
  original.mtu = IBV_MTU_4096;
  original.rate = IBV_RATE_100_GBPS;
  original.packet_life_time = 18;
  original.preference = 2;

  ib_user_path_rec kernel{};
  ibv_copy_path_rec_to_kern(&kernel, &original);
  EXPECT_EQ(kernel.dlid, original.dlid);
  EXPECT_EQ(kernel.mtu, static_cast<uint32_t>(IBV_MTU_4096));
  EXPECT_EQ(std::memcmp(kernel.sgid, original.sgid.raw, sizeof kernel.sgid), 0);

  ibv_sa_path_rec copy{};
  ibv_copy_path_rec_from_kern(&copy, &kernel);
  EXPECT_EQ(std::memcmp(copy.dgid.raw, original.dgid.raw, sizeof copy.dgid.raw), 0);
  EXPECT_EQ(std::memcmp(copy.sgid.raw, original.sgid.raw, sizeof copy.sgid.raw), 0);
  EXPECT_EQ(copy.dlid, original.dlid);
  EXPECT_EQ(copy.slid, original.slid);
  EXPECT_EQ(copy.flow_label, original.flow_label);
  EXPECT_EQ(copy.pkey, original.pkey);
  EXPECT_EQ(copy.sl, original.sl);
  EXPECT_EQ(copy.mtu, original.mtu);
  EXPECT_EQ(copy.rate, original.rate);
  EXPECT_EQ(copy.packet_life_time, original.packet_life_time);
  EXPECT_EQ(copy.preference, original.preference);
}

TEST(AbiHelpers, QpAttrFromKernelCopiesBothAddressVectors) {
  ib_uverbs_qp_attr kernel{};
  kernel.qp_state = IBV_QPS_RTS;
  kernel.path_mtu = IBV_MTU_1024;
  kernel.dest_qp_num = 0x123456;
  kernel.max_inline_data = 256;
  kernel.ah_attr.dlid = 7;
  kernel.ah_attr.is_global = 1;
  kernel.ah_attr.grh.dgid[15] = 0x99;
  kernel.ah_attr.grh.hop_limit = 1;
  kernel.alt_ah_attr.dlid = 9;
  kernel.timeout = 14;
  kernel.rnr_retry = 7;

  ibv_qp_attr attr{};
  ibv_copy_qp_attr_from_kern(&attr, &kernel);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(attr.dest_qp_num, 0x123456u);
  EXPECT_EQ(attr.cap.max_inline_data, 256u);
  EXPECT_EQ(attr.ah_attr.dlid, 7);
  EXPECT_EQ(attr.ah_attr.is_global, 1);
  EXPECT_EQ(attr.ah_attr.grh.dgid.raw[15], 0x99);
  EXPECT_EQ(attr.ah_attr.grh.hop_limit, 1);
  EXPECT_EQ(attr.alt_ah_attr.dlid, 9);
  EXPECT_EQ(attr.timeout, 14);
  EXPECT_EQ(attr.rnr_retry, 7);
}

// ibv_get_sysfs_path decides once per process; this is the only test that asks, and
// ctest runs each test in its own process.
TEST(AbiHelpers, SysfsFilesReadFromSysfsPath) {
  const fs::path root = fs::temp_directory_path() / ("rdmalab-sysfs-" + std::to_string(getpid()));
  fs::create_directories(root / "class");
  std::ofstream(root / "class" / "abi_version") << "4\n";
  std::ofstream(root / "class" / "long") << "0123456789";
  ASSERT_EQ(setenv("SYSFS_PATH", (root.string() + "//").c_str(), 1), 0);

  EXPECT_EQ(std::string(ibv_get_sysfs_path()), root.string());
  char buf[8];
  EXPECT_EQ(ibv_read_sysfs_file(ibv_get_sysfs_path(), "class/abi_version", buf, sizeof buf), 1);
  EXPECT_STREQ(buf, "4");
  EXPECT_EQ(ibv_read_sysfs_file(ibv_get_sysfs_path(), "class/missing", buf, sizeof buf), -1);
  // Ten bytes cannot fit in eight with a terminator: an error, never a truncated value.
  EXPECT_EQ(ibv_read_sysfs_file(ibv_get_sysfs_path(), "class/long", buf, sizeof buf), -1);
  fs::remove_all(root);
}

}  // namespace
