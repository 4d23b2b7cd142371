// kv/cache/mica.h: hits after PUT, both kinds of loss (log wrap, lossy bucket), the
// pipeline's split GET, and a long randomized run against a map that knows every PUT.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/cache/mica.h"
#include "kv/workload/keyhash.h"
#include "kv/workload/workload.h"
#include "tests/unit/kv_check_message.h"

namespace rdmalab::kv {
namespace {

MicaConfig SmallConfig(std::uint32_t bucket_count_log2, std::uint64_t log_bytes) {
  MicaConfig config;
  config.bucket_count_log2 = bucket_count_log2;
  config.log_bytes = log_bytes;
  config.prefault = false;
  return config;
}

std::vector<std::uint8_t> ValueOf(std::uint64_t key_index, std::uint32_t version, std::uint32_t bytes) {
  std::vector<std::uint8_t> value(bytes);
  FillValue(key_index, 0, version, value.data(), bytes);
  return value;
}

bool Put(MicaCache& cache, std::uint64_t key_index, const std::vector<std::uint8_t>& value) {
  return cache.Put(KeyHashOf(key_index), value.data(), static_cast<std::uint32_t>(value.size()));
}

// The value a GET returns, or nothing on a miss.
std::vector<std::uint8_t> Lookup(const MicaCache& cache, std::uint64_t key_index) {
  const std::uint8_t* value = nullptr;
  std::uint32_t bytes = 0;
  if (!cache.Get(KeyHashOf(key_index), &value, &bytes)) return {};
  return std::vector<std::uint8_t>(value, value + bytes);
}

bool Hits(const MicaCache& cache, std::uint64_t key_index) {
  const std::uint8_t* value = nullptr;
  std::uint32_t bytes = 0;
  return cache.Get(KeyHashOf(key_index), &value, &bytes);
}

TEST(MicaCache, GetAfterPut) {
  MicaCache cache(SmallConfig(12, 1 << 20));
  for (std::uint64_t key = 0; key < 1000; ++key) ASSERT_TRUE(Put(cache, key, ValueOf(key, 1, 32)));
  for (std::uint64_t key = 0; key < 1000; ++key) EXPECT_EQ(Lookup(cache, key), ValueOf(key, 1, 32)) << key;
  EXPECT_FALSE(Hits(cache, 1000));
  EXPECT_EQ(cache.stats().puts, 1000u);
  EXPECT_EQ(cache.stats().gets, 1001u);
  EXPECT_EQ(cache.stats().get_hits, 1000u);
}

TEST(MicaCache, OverwriteReturnsNewest) {
  MicaCache cache(SmallConfig(12, 1 << 20));
  const std::uint32_t sizes[] = {32, 7, 1000, 12};
  for (std::uint32_t version = 0; version < 4; ++version) {
    ASSERT_TRUE(Put(cache, 5, ValueOf(5, version, sizes[version])));
    EXPECT_EQ(Lookup(cache, 5), ValueOf(5, version, sizes[version]));
  }
  EXPECT_EQ(StampOf(Lookup(cache, 5).data(), 12).version, 3u);
  EXPECT_EQ(cache.stats().index_evictions, 0u);
}

TEST(MicaCache, FifoEvictionByLogWrap) {
  // An index far larger than the key count, so that only the log's wrap loses keys.
  constexpr std::uint64_t kLogBytes = 64 << 10;
  constexpr std::uint32_t kValueBytes = 100;  // 120-byte entries: 546 fit in the log
  constexpr std::uint64_t kKeys = 2000;
  MicaCache cache(SmallConfig(16, kLogBytes));
  for (std::uint64_t key = 0; key < kKeys; ++key) ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, kValueBytes)));
  std::uint64_t first_hit = kKeys;
  for (std::uint64_t key = 0; key < kKeys; ++key) {
    const auto value = Lookup(cache, key);
    if (value.empty()) {
      EXPECT_EQ(first_hit, kKeys) << "key " << key << " missed after a newer key " << first_hit << " hit";
      continue;
    }
    if (first_hit == kKeys) first_hit = key;
    EXPECT_EQ(value, ValueOf(key, 0, kValueBytes)) << key;
  }
  // A lap holds 546 entries and a 16-byte pad, so every window of the log holds 546.
  EXPECT_EQ(kKeys - first_hit, kLogBytes / 120);
  EXPECT_EQ(cache.stats().index_evictions, 0u);
}

