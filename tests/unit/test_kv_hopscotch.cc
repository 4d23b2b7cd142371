// FaRM full's hopscotch table (kv/remote/hopscotch.h) without a device: the server's inserts,
// displacements and updates, and the client's scan of a neighbourhood READ, over plain memory.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "kv/remote/crc64.h"
#include "kv/remote/hopscotch.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::remote {
namespace {

constexpr std::uint32_t kPayloadBytes = 32;
constexpr std::uint32_t kBucketBytes = HopscotchBucketBytes(kPayloadBytes);

// A table of `homes` home buckets in zeroed memory, and what a client's READ of a key's
// neighbourhood would return.
struct Table {
  explicit Table(std::uint64_t homes)
      : memory(HopscotchBuckets(homes) * kBucketBytes), table(memory.data(), homes, kPayloadBytes) {}
  std::vector<std::uint8_t> memory;
  HopscotchTable table;

  const std::uint8_t* Neighbourhood(const KeyHash& key) const {
    return memory.data() + HopscotchHome(key, table.homes()) * kBucketBytes;
  }
  NeighbourhoodScan Scan(const KeyHash& key) const { return ScanNeighbourhood(Neighbourhood(key), key, kPayloadBytes); }
  std::uint64_t At(const std::uint8_t* bucket) const {
    return static_cast<std::uint64_t>(bucket - memory.data()) / kBucketBytes;
  }
};

std::vector<std::uint8_t> PayloadOf(std::uint64_t k, std::uint8_t version) {
  std::vector<std::uint8_t> payload(kPayloadBytes);
  for (std::uint32_t i = 0; i < kPayloadBytes; ++i) payload[i] = static_cast<std::uint8_t>(k * 31 + i + version);
  return payload;
}

// Keys whose home is `home` in a table of `homes`, the first `count` of them by index.
std::vector<std::uint64_t> KeysHomedAt(std::uint64_t home, std::uint64_t homes, std::uint32_t count) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t k = 0; keys.size() < count; ++k) {
    if (HopscotchHome(KeyHashOf(k), homes) == home) keys.push_back(k);
  }
  return keys;
}

TEST(KvHopscotch, ZeroedMemoryIsAnEmptyTableOfSealedBuckets) {
  Table t(64);
  EXPECT_EQ(t.table.keys(), 0u);
  for (std::uint64_t at = 0; at < HopscotchBuckets(64); ++at) {
    ASSERT_TRUE(HopscotchBucketChecks(t.memory.data() + at * kBucketBytes, kPayloadBytes));
  }
  const NeighbourhoodScan scan = t.Scan(KeyHashOf(3));
  EXPECT_EQ(scan.outcome, NeighbourhoodScan::kAbsent);
  EXPECT_EQ(scan.home_version, 0u);
}

TEST(KvHopscotch, EveryInsertedKeyIsFoundWithinHOfItsHomeWithItsPayload) {
  constexpr std::uint64_t kKeys = 20000;
  Table t(kKeys * 5 / 2);  // load 0.4
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(t.table.Store(KeyHashOf(k), PayloadOf(k, 0).data()), HopscotchTable::Put::kStored) << k;
  }
  EXPECT_EQ(t.table.keys(), kKeys);
  EXPECT_GT(t.table.displacements(), 0u);  // at load 0.4 some inserts must displace
  EXPECT_GT(t.table.AwayFromHome(), 0u);
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    const KeyHash key = KeyHashOf(k);
    const std::uint8_t* bucket = t.table.Find(key);
    ASSERT_NE(bucket, nullptr) << k;
    ASSERT_LT(t.At(bucket) - HopscotchHome(key, t.table.homes()), kHopscotchNeighbourhood) << k;
    const NeighbourhoodScan scan = t.Scan(key);
    ASSERT_EQ(scan.outcome, NeighbourhoodScan::kFound) << k;
    ASSERT_EQ(std::memcmp(scan.payload, PayloadOf(k, 0).data(), kPayloadBytes), 0) << k;
  }
  EXPECT_EQ(t.Scan(KeyHashOf(kKeys + 1)).outcome, NeighbourhoodScan::kAbsent);
}

