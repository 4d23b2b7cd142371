#include "kv/remote/cuckoo.h"

#include "rdma/error.h"

namespace rdmalab::kv::remote {
namespace {

constexpr std::uint64_t kCrc64Polynomial = 0x42F0E1EBA9EA3693ull;
constexpr std::uint32_t kBucketBytes = 32;

constexpr std::array<std::uint64_t, 256> Crc64Table() {
  std::array<std::uint64_t, 256> table{};
  for (std::uint64_t i = 0; i < 256; ++i) {
    std::uint64_t crc = i << 56;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & (1ull << 63)) ? (crc << 1) ^ kCrc64Polynomial : crc << 1;
    table[i] = crc;
  }
  return table;
}
constexpr std::array<std::uint64_t, 256> kCrc64Table = Crc64Table();

}  // namespace

std::uint64_t Crc64(const std::uint8_t* bytes, std::size_t length) {
  std::uint64_t crc = 0;
  for (std::size_t i = 0; i < length; ++i) crc = kCrc64Table[((crc >> 56) ^ bytes[i]) & 0xFF] ^ (crc << 8);
  return crc;
}

std::uint64_t CuckooBucket(const KeyHash& key, std::uint32_t h, std::uint64_t count) {
  const std::uint64_t mixed = SplitMix64Mix(key.lo ^ (key.hi * (2 * h + 1)) ^ (0x9E3779B97F4A7C15ull * (h + 1)));
  return mixed % count;
}

CuckooBucketView ParseBucket(const std::uint8_t* bucket) {
  CuckooBucketView view;
  std::memcpy(&view.key, bucket, sizeof(KeyHash));
  std::memcpy(&view.extent, bucket + sizeof(KeyHash), 8);
  std::uint64_t crc = 0;
  std::memcpy(&crc, bucket + kBucketCrcOffset, kCrcBytes);
  view.checks = crc == Crc64(bucket, kBucketCrcOffset);
  return view;
}

void WriteBucket(std::uint8_t* bucket, const KeyHash& key, std::uint64_t extent) {
  std::memcpy(bucket, &key, sizeof(KeyHash));
  std::memcpy(bucket + sizeof(KeyHash), &extent, 8);
  const std::uint64_t crc = Crc64(bucket, kBucketCrcOffset);
  std::memcpy(bucket + kBucketCrcOffset, &crc, kCrcBytes);
}

bool ExtentChecks(const std::uint8_t* extent, std::uint32_t value_bytes) {
  std::uint64_t crc = 0;
  std::memcpy(&crc, extent + value_bytes, kCrcBytes);
  return crc == Crc64(extent, value_bytes);
}

void SealExtent(std::uint8_t* extent, std::uint32_t value_bytes) {
  const std::uint64_t crc = Crc64(extent, value_bytes);
  std::memcpy(extent + value_bytes, &crc, kCrcBytes);
}

std::vector<std::uint64_t> BuildCuckoo(std::uint8_t* buckets, std::uint64_t count, std::uint64_t keys,
                                       std::uint64_t extents_offset, std::uint32_t extent_bytes) {
  std::vector<std::uint64_t> key_of_bucket(count, ~std::uint64_t{0});
  std::vector<std::uint64_t> bucket_of_key(keys);
  std::uint64_t walk = 0x2545F4914F6CDD1Dull;  // the random walk's choices, reproducible
  for (std::uint64_t k = 0; k < keys; ++k) {
    std::uint64_t moving = k;
    std::uint32_t kicks = 0;
    for (;;) {
      const KeyHash key = KeyHashOf(moving);
      bool placed = false;
      for (std::uint32_t h = 0; h < kCuckooHashes && !placed; ++h) {
        const std::uint64_t b = CuckooBucket(key, h, count);
        if (key_of_bucket[b] == ~std::uint64_t{0}) {
          key_of_bucket[b] = moving;
          bucket_of_key[moving] = b;
          placed = true;
        }
      }
      if (placed) break;
      if (++kicks > kMaxCuckooKicks) {
        Fail("the cuckoo table of ", count, " buckets found no place for key ", moving, " after ", kMaxCuckooKicks,
             " displacements");
      }
      walk = SplitMix64Mix(walk);
      const std::uint64_t b = CuckooBucket(key, static_cast<std::uint32_t>(walk % kCuckooHashes), count);
      const std::uint64_t evicted = key_of_bucket[b];
      key_of_bucket[b] = moving;
      bucket_of_key[moving] = b;
      moving = evicted;
    }
  }
  for (std::uint64_t b = 0; b < count; ++b) {
    const std::uint64_t k = key_of_bucket[b];
    if (k != ~std::uint64_t{0}) WriteBucket(buckets + b * kBucketBytes, KeyHashOf(k), extents_offset + k * extent_bytes);
  }
  return bucket_of_key;
}

}  // namespace rdmalab::kv::remote
