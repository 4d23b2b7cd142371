// FaRM's full store (spec: systems.md; herd14 Sec. 5.1.2; FaRM, NSDI'14): a hopscotch hash
// table with neighbourhood H = 6 in the server's registered memory. Key K's home is bucket
// HopscotchHome(K); K always sits in one of the H buckets home..home+H-1, so a client finds
// it with one READ of those H buckets. The table has `homes` home buckets and H-1 more at
// the end, so that no neighbourhood wraps around (a wrap would split the READ in two).
//
// Bucket: [keyhash 16 B][payload P B][version 8 B][CRC64 of the bytes before it, 8 B].
// The payload is the value (FaRM, P = SV) or the offset of the value's extent (FaRM-VAR,
// P = SP = 8; the extent is [value][CRC64 of it]). A zero keyhash marks an empty bucket; a
// zeroed bucket is a sealed empty one (CRC-64/ECMA-182 of zeroes is 0), so fresh memory is
// an empty table. The version belongs to the bucket as a home: it is odd while an entry
// homed there is being moved, and counts the moves.
//
// What a client trusts (the server's single writer keeps these true; FaRM itself uses
// per-cache-line versions):
// - a bucket holding K whose CRC64 checks: its payload is a whole value that K held while
//   the READ ran (a READ racing with an update in place mixes two values and fails the CRC);
// - a miss only when a READ of the neighbourhood finds every bucket sealed and no K, and the
//   home's version is the same even one before it (the previous READ's) and after it (a READ
//   of the home bucket alone, posted once it completed): no entry homed there moved while it
//   ran, so none was hidden from it, whatever order its bytes were read in.
#pragma once

#include <cstdint>

#include "kv/workload/keyhash.h"

namespace rdmalab::kv::remote {

constexpr std::uint32_t kHopscotchNeighbourhood = 6;  // H, as FaRM sets it
constexpr std::uint32_t kHopscotchVersionBytes = 8;
constexpr std::uint32_t kHopscotchCrcBytes = 8;
constexpr std::uint32_t kHopscotchSealBytes = kHopscotchVersionBytes + kHopscotchCrcBytes;
// How far past its home an insert looks for an empty bucket before it answers "full"
// (hopscotch's add range): the displacements then bring the empty bucket within H.
constexpr std::uint32_t kHopscotchProbeBuckets = 512;
static_assert(kHopscotchProbeBuckets > kHopscotchNeighbourhood);

constexpr std::uint32_t HopscotchBucketBytes(std::uint32_t payload_bytes) {
  return static_cast<std::uint32_t>(sizeof(KeyHash)) + payload_bytes + kHopscotchSealBytes;
}
// Buckets in the table of `homes` home buckets (the H-1 at the end included).
inline std::uint64_t HopscotchBuckets(std::uint64_t homes) { return homes + kHopscotchNeighbourhood - 1; }
// K's home bucket among `homes` (salted apart from the cuckoo table's and MICA's hashes).
inline std::uint64_t HopscotchHome(const KeyHash& key, std::uint64_t homes) {
  return SplitMix64Mix(key.lo ^ (key.hi >> 7) ^ 0x5851F42D4C957F2Dull) % homes;
}

// Whether a bucket's CRC64 matches its bytes.
bool HopscotchBucketChecks(const std::uint8_t* bucket, std::uint32_t payload_bytes);

// The server's side: inserts and updates. One writer (the server's one worker); nothing here
// allocates. Its counts are the server's report.
class HopscotchTable {
 public:
  enum class Put : std::uint8_t { kStored, kFull };
  HopscotchTable(std::uint8_t* buckets, std::uint64_t homes, std::uint32_t payload_bytes);

  // Updates K's payload in place, or inserts K: into the first empty bucket within
  // kHopscotchProbeBuckets of its home, moved closer by displacing entries that stay within
  // H of their own home, until it is within H of K's. kFull (counted) when no empty bucket
  // is near enough or none can be moved closer; the table is unchanged but for moves made.
  Put Store(const KeyHash& key, const std::uint8_t* payload);
  // K's bucket, or nullptr.
  std::uint8_t* Find(const KeyHash& key) const;

  std::uint64_t homes() const { return homes_; }
  std::uint64_t keys() const { return keys_; }
  std::uint64_t displacements() const { return displacements_; }
  std::uint64_t refused() const { return refused_; }
  // Entries not in their home bucket (a scan of the table: for reports and tests).
  std::uint64_t AwayFromHome() const;

 private:
  std::uint8_t* Bucket(std::uint64_t at) const { return buckets_ + at * bucket_bytes_; }
  bool Empty(std::uint64_t at) const;
  std::uint64_t HomeOfEntry(std::uint64_t at) const;
  // Writes key and payload into bucket `at`, keeping its version, and seals it.
  void Write(std::uint64_t at, const KeyHash& key, const std::uint8_t* payload);
  void BumpVersion(std::uint64_t at);
  void Move(std::uint64_t from, std::uint64_t to);

  std::uint8_t* buckets_;
  std::uint64_t homes_;
  std::uint32_t payload_bytes_, bucket_bytes_;
  std::uint64_t keys_ = 0, displacements_ = 0, refused_ = 0;
};

// The client's side: what one READ of K's neighbourhood (H buckets) says.
struct NeighbourhoodScan {
  enum Outcome : std::uint8_t { kFound, kAbsent, kTorn } outcome;
  const std::uint8_t* payload;  // kFound: K's payload in the READ's bytes
  std::uint64_t home_version;   // kAbsent: the home's version (even)
};
NeighbourhoodScan ScanNeighbourhood(const std::uint8_t* neighbourhood, const KeyHash& key,
                                    std::uint32_t payload_bytes);
// A READ of the home bucket alone: its version, or kTornVersion (odd) when its CRC64 fails.
constexpr std::uint64_t kTornVersion = ~std::uint64_t{0};
std::uint64_t HomeVersion(const std::uint8_t* home_bucket, std::uint32_t payload_bytes);

}  // namespace rdmalab::kv::remote