TEST(MicaCache, WrapKeepsEveryEntryWhole) {
  // A 4 KiB log: the newest entries a lap holds survive (the pad at each wrap fills the
  // rest of a lap; an entry is the 16-byte key and the value, padded to 8 bytes), every one
  // readable whole, the one before them gone.
  struct Case {
    std::uint32_t value_bytes, survivors;
  };
  for (const Case c : {Case{1000, 4096 / 1016}, Case{900, 4096 / 920}, Case{600, 4096 / 616},
                       Case{1, 4096 / 24}, Case{32, 4096 / 48}}) {
    MicaCache cache(SmallConfig(10, 4096));
    const std::uint64_t survivors = c.survivors;
    for (std::uint64_t key = 0; key < 3 * survivors + 5; ++key) {
      ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, c.value_bytes)));
      for (std::uint64_t back = 0; back < survivors && back <= key; ++back) {
        EXPECT_EQ(Lookup(cache, key - back), ValueOf(key - back, 0, c.value_bytes))
            << c.value_bytes << "-byte values, key " << key - back << " after key " << key;
      }
      if (key >= survivors) {
        EXPECT_FALSE(Hits(cache, key - survivors)) << c.value_bytes << "-byte values, key " << key;
      }
    }
  }
}

TEST(MicaCache, EntriesArePackedWithTheLengthInTheKeysTagBits) {
  // A 32-byte value's entry is 48 bytes (no length field: it rides in the key's tag bits),
  // so PUTs append 0.75 cache lines each; every length reads back as written.
  MicaCache cache(SmallConfig(12, 1 << 20));
  const std::uint8_t* previous = nullptr;
  for (std::uint64_t key = 0; key < 64; ++key) {
    ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, 32)));
    const std::uint8_t* value = nullptr;
    std::uint32_t length = 0;
    ASSERT_TRUE(cache.Get(KeyHashOf(key), &value, &length));
    EXPECT_EQ(length, 32u);
    if (previous != nullptr) {
      EXPECT_EQ(value - previous, 48) << key;
    }
    previous = value;
  }
  for (std::uint32_t bytes = 0; bytes <= kMaxValueBytes; ++bytes) {
    const std::uint64_t key = 1000 + bytes;
    ASSERT_TRUE(Put(cache, key, ValueOf(key, 1, bytes)));
    EXPECT_EQ(Lookup(cache, key), ValueOf(key, 1, bytes)) << bytes;
  }
}

TEST(MicaCache, KeysWhoseTagBitsAre0And1AreTwoKeys) {
  // Both take slot tag 1, and their entries hold neither's tag bits: the entry's tag-zero
  // bit tells them apart, so neither reads the other's value.
  MicaCache cache(SmallConfig(10, 1 << 16));
  const KeyHash zero{0x0000123456789abcull, 0x0123456789abcdefull};
  const KeyHash one{zero.lo | std::uint64_t{1} << MicaCache::kTagShift, zero.hi};
  const std::vector<std::uint8_t> a(32, 0xa), b(32, 0xb);
  const std::uint8_t* value = nullptr;
  std::uint32_t length = 0;
  ASSERT_TRUE(cache.Put(zero, a.data(), 32));
  EXPECT_FALSE(cache.Get(one, &value, &length));
  ASSERT_TRUE(cache.Get(zero, &value, &length));
  EXPECT_EQ(std::vector<std::uint8_t>(value, value + length), a);
  ASSERT_TRUE(cache.Put(one, b.data(), 32));  // takes the slot of the same tag
  EXPECT_FALSE(cache.Get(zero, &value, &length));
  ASSERT_TRUE(cache.Get(one, &value, &length));
  EXPECT_EQ(std::vector<std::uint8_t>(value, value + length), b);
}

