// Pilaf's full store (spec: systems.md; Pilaf, USENIX ATC'13): a 3-1 cuckoo table (3 hash
// functions, 1 entry per 32-byte bucket) whose buckets point to out-of-table extents, each
// bucket and extent carrying a CRC64 of its bytes that the client verifies after every READ:
// a READ that raced with the server's update, or memory that was corrupted, fails its check.
// Bucket: [keyhash, 16 B][extent offset, 8 B][CRC64 of the 24 bytes before, 8 B].
// Extent: [value, SV B][CRC64 of the value, 8 B].
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kv/remote/crc64.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::remote {

constexpr std::uint32_t kCuckooHashes = 3;
constexpr std::uint32_t kBucketCrcOffset = 24;
constexpr std::uint32_t kMaxCuckooKicks = 1000;
constexpr double kCuckooFill = 0.75;  // keys per bucket at most (Pilaf's 3-1 table fills to 75%)

// Bucket i of `count` for the key under hash function h (0..2).
std::uint64_t CuckooBucket(const KeyHash& key, std::uint32_t h, std::uint64_t count);

struct CuckooBucketView {
  KeyHash key;
  std::uint64_t extent;
  bool checks;  // its CRC64 matches
};
CuckooBucketView ParseBucket(const std::uint8_t* bucket);
void WriteBucket(std::uint8_t* bucket, const KeyHash& key, std::uint64_t extent);

// Builds the table over keys 0..keys-1 in `buckets` (count x 32 B, zeroed): key k's extent
// is `extent_of(k)`. Returns each key's bucket index (the server's map for PUTs); fails
// naming the key when a key finds no place within kMaxCuckooKicks displacements.
std::vector<std::uint64_t> BuildCuckoo(std::uint8_t* buckets, std::uint64_t count, std::uint64_t keys,
                                       std::uint64_t extents_offset, std::uint32_t extent_bytes);

}  // namespace rdmalab::kv::remote
