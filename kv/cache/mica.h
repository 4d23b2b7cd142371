// A MICA-style cache (Lim et al., NSDI'14), one instance per worker partition (EREW: one
// thread owns it, so it takes no lock). A lossy set-associative index of 64-byte buckets,
// each 8 slots of (16-bit tag, 48-bit log offset), points into a circular log of entries
// (the 16-byte keyhash with the value's length in place of its tag bits, then the value,
// padded to 8 B: 48 B for a 32-byte value, packed back to back). GET = one bucket read +
// one log read; PUT = log append + bucket update. Two ways to lose a key, both by design:
// FIFO eviction when the log wraps over its entry, and lossy replacement of a full bucket's
// oldest slot (or of a slot whose tag collides). A GET compares the whole key, so neither
// loss can return another key's value: the entry holds its 112 bits beyond the tag, and the
// index slot that led to it holds the tag (tag bits 0 and 1 share slot tag 1, so the entry
// keeps one bit that tells them apart).
// Why the length rides in the tag bits: a 32-byte value's entry is then 48 bytes, and a
// PUT appends 0.75 cache lines instead of the 0.875 of a separate length field (56-byte
// entries) or the 1 of entries kept within a line; a GET reads 1.5 lines on average.
//
// Offsets are absolute byte positions in the log's stream (mod 2^48); an entry at offset o
// is intact while tail - o <= log_bytes, since everything older has been written over.
// (A slot left untouched for 2^48 bytes of appends, days at full speed, aliases back into
// the window, as in MICA; only the key compare then guards it.)
// No allocation, lock or syscall after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "kv/workload/keyhash.h"

namespace rdmalab::kv {

inline constexpr std::uint32_t kMaxValueBytes = 1000;  // HERD's request slot holds at most this
inline constexpr std::uint64_t kNoEntry = ~std::uint64_t{0};  // above any 48-bit offset

struct MicaConfig {
  std::uint32_t bucket_count_log2 = 20;
  std::uint64_t log_bytes = 64ull << 20;  // a power of two
  bool prefault = true;  // touch every page at construction so that no fault lands in a measurement
};

inline constexpr std::uint32_t kMaxBucketCountLog2 = 32;  // the bucket index takes keyhash lo bits 0..31
inline constexpr std::uint64_t kMinLogBytes = 4096;
inline constexpr std::uint64_t kMaxLogBytes = std::uint64_t{1} << 40;

// Throws std::invalid_argument naming the bad field, its value and the valid range.
void Check(const MicaConfig& config);

struct LogRef {
  std::uint64_t offset = kNoEntry;
};

class MicaCache {
 public:
  static constexpr std::uint32_t kSlotsPerBucket = 8;
  static constexpr std::uint32_t kBucketBytes = 64;
  static constexpr std::uint32_t kTagShift = 48;
  static constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kTagShift) - 1;
  static constexpr std::uint32_t kEntryHeaderBytes = sizeof(KeyHash);  // the key, the length in its tag bits
  static constexpr std::uint32_t kEntryAlignBytes = 8;
  static constexpr std::uint32_t kLengthBits = 15;  // of the 16 tag bits; the top one marks tag bits 0
  static constexpr std::uint64_t kTagZeroBit = std::uint64_t{1} << 63;
  // The log bytes an entry holding a value of `value_bytes` takes.
  static constexpr std::uint64_t EntryBytes(std::uint64_t value_bytes) {
    return (kEntryHeaderBytes + value_bytes + kEntryAlignBytes - 1) / kEntryAlignBytes * kEntryAlignBytes;
  }
  static_assert(kSlotsPerBucket * sizeof(std::uint64_t) == kBucketBytes, "one bucket is one cache line");
  static_assert(kMaxBucketCountLog2 <= kTagShift, "bucket index bits and tag bits of keyhash lo must not overlap");
  static_assert(kMaxValueBytes < (1u << kLengthBits), "a value length fits the key's tag bits");
  static_assert(kMaxLogBytes < kOffsetMask, "an intact entry's distance from the tail fits 48 bits");

  explicit MicaCache(const MicaConfig& config);

  // Stage 0 of the server pipeline: start loading the key's bucket.
  void PrefetchBucket(const KeyHash& key) const { __builtin_prefetch(&buckets_[BucketIndex(key)]); }

  // Stage 1 of a GET: reads the bucket, and on a live tag match starts loading the log entry.
  LogRef FindAndPrefetch(const KeyHash& key) const;

  // Stage 1 of a PUT, all of it: appends to the log, then points the index at the entry.
  // Refuses (returns false, counts put_refused) a value above kMaxValueBytes.
  bool Put(const KeyHash& key, const std::uint8_t* value, std::uint32_t bytes);