TEST(MicaCache, LossyIndexKeepsTheNewestEight) {
  // One bucket: every key competes for its 8 slots.
  MicaCache cache(SmallConfig(0, 1 << 20));
  std::vector<std::uint64_t> keys;
  std::vector<std::uint64_t> tags;
  for (std::uint64_t key = 0; keys.size() < 20; ++key) {
    const std::uint64_t tag = KeyHashOf(key).lo >> MicaCache::kTagShift;
    if (std::find(tags.begin(), tags.end(), tag) != tags.end() || tag == 0) continue;
    tags.push_back(tag);
    keys.push_back(key);
  }
  for (const std::uint64_t key : keys) ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, 32)));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto value = Lookup(cache, keys[i]);
    if (i + MicaCache::kSlotsPerBucket >= keys.size()) {
      EXPECT_EQ(value, ValueOf(keys[i], 0, 32)) << "one of the newest 8 missed: " << keys[i];
    } else {
      EXPECT_TRUE(value.empty()) << "an evicted key hit: " << keys[i];
    }
  }
  EXPECT_EQ(cache.stats().index_evictions, keys.size() - MicaCache::kSlotsPerBucket);
}

TEST(MicaCache, TagCollisionIsAMissNotAnotherKeysValue) {
  MicaCache cache(SmallConfig(0, 1 << 20));
  std::unordered_map<std::uint64_t, std::uint64_t> key_of_tag;
  std::uint64_t first = 0, second = 0;
  for (std::uint64_t key = 0;; ++key) {
    const auto [entry, inserted] = key_of_tag.try_emplace(KeyHashOf(key).lo >> MicaCache::kTagShift, key);
    if (!inserted) {
      first = entry->second;
      second = key;
      break;
    }
  }
  ASSERT_TRUE(Put(cache, first, ValueOf(first, 0, 32)));
  ASSERT_TRUE(Put(cache, second, ValueOf(second, 0, 32)));
  EXPECT_FALSE(Hits(cache, first)) << "the tag matched, the key did not";
  EXPECT_EQ(Lookup(cache, second), ValueOf(second, 0, 32));
}

TEST(MicaCache, ValueSizeLimits) {
  MicaCache cache(SmallConfig(10, 1 << 20));
  EXPECT_TRUE(Put(cache, 1, ValueOf(1, 0, 1)));
  EXPECT_TRUE(Put(cache, 2, ValueOf(2, 0, kMaxValueBytes)));
  EXPECT_EQ(Lookup(cache, 1), ValueOf(1, 0, 1));
  EXPECT_EQ(Lookup(cache, 2), ValueOf(2, 0, kMaxValueBytes));
  const std::vector<std::uint8_t> too_long(kMaxValueBytes + 1, 0xab);
  EXPECT_FALSE(Put(cache, 2, too_long));
  EXPECT_FALSE(cache.Put(KeyHashOf(3), too_long.data(), 0xFFFFFFFF));
  EXPECT_EQ(cache.stats().put_refused, 2u);
  EXPECT_EQ(Lookup(cache, 2), ValueOf(2, 0, kMaxValueBytes)) << "a refused PUT left the old value";
  EXPECT_FALSE(Hits(cache, 3));
}

