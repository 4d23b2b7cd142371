#include "kv/remote/cuckoo.h"

#include "rdma/error.h"

namespace rdmalab::kv::remote {
namespace {

constexpr std::uint32_t kBucketBytes = 32;

}  // namespace

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
