// The READ-based systems' store layout (kv/remote/layout.cc) and verb accounting
// (verb_tally.cc), without a device: every key's places lie inside the store and apart;
// preloaded values check (FaRM full: where a client's neighbourhood READ finds them); the modeled PCIe bytes are the model's per-WR accounting times
// the verb counts.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "kv/core/options.h"
#include "kv/remote/crc64.h"
#include "kv/remote/cuckoo.h"
#include "kv/remote/hopscotch.h"
#include "kv/remote/remote.h"
#include "kv/workload/workload.h"
#include "model/wr_accounting.h"

namespace rdmalab::kv::remote {
namespace {

Options OptionsFor(const std::string& system) {
  Options o;
  o.system = system;
  o.keys = 1000;
  o.value_size = 40;
  o.window = 4;
  CheckRemote(o);
  return o;
}

TEST(KvRemoteLayout, EveryKeysValueIsInsideTheStoreAndChecksAfterPreload) {
  for (const char* system : {"pilaf", "farm", "farm-var", "drtm", "drtm-write", "hydradb"}) {
    const Options o = OptionsFor(system);
    const Layout layout = LayoutOf(o, 3);
    std::vector<std::uint8_t> store(layout.bytes);
    Preload(layout, store.data());
    std::set<std::uint64_t> places;
    for (std::uint64_t k = 0; k < layout.keys; ++k) {
      const std::uint64_t at = layout.ValueOffset(k);
      ASSERT_LE(at + layout.value_bytes, layout.bytes) << system;
      ASSERT_TRUE(places.insert(at).second) << system;
      ASSERT_EQ(CheckValue(k, store.data() + at, layout.value_bytes, layout.value_bytes), ValueCheck::kOk) << system;
    }
    if (layout.design == Design::kFarm || layout.design == Design::kFarmVar) {
      // The neighbourhood READ of the last key stays inside the entries.
      EXPECT_LE(layout.entries + (layout.keys - 1 + kNeighbourhood) * layout.entry_bytes,
                layout.design == Design::kFarmVar ? layout.values : layout.bytes) << system;
    }
    if (layout.ring_slots != 0) {
      EXPECT_GE(layout.SlotOffset(0, 0), layout.entries + layout.keys * layout.entry_bytes) << system;
      EXPECT_LE(layout.SlotOffset(2, layout.ring_slots - 1) + layout.slot_bytes, layout.bytes) << system;
    }
  }
}

TEST(KvRemoteLayout, FarmFullPreloadsEveryKeyWhereItsNeighbourhoodReadFindsIt) {
  for (const char* system : {"farm", "farm-var"}) {
    Options o = OptionsFor(system);
    o.store = "full";
    o.keys = 5000;
    CheckRemote(o);
    const Layout layout = LayoutOf(o, 2);
    std::vector<std::uint8_t> store(layout.bytes);
    Preload(layout, store.data());
    HopscotchTable table(store.data() + layout.entries, layout.bucket_count, layout.HopscotchPayloadBytes());
    PreloadTable(layout, store.data(), table);
    ASSERT_EQ(table.keys(), layout.keys) << system;
    const auto read = [&](std::uint64_t k) {
      const std::uint64_t at = layout.NeighbourhoodOffset(KeyHashOf(k));
      EXPECT_LE(at + kNeighbourhood * layout.entry_bytes, layout.values ? layout.values : layout.bytes) << system;
      return ScanNeighbourhood(store.data() + at, KeyHashOf(k), layout.HopscotchPayloadBytes());
    };
    // What a GET READs: the value in the bucket (FaRM), or behind its pointer (FaRM-VAR).
    const auto value_of = [&](const NeighbourhoodScan& scan) -> const std::uint8_t* {
      if (layout.design == Design::kFarm) return scan.payload;
      std::uint64_t extent = 0;
      std::memcpy(&extent, scan.payload, sizeof(extent));
      return ExtentChecks(store.data() + extent, layout.value_bytes) ? store.data() + extent : nullptr;
    };
    for (std::uint64_t k = 0; k < layout.keys; ++k) {
      const NeighbourhoodScan scan = read(k);
      ASSERT_EQ(scan.outcome, NeighbourhoodScan::kFound) << system << " key " << k;
      const std::uint8_t* value = value_of(scan);
      ASSERT_NE(value, nullptr) << system << " key " << k;
      ASSERT_EQ(CheckValue(k, value, layout.value_bytes, layout.value_bytes), ValueCheck::kOk) << system;
    }
    // --corrupt: even keys' values, odd keys' key bytes; no GET may trust them.
    Corrupt(layout, store.data(), 10);
    for (std::uint64_t k = 0; k < 10; ++k) {
      const NeighbourhoodScan scan = read(k);
      const bool caught = scan.outcome == NeighbourhoodScan::kTorn ||
                          (scan.outcome == NeighbourhoodScan::kFound && value_of(scan) == nullptr);
      EXPECT_TRUE(caught) << system << " key " << k;
    }
  }
}

TEST(KvRemoteLayout, LockWordsShareTheir12LowBitsOnlyWhenAsked) {
  Options o = OptionsFor("drtm");
  o.lock_placement = "same-bits";
  const Layout same = LayoutOf(o, 1);
  o.lock_placement = "spread";
  const Layout spread = LayoutOf(o, 1);
  EXPECT_EQ(same.LockOffset(1) % 4096, same.LockOffset(2) % 4096);
  EXPECT_NE(spread.LockOffset(1) % 4096, spread.LockOffset(2) % 4096);
  EXPECT_EQ(spread.LockOffset(0) % 8, 0u);
}

TEST(KvRemoteVerbs, PerOperationCountsAndModeledBytesFollowTheTally) {
  const Options o = OptionsFor("pilaf");
  const std::vector<VerbClass> classes = VerbClassesOf(o);
  VerbTally tally;
  tally.gets = 10;
  tally.puts = 0;
  tally.wrs[kPilafBucketRead] = 16;
  tally.wrs[kPilafValueRead] = 10;
  const auto json = VerbsJson(classes, tally);
  EXPECT_DOUBLE_EQ(json["per_get"]["client"]["RC READ"].get<double>(), 2.6);
  EXPECT_DOUBLE_EQ(json["verbs_per_op"].get<double>(), 2.6);
  // The server's NIC serves each READ: the model's responder accounting of one READ of each size.
  const model::DeviceModel device;
  double expected = 0;
  for (const auto& [bytes, count] : {std::pair{32u, 16}, std::pair{40u, 10}}) {
    model::WrShape wr;
    wr.op = model::Opcode::kRead;
    wr.transport = model::Transport::kRc;
    wr.payload_B = bytes;
    model::ModeledCounters responder;
    model::AccountResponderWr(device, wr, responder);
    expected += count * static_cast<double>(responder.pcie_mmio_bytes + responder.pcie_dma_cpl_bytes + responder.pcie_d2h_bytes);
  }
  EXPECT_NEAR(json["server_pcie_bytes_per_op"].get<double>(), expected / 10, 1e-9);
  EXPECT_GT(expected, 0);
}

TEST(KvRemoteCuckoo, Crc64IsEcma182AndEveryKeySitsInOneOfItsThreeBuckets) {
  const std::uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(Crc64(check, sizeof(check)), 0x6C40DF5F0B497347ull);  // CRC-64/ECMA-182's check value
  Options o = OptionsFor("pilaf");
  o.store = "full";
  o.keys = 20000;
  const Layout layout = LayoutOf(o, 1);
  std::vector<std::uint8_t> store(layout.bytes);
  Preload(layout, store.data());
  for (std::uint64_t k = 0; k < layout.keys; ++k) {
    int found = 0;
    std::set<std::uint64_t> candidates;  // two hash functions may name one bucket
    for (std::uint32_t h = 0; h < kCuckooHashes; ++h) candidates.insert(CuckooBucket(KeyHashOf(k), h, layout.bucket_count));
    for (const std::uint64_t index : candidates) {
      const std::uint8_t* b = store.data() + layout.buckets + index * 32;
      const CuckooBucketView view = ParseBucket(b);
      if (view.key == KeyHashOf(k)) {
        ++found;
        ASSERT_TRUE(view.checks);
        ASSERT_EQ(view.extent, layout.ValueOffset(k));
        ASSERT_TRUE(ExtentChecks(store.data() + view.extent, layout.value_bytes));
      }
    }
    ASSERT_EQ(found, 1) << k;
  }
  // A flipped byte fails the check.
  store[layout.ValueOffset(7) + 3] ^= 1;
  EXPECT_FALSE(ExtentChecks(store.data() + layout.ValueOffset(7), layout.value_bytes));
}

}  // namespace
}  // namespace rdmalab::kv::remote
