#include "kv/remote/hopscotch.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kv/remote/crc64.h"

namespace rdmalab::kv::remote {
namespace {

constexpr std::uint64_t kNoBucket = ~std::uint64_t{0};
static_assert(kHopscotchCrcBytes == kCrcBytes);

bool KeyIsZero(const std::uint8_t* bucket) {
  KeyHash key;
  std::memcpy(&key, bucket, sizeof(key));
  return key.lo == 0 && key.hi == 0;
}

std::uint32_t VersionOffset(std::uint32_t payload_bytes) { return sizeof(KeyHash) + payload_bytes; }

void Seal(std::uint8_t* bucket, std::uint32_t payload_bytes) {
  const std::uint32_t sealed = VersionOffset(payload_bytes) + kHopscotchVersionBytes;
  const std::uint64_t crc = Crc64(bucket, sealed);
  std::memcpy(bucket + sealed, &crc, kHopscotchCrcBytes);
}

// Readers are other processes' READs of this memory: each step of an update must be in
// memory before the next one starts (x86 keeps stores in order; this keeps the compiler from
// reordering them).
void Publish() { std::atomic_thread_fence(std::memory_order_release); }

}  // namespace

bool HopscotchBucketChecks(const std::uint8_t* bucket, std::uint32_t payload_bytes) {
  const std::uint32_t sealed = VersionOffset(payload_bytes) + kHopscotchVersionBytes;
  std::uint64_t crc = 0;
  std::memcpy(&crc, bucket + sealed, kHopscotchCrcBytes);
  return crc == Crc64(bucket, sealed);
}

HopscotchTable::HopscotchTable(std::uint8_t* buckets, std::uint64_t homes, std::uint32_t payload_bytes)
    : buckets_(buckets), homes_(homes), payload_bytes_(payload_bytes), bucket_bytes_(HopscotchBucketBytes(payload_bytes)) {
  for (std::uint64_t at = 0; at < HopscotchBuckets(homes_); ++at) keys_ += Empty(at) ? 0 : 1;
}

bool HopscotchTable::Empty(std::uint64_t at) const { return KeyIsZero(Bucket(at)); }

std::uint64_t HopscotchTable::HomeOfEntry(std::uint64_t at) const {
  KeyHash key;
  std::memcpy(&key, Bucket(at), sizeof(key));
  return HopscotchHome(key, homes_);
}

std::uint8_t* HopscotchTable::Find(const KeyHash& key) const {
  const std::uint64_t home = HopscotchHome(key, homes_);
  for (std::uint64_t at = home; at < home + kHopscotchNeighbourhood; ++at) {
    if (std::memcmp(Bucket(at), &key, sizeof(key)) == 0) return Bucket(at);
  }
  return nullptr;
}

void HopscotchTable::Write(std::uint64_t at, const KeyHash& key, const std::uint8_t* payload) {
  std::uint8_t* bucket = Bucket(at);
  std::memcpy(bucket, &key, sizeof(key));
  if (payload != nullptr) {
    std::memcpy(bucket + sizeof(key), payload, payload_bytes_);
  } else {
    std::memset(bucket + sizeof(key), 0, payload_bytes_);
  }
  Seal(bucket, payload_bytes_);
  Publish();
}

void HopscotchTable::BumpVersion(std::uint64_t at) {
  std::uint8_t* bucket = Bucket(at);
  std::uint64_t version = 0;
  std::memcpy(&version, bucket + VersionOffset(payload_bytes_), sizeof(version));
  ++version;
  std::memcpy(bucket + VersionOffset(payload_bytes_), &version, sizeof(version));
  Seal(bucket, payload_bytes_);
  Publish();
}

// The entry's home goes odd for the move: a client that READs the neighbourhood meanwhile
// and misses the entry (the READ saw its new bucket before the copy and its old one after
// the clear) sees an odd or a changed version and READs again.
void HopscotchTable::Move(std::uint64_t from, std::uint64_t to) {
  const std::uint64_t home = HomeOfEntry(from);
  BumpVersion(home);
  KeyHash key;
  std::memcpy(&key, Bucket(from), sizeof(key));
  Write(to, key, Bucket(from) + sizeof(key));
  Write(from, KeyHash{0, 0}, nullptr);
  BumpVersion(home);
  ++displacements_;
}

HopscotchTable::Put HopscotchTable::Store(const KeyHash& key, const std::uint8_t* payload) {
  if (std::uint8_t* bucket = Find(key)) {
    std::memcpy(bucket + sizeof(key), payload, payload_bytes_);
    Seal(bucket, payload_bytes_);
    Publish();
    return Put::kStored;
  }
  const std::uint64_t home = HopscotchHome(key, homes_);
  const std::uint64_t limit = std::min(home + kHopscotchProbeBuckets, HopscotchBuckets(homes_));
  std::uint64_t empty = home;
  while (empty < limit && !Empty(empty)) ++empty;
  if (empty == limit) {
    ++refused_;
    return Put::kFull;
  }
  // Every bucket in [home, empty) holds an entry: move the earliest one of the H-1 before
  // the empty bucket whose home is within H of it, so that the empty bucket jumps furthest.
  while (empty - home >= kHopscotchNeighbourhood) {
    std::uint64_t from = kNoBucket;
    for (std::uint64_t at = empty - (kHopscotchNeighbourhood - 1); at < empty; ++at) {
      if (empty - HomeOfEntry(at) < kHopscotchNeighbourhood) {
        from = at;
        break;
      }
    }
    if (from == kNoBucket) {
      ++refused_;
      return Put::kFull;
    }
    Move(from, empty);
    empty = from;
  }
  Write(empty, key, payload);
  ++keys_;
  return Put::kStored;
}

std::uint64_t HopscotchTable::AwayFromHome() const {
  std::uint64_t away = 0;
  for (std::uint64_t at = 0; at < HopscotchBuckets(homes_); ++at) away += !Empty(at) && HomeOfEntry(at) != at ? 1 : 0;
  return away;
}

NeighbourhoodScan ScanNeighbourhood(const std::uint8_t* neighbourhood, const KeyHash& key,
                                    std::uint32_t payload_bytes) {
  const std::uint32_t bucket_bytes = HopscotchBucketBytes(payload_bytes);
  for (std::uint32_t e = 0; e < kHopscotchNeighbourhood; ++e) {
    const std::uint8_t* bucket = neighbourhood + e * bucket_bytes;
    if (std::memcmp(bucket, &key, sizeof(key)) != 0) continue;
    if (!HopscotchBucketChecks(bucket, payload_bytes)) return {NeighbourhoodScan::kTorn, nullptr, 0};
    return {NeighbourhoodScan::kFound, bucket + sizeof(key), 0};
  }
  // No K: trusted only if no bucket was caught mid-write (one may have been becoming K's).
  for (std::uint32_t e = 0; e < kHopscotchNeighbourhood; ++e) {
    if (!HopscotchBucketChecks(neighbourhood + e * bucket_bytes, payload_bytes)) {
      return {NeighbourhoodScan::kTorn, nullptr, 0};
    }
  }
  const std::uint64_t version = HomeVersion(neighbourhood, payload_bytes);
  if (version % 2 != 0) return {NeighbourhoodScan::kTorn, nullptr, 0};
  return {NeighbourhoodScan::kAbsent, nullptr, version};
}

std::uint64_t HomeVersion(const std::uint8_t* home_bucket, std::uint32_t payload_bytes) {
  if (!HopscotchBucketChecks(home_bucket, payload_bytes)) return kTornVersion;
  std::uint64_t version = 0;
  std::memcpy(&version, home_bucket + VersionOffset(payload_bytes), sizeof(version));
  return version;
}

}  // namespace rdmalab::kv::remote