TEST(KvHopscotch, InsertDisplacesEntriesTowardTheEmptyBucketAndTheyAreStillFound) {
  // 6 keys homed at bucket 10 fill 10..15; 4 homed at 12 must go past 15: the empty bucket
  // found at 16+ is brought back by moving entries of home 12 that stay within 12..17.
  constexpr std::uint64_t kHomes = 64;
  Table t(kHomes);
  const std::vector<std::uint64_t> at12 = KeysHomedAt(12, kHomes, 3);
  const std::vector<std::uint64_t> at10 = KeysHomedAt(10, kHomes, 5);
  for (const std::uint64_t k : at12) ASSERT_EQ(t.table.Store(KeyHashOf(k), PayloadOf(k, 0).data()), HopscotchTable::Put::kStored);
  for (const std::uint64_t k : at10) ASSERT_EQ(t.table.Store(KeyHashOf(k), PayloadOf(k, 0).data()), HopscotchTable::Put::kStored);
  // Home 10's keys: 10, 11, then 15 (12..14 taken by home 12's); the 4th and 5th find their
  // empty bucket at 16 and 17, out of reach, and displace home 12's entries into it.
  EXPECT_GT(t.table.displacements(), 0u);
  for (const std::uint64_t k : at10) {
    const std::uint64_t at = t.At(t.table.Find(KeyHashOf(k)));
    EXPECT_GE(at, 10u);
    EXPECT_LT(at, 10u + kHopscotchNeighbourhood);
    EXPECT_EQ(t.Scan(KeyHashOf(k)).outcome, NeighbourhoodScan::kFound);
  }
  for (const std::uint64_t k : at12) {
    const std::uint64_t at = t.At(t.table.Find(KeyHashOf(k)));
    EXPECT_GE(at, 12u);
    EXPECT_LT(at, 12u + kHopscotchNeighbourhood);
    const NeighbourhoodScan scan = t.Scan(KeyHashOf(k));
    ASSERT_EQ(scan.outcome, NeighbourhoodScan::kFound);
    EXPECT_EQ(std::memcmp(scan.payload, PayloadOf(k, 0).data(), kPayloadBytes), 0);
  }
  EXPECT_EQ(t.table.displacements(), 2u);
  // Each move of a home-12 entry bumped home 12's version twice (odd while moving): even now.
  const NeighbourhoodScan absent = ScanNeighbourhood(t.memory.data() + 12 * kBucketBytes, KeyHashOf(1u << 30), kPayloadBytes);
  ASSERT_EQ(absent.outcome, NeighbourhoodScan::kAbsent);
  EXPECT_EQ(absent.home_version, 4u);
}

TEST(KvHopscotch, UpdateRewritesThePayloadInPlace) {
  Table t(1000);
  for (std::uint64_t k = 0; k < 300; ++k) t.table.Store(KeyHashOf(k), PayloadOf(k, 0).data());
  const std::uint8_t* before = t.table.Find(KeyHashOf(77));
  ASSERT_EQ(t.table.Store(KeyHashOf(77), PayloadOf(77, 9).data()), HopscotchTable::Put::kStored);
  EXPECT_EQ(t.table.Find(KeyHashOf(77)), before);
  EXPECT_EQ(t.table.keys(), 300u);
  const NeighbourhoodScan scan = t.Scan(KeyHashOf(77));
  ASSERT_EQ(scan.outcome, NeighbourhoodScan::kFound);
  EXPECT_EQ(std::memcmp(scan.payload, PayloadOf(77, 9).data(), kPayloadBytes), 0);
}

TEST(KvHopscotch, AFullNeighbourhoodRefusesTheKeyAndKeepsEveryOther) {
  // 7 keys of one home: the neighbourhood has 6 buckets, so the 7th has no place.
  constexpr std::uint64_t kHomes = 64;
  Table t(kHomes);
  const std::vector<std::uint64_t> keys = KeysHomedAt(20, kHomes, kHopscotchNeighbourhood + 1);
  for (std::uint32_t i = 0; i < kHopscotchNeighbourhood; ++i) {
    ASSERT_EQ(t.table.Store(KeyHashOf(keys[i]), PayloadOf(keys[i], 0).data()), HopscotchTable::Put::kStored);
  }
  EXPECT_EQ(t.table.Store(KeyHashOf(keys.back()), PayloadOf(keys.back(), 0).data()), HopscotchTable::Put::kFull);
  EXPECT_EQ(t.table.refused(), 1u);
  EXPECT_EQ(t.table.keys(), kHopscotchNeighbourhood);
  EXPECT_EQ(t.table.Find(KeyHashOf(keys.back())), nullptr);
  for (std::uint32_t i = 0; i < kHopscotchNeighbourhood; ++i) {
    EXPECT_EQ(t.Scan(KeyHashOf(keys[i])).outcome, NeighbourhoodScan::kFound);
  }
  // An update of a key already in place still succeeds.
  EXPECT_EQ(t.table.Store(KeyHashOf(keys[0]), PayloadOf(keys[0], 1).data()), HopscotchTable::Put::kStored);
}