  // Stage 2 of a GET: checks that the entry is still intact (a Put between stages may have
  // written over it) and holds this exact key. `ref` must come from FindAndPrefetch(key):
  // the entry's tag bits are vouched for by the index slot that matched there. On a hit,
  // *value points into the log and stays valid until the next Put.
  bool Read(LogRef ref, const KeyHash& key, const std::uint8_t** value, std::uint32_t* bytes) const;

  bool Get(const KeyHash& key, const std::uint8_t** value, std::uint32_t* bytes) const {
    return Read(FindAndPrefetch(key), key, value, bytes);
  }

  struct Stats {
    std::uint64_t gets = 0, get_hits = 0, puts = 0, put_refused = 0, index_evictions = 0;
  };
  const Stats& stats() const { return stats_; }
  const MicaConfig& config() const { return config_; }
  // The log's config().log_bytes bytes, for registering with the NIC: HERD SENDs values
  // above its inline size straight from the log. Such a SEND must complete before
  // log_bytes more bytes are appended, or the NIC may read a newer entry's bytes.
  const std::uint8_t* log_memory() const { return log_; }

 private:
  struct alignas(kBucketBytes) Bucket {
    std::uint64_t slots[kSlotsPerBucket];
  };
  struct Unmap {
    std::size_t bytes = 0;
    void operator()(void* address) const;
  };
  using Mapping = std::unique_ptr<void, Unmap>;

  static Mapping Map(std::size_t bytes, bool prefault);
  std::uint64_t BucketIndex(const KeyHash& key) const { return key.lo & bucket_mask_; }
  // Tag 0 marks an empty slot, so a key whose tag bits are 0 uses tag 1.
  static std::uint64_t TagOf(const KeyHash& key) {
    const std::uint64_t tag = key.lo >> kTagShift;
    return tag + (tag == 0);
  }
  // The key as its entry stores it: the tag bits replaced by the value's length, and by
  // whether they were 0 (slot tag 1 stands for tag bits 0 and 1).
  static std::uint64_t StoredLo(const KeyHash& key, std::uint32_t bytes) {
    return (key.lo & kOffsetMask) | std::uint64_t{bytes} << kTagShift | ((key.lo >> kTagShift) == 0 ? kTagZeroBit : 0);
  }
  bool Live(std::uint64_t offset) const { return ((tail_ - offset) & kOffsetMask) <= config_.log_bytes; }
  const std::uint8_t* EntryAt(std::uint64_t offset) const { return log_ + (offset & log_mask_); }

  MicaConfig config_;
  std::uint64_t bucket_mask_;
  std::uint64_t log_mask_;
  Mapping bucket_memory_;
  Mapping log_memory_;
  Bucket* buckets_;
  std::uint8_t* log_;
  std::uint64_t tail_ = 0;  // absolute offset of the next append, not wrapped
  mutable Stats stats_;     // counted by const lookups too: the owner thread is the only reader
};

static_assert(MicaCache::EntryBytes(kMaxValueBytes) <= kMinLogBytes, "the smallest log holds the largest entry");

// Inline: a HERD worker runs both once a GET, between its other per-request steps.
inline LogRef MicaCache::FindAndPrefetch(const KeyHash& key) const {
  ++stats_.gets;
  const Bucket& bucket = buckets_[BucketIndex(key)];
  const std::uint64_t tag = TagOf(key);
  for (const std::uint64_t slot : bucket.slots) {
    const std::uint64_t offset = slot & kOffsetMask;
    if ((slot >> kTagShift) != tag || !Live(offset)) continue;
    // A 32-byte value's entry spans at most two lines; longer values stream in.
    const std::uint8_t* entry = EntryAt(offset);
    __builtin_prefetch(entry);
    __builtin_prefetch(entry + kBucketBytes);
    return LogRef{offset};
  }
  return LogRef{};
}

inline bool MicaCache::Read(LogRef ref, const KeyHash& key, const std::uint8_t** value, std::uint32_t* bytes) const {
  if (ref.offset == kNoEntry || !Live(ref.offset)) return false;
  const std::uint8_t* entry = EntryAt(ref.offset);
  KeyHash stored;
  std::memcpy(&stored, entry, sizeof(KeyHash));
  // The index slot that led here matched the key's tag (FindAndPrefetch); the entry was
  // written by the PUT that set that slot, so its key had the same tag: the other 112
  // bits and the tag-zero bit decide.
  const std::uint64_t tag_zero = (key.lo >> kTagShift) == 0 ? kTagZeroBit : 0;
  if (((stored.lo ^ key.lo) & kOffsetMask) != 0 || stored.hi != key.hi || (stored.lo & kTagZeroBit) != tag_zero) {
    return false;
  }
  *value = entry + kEntryHeaderBytes;
  *bytes = static_cast<std::uint32_t>(stored.lo >> kTagShift) & ((1u << kLengthBits) - 1);
  ++stats_.get_hits;
  return true;
}

}  // namespace rdmalab::kv