TEST(MicaCache, PipelinedReadSeesAPutThatWroteOverTheEntry) {
  MicaCache cache(SmallConfig(4, 4096));
  ASSERT_TRUE(Put(cache, 1, ValueOf(1, 0, 100)));
  const LogRef ref = cache.FindAndPrefetch(KeyHashOf(1));
  ASSERT_NE(ref.offset, kNoEntry);
  for (std::uint64_t key = 2; key < 40; ++key) ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, 100)));
  const std::uint8_t* value = nullptr;
  std::uint32_t bytes = 0;
  EXPECT_FALSE(cache.Read(ref, KeyHashOf(1), &value, &bytes));
  EXPECT_FALSE(cache.Read(LogRef{}, KeyHashOf(1), &value, &bytes));
  const LogRef fresh = cache.FindAndPrefetch(KeyHashOf(39));
  EXPECT_FALSE(cache.Read(fresh, KeyHashOf(38), &value, &bytes)) << "a ref read with another key";
  ASSERT_TRUE(cache.Read(fresh, KeyHashOf(39), &value, &bytes));
  EXPECT_EQ(std::vector<std::uint8_t>(value, value + bytes), ValueOf(39, 0, 100));
  EXPECT_GE(value, cache.log_memory());
  EXPECT_LE(value + bytes, cache.log_memory() + cache.config().log_bytes) << "values are read in place";
}

TEST(MicaCache, AnEntryImageInsideANewerValueIsNotAHit) {
  // Clients PUT arbitrary bytes: after a wrap, a newer value may hold an exact image of an
  // older entry at the old entry's position. Only the log window, not the key compare,
  // tells it from the real entry.
  constexpr std::uint64_t kLogBytes = 4096;
  MicaCache cache(SmallConfig(10, kLogBytes));
  ASSERT_TRUE(Put(cache, 100, std::vector<std::uint8_t>(46, 0)));  // entry [0, 64)
  ASSERT_TRUE(Put(cache, 1, ValueOf(1, 1, 32)));                   // the victim: [64, 112)
  // 24-byte entries (8-byte values) up to the log's end: the next entry wraps.
  for (std::uint64_t i = 0; i < (kLogBytes - 112) / 24; ++i) ASSERT_TRUE(Put(cache, 200 + i, ValueOf(200 + i, 0, 8)));
  ASSERT_TRUE(Hits(cache, 100) && Hits(cache, 1)) << "the lap is not full yet";
  // The first entry of the new lap, at 0; its value starts at 16 and covers the victim's 64.
  std::vector<std::uint8_t> forged(200, 0);
  const KeyHash victim = KeyHashOf(1);
  // The victim's key as its entry stores it: the length (32) in the tag bits.
  const KeyHash image{(victim.lo & MicaCache::kOffsetMask) | std::uint64_t{32} << MicaCache::kTagShift |
                          ((victim.lo >> MicaCache::kTagShift) == 0 ? MicaCache::kTagZeroBit : 0),
                      victim.hi};
  const auto stale_value = ValueOf(1, 0, 32);
  constexpr std::size_t kImageAt = 64 - 16;
  std::memcpy(forged.data() + kImageAt, &image, sizeof image);
  std::memcpy(forged.data() + kImageAt + 16, stale_value.data(), stale_value.size());
  ASSERT_TRUE(Put(cache, 400, forged));
  ASSERT_EQ(Lookup(cache, 400), forged);
  EXPECT_FALSE(Hits(cache, 1)) << "key 1's stale slot read a forged entry inside key 400's value";
}

TEST(MicaCache, PutOfAValueFromItsOwnLog) {
  MicaCache cache(SmallConfig(4, 4096));
  for (std::uint64_t key = 0; key < 3; ++key) ASSERT_TRUE(Put(cache, key, ValueOf(key, 0, 1000)));
  const std::uint8_t* value = nullptr;
  std::uint32_t bytes = 0;
  ASSERT_TRUE(cache.Get(KeyHashOf(0), &value, &bytes));  // the entry the next append overlaps
  ASSERT_TRUE(cache.Put(KeyHashOf(7), value, bytes));
  EXPECT_EQ(Lookup(cache, 7), ValueOf(0, 0, 1000));
}