TEST(KvHopscotch, ATornOrCorruptBucketIsNeverTrusted) {
  Table t(200);
  for (std::uint64_t k = 0; k < 50; ++k) t.table.Store(KeyHashOf(k), PayloadOf(k, 0).data());
  const KeyHash key = KeyHashOf(5);
  std::uint8_t* bucket = t.table.Find(key);
  // Half of a new payload over the old one, as a READ racing with an update may see.
  std::memcpy(bucket + sizeof(KeyHash), PayloadOf(5, 3).data(), kPayloadBytes / 2);
  EXPECT_EQ(t.Scan(key).outcome, NeighbourhoodScan::kTorn);
  t.table.Store(key, PayloadOf(5, 3).data());
  EXPECT_EQ(t.Scan(key).outcome, NeighbourhoodScan::kFound);
  // A flipped byte in another key's bucket of the neighbourhood: a miss cannot be trusted.
  const std::uint64_t home = HopscotchHome(key, t.table.homes());
  std::uint64_t absent = 1000;
  while (HopscotchHome(KeyHashOf(absent), t.table.homes()) != home) ++absent;
  bucket[3] ^= 0x5A;  // key 5's own key bytes: it is no longer found by its key
  EXPECT_EQ(t.Scan(key).outcome, NeighbourhoodScan::kTorn);
  EXPECT_EQ(t.Scan(KeyHashOf(absent)).outcome, NeighbourhoodScan::kTorn);
}

TEST(KvHopscotch, AMissWhileAnEntryOfTheHomeIsMovedIsNotTrusted) {
  // Mid-move (Move's first step made the home's version odd), a READ may see the moved entry
  // in neither bucket: a sealed neighbourhood without the key and an odd home version is torn.
  constexpr std::uint64_t kHomes = 64;
  Table t(kHomes);
  const std::vector<std::uint64_t> keys = KeysHomedAt(30, kHomes, 1);
  std::uint8_t* home = t.memory.data() + 30 * kBucketBytes;
  const std::uint32_t version_at = sizeof(KeyHash) + kPayloadBytes;
  const std::uint64_t odd = 3;
  std::memcpy(home + version_at, &odd, sizeof(odd));
  const std::uint64_t crc = Crc64(home, version_at + kHopscotchVersionBytes);
  std::memcpy(home + version_at + kHopscotchVersionBytes, &crc, sizeof(crc));
  ASSERT_TRUE(HopscotchBucketChecks(home, kPayloadBytes));
  EXPECT_EQ(t.Scan(KeyHashOf(keys[0])).outcome, NeighbourhoodScan::kTorn);
  // The home bucket READ alone gives its version, or an odd one when it was caught mid-write.
  EXPECT_EQ(HomeVersion(home, kPayloadBytes), odd);
  home[version_at] ^= 1;
  EXPECT_EQ(HomeVersion(home, kPayloadBytes), kTornVersion);
}

TEST(KvHopscotch, HOf6PlacesEveryKeyAtTheDefaultLoadOf0_2) {
  // The load factor's default (kv/core/options.h): at 0.2 no 5 consecutive homes draw more
  // keys than their 10 buckets hold; at 0.5 some keys find no place (no overflow chains).
  constexpr std::uint64_t kKeys = 1 << 18;
  for (const auto& [load, refused_at_least, refused_at_most] : {std::tuple{0.2, 0u, 0u}, std::tuple{0.5, 20u, 400u}}) {
    const std::uint64_t homes = static_cast<std::uint64_t>(static_cast<double>(kKeys) / load);
    std::vector<std::uint8_t> memory(HopscotchBuckets(homes) * HopscotchBucketBytes(0));
    HopscotchTable table(memory.data(), homes, 0);
    for (std::uint64_t k = 0; k < kKeys; ++k) table.Store(KeyHashOf(k), nullptr);
    EXPECT_GE(table.refused(), refused_at_least) << load;
    EXPECT_LE(table.refused(), refused_at_most) << load;
    EXPECT_EQ(table.keys() + table.refused(), kKeys);
  }
}

}  // namespace
}  // namespace rdmalab::kv::remote
