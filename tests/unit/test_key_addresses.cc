#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "benchmarks/bench/key_addresses.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

TEST(KeyAddresses, UnclusteredPlacementPermutesEverySlotOnce) {
  for (const std::uint64_t keys : {1ull, 2ull, 3ull, 1000ull, 1024ull, 1025ull, 65537ull}) {
    const KeyAddresses addresses({keys, false, 0.99, false, 7});
    std::vector<bool> taken(keys, false);
    std::uint64_t moved = 0;
    for (std::uint64_t rank = 0; rank < keys; ++rank) {
      const std::uint64_t slot = addresses.SlotOfRank(rank);
      ASSERT_LT(slot, keys) << "rank " << rank << " of " << keys;
      ASSERT_FALSE(taken[slot]) << "slot " << slot << " twice, keys " << keys;
      taken[slot] = true;
      moved += slot != rank;
    }
    if (keys >= 1000) {
      EXPECT_GT(moved, keys * 9 / 10) << keys;
    }
  }
}

TEST(KeyAddresses, ClusteredPlacementKeepsPopularityOrder) {
  const KeyAddresses addresses({1000, true, 0.99, true, 7});
  for (std::uint64_t rank = 0; rank < 1000; ++rank) EXPECT_EQ(addresses.SlotOfRank(rank), rank);
}

TEST(KeyAddresses, ZipfDrawsGiveTheHottestKeyItsShareAndStayInRange) {
  constexpr std::uint64_t kKeys = 10000, kDraws = 400000;
  KeyAddresses addresses = KeyAddresses({kKeys, true, 0.99, true, 3}).Stream(5);
  double zeta = 0;
  for (std::uint64_t rank = kKeys; rank >= 1; --rank) zeta += std::pow(static_cast<double>(rank), -0.99);
  EXPECT_NEAR(addresses.HottestKeyProbability(), 1 / zeta, 1e-12);
  std::vector<std::uint64_t> reads(kKeys, 0);
  for (std::uint64_t i = 0; i < kDraws; ++i) {
    const std::uint64_t slot = addresses.NextSlot();
    ASSERT_LT(slot, kKeys);
    ++reads[slot];
  }
  EXPECT_NEAR(static_cast<double>(reads[0]) / kDraws, 1 / zeta, 0.05 / zeta);
  EXPECT_NEAR(static_cast<double>(reads[1]) / kDraws, std::pow(2.0, -0.99) / zeta, 0.05 / zeta);
  EXPECT_GT(reads[0], reads[10] * 5);
}

TEST(KeyAddresses, StreamsDiffer) {
  const KeyAddresses base({1 << 20, false, 0.99, true, 1});
  KeyAddresses a = base.Stream(0), b = base.Stream(1);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += a.NextSlot() == b.NextSlot();
  EXPECT_LT(same, 3);
}

TEST(KeyAddresses, BadKeySpaceIsRejectedByName) {
  EXPECT_THROW(KeyAddresses({0, false, 0.99, true, 1}), Error);
  EXPECT_THROW(KeyAddresses({kMaxKeys + 1, false, 0.99, true, 1}), Error);
  EXPECT_THROW(KeyAddresses({10, true, 1.0, true, 1}), Error);
}

}  // namespace
}  // namespace rdmalab::bench