TEST(MicaCache, RandomizedAgainstAModel) {
  // 16 Ki keys in 8 Ki slots and a 1 MiB log: both kinds of loss are frequent.
  constexpr std::uint64_t kKeys = 16 << 10;
  constexpr int kOps = 1'000'000;
  MicaCache cache(SmallConfig(10, 1 << 20));
  std::unordered_map<std::uint64_t, std::vector<std::uint8_t>> model;
  std::mt19937_64 rng(7);
  std::vector<std::uint32_t> version(kKeys, 0);
  std::uint64_t hits = 0, gets = 0;
  for (int op = 0; op < kOps; ++op) {
    const std::uint64_t key = rng() % kKeys;
    if (rng() % 2 == 0) {
      const auto bytes = static_cast<std::uint32_t>(1 + rng() % 200);
      auto value = ValueOf(key, ++version[key], bytes);
      ASSERT_TRUE(Put(cache, key, value));
      model[key] = std::move(value);
      continue;
    }
    ++gets;
    const std::uint8_t* value = nullptr;
    std::uint32_t bytes = 0;
    if (!cache.Get(KeyHashOf(key), &value, &bytes)) continue;
    ++hits;
    const auto expected = model.find(key);
    ASSERT_NE(expected, model.end()) << "a hit for key " << key << " that was never PUT";
    ASSERT_EQ(std::vector<std::uint8_t>(value, value + bytes), expected->second) << "key " << key << " op " << op;
  }
  EXPECT_GT(hits, gets / 10) << "too few hits for the test to mean anything";
  EXPECT_LT(hits, gets) << "no loss at all: the test's sizes do not exercise eviction";
  EXPECT_GT(cache.stats().index_evictions, 0u);
  EXPECT_EQ(cache.stats().get_hits, hits);
}

TEST(MicaCache, CheckNamesTheBadValue) {
  EXPECT_NE(CheckMessage(SmallConfig(33, 4096)).find("bucket_count_log2 33"), std::string::npos);
  EXPECT_NE(CheckMessage(SmallConfig(4, 5000)).find("log_bytes 5000"), std::string::npos);
  EXPECT_NE(CheckMessage(SmallConfig(4, 2048)).find("log_bytes 2048"), std::string::npos);
  EXPECT_EQ(CheckMessage(SmallConfig(0, 4096)), "");
  EXPECT_THROW(MicaCache(SmallConfig(4, 0)), std::invalid_argument);
}

TEST(KeyHash, LastByteNonZeroAndDistinct) {
  std::unordered_map<std::uint64_t, std::uint64_t> seen;
  for (std::uint64_t key = 0; key < 1'000'000; ++key) {
    const KeyHash hash = KeyHashOf(key);
    std::uint8_t bytes[16];
    std::memcpy(bytes, &hash, sizeof bytes);
    ASSERT_NE(bytes[15], 0) << key;
    ASSERT_TRUE(seen.emplace(hash.lo, key).second) << "keys " << key << " and " << seen[hash.lo];
  }
}

TEST(KeyHash, PartitionsAreEven) {
  constexpr std::uint32_t kPartitions = 3;
  std::uint64_t count[kPartitions] = {};
  for (std::uint64_t key = 0; key < 300'000; ++key) {
    const std::uint32_t partition = Partition(KeyHashOf(key), kPartitions);
    ASSERT_LT(partition, kPartitions);
    ++count[partition];
  }
  for (const std::uint64_t n : count) EXPECT_NEAR(static_cast<double>(n), 100'000.0, 1'500.0);
}

TEST(KeyHash, KeyText) {
  EXPECT_EQ(KeyText(0).size(), 16u);
  EXPECT_EQ(KeyText(0, 250).size(), 250u);
  EXPECT_EQ(KeyText(0, 250).substr(0, 16), KeyText(0));
  EXPECT_NE(KeyText(0), KeyText(1));
  EXPECT_EQ(KeyText(42, 250).find_first_not_of("0123456789abcdef"), std::string::npos);
  char text[16];
  WriteKeyText(9, 16, text);
  EXPECT_EQ(std::string(text, 16), KeyText(9));
}

}  // namespace
}  // namespace rdmalab::kv
