#include "kv/cache/mica.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace rdmalab::kv {
namespace {

constexpr std::size_t kPageBytes = 4096;

bool IsPowerOfTwo(std::uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

const MicaConfig& Checked(const MicaConfig& config) {
  Check(config);
  return config;
}

}  // namespace

void Check(const MicaConfig& config) {
  std::ostringstream message;
  if (config.bucket_count_log2 > kMaxBucketCountLog2) {
    message << "mica bucket_count_log2 " << config.bucket_count_log2 << " is invalid: valid range is 0.."
            << kMaxBucketCountLog2;
  } else if (!IsPowerOfTwo(config.log_bytes) || config.log_bytes < kMinLogBytes || config.log_bytes > kMaxLogBytes) {
    message << "mica log_bytes " << config.log_bytes << " is invalid: it must be a power of two from "
            << kMinLogBytes << " to " << kMaxLogBytes << " (2^40)";
  } else {
    return;
  }
  throw std::invalid_argument(message.str());
}

void MicaCache::Unmap::operator()(void* address) const { munmap(address, bytes); }

MicaCache::Mapping MicaCache::Map(std::size_t bytes, bool prefault) {
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mica: mmap of " + std::to_string(bytes) + " bytes (index or log)");
  }
  // A hint: transparent hugepages cut the TLB misses of random bucket and log reads; the
  // cache works the same without them.
  madvise(address, bytes, MADV_HUGEPAGE);
  if (prefault) {
    auto* bytes_at = static_cast<volatile std::uint8_t*>(address);
    for (std::size_t offset = 0; offset < bytes; offset += kPageBytes) bytes_at[offset] = 0;
  }
  return Mapping(address, Unmap{bytes});
}

MicaCache::MicaCache(const MicaConfig& config)
    : config_(Checked(config)),
      bucket_mask_((std::uint64_t{1} << config_.bucket_count_log2) - 1),
      log_mask_(config_.log_bytes - 1),
      bucket_memory_(Map((bucket_mask_ + 1) * sizeof(Bucket), config_.prefault)),
      log_memory_(Map(config_.log_bytes, config_.prefault)),
      buckets_(static_cast<Bucket*>(bucket_memory_.get())),
      log_(static_cast<std::uint8_t*>(log_memory_.get())) {}

bool MicaCache::Put(const KeyHash& key, const std::uint8_t* value, std::uint32_t bytes) {
  ++stats_.puts;
  if (bytes > kMaxValueBytes) {
    ++stats_.put_refused;
    return false;
  }
  const std::uint64_t entry_bytes = EntryBytes(bytes);
  // Entries are packed (mica.h says why); none straddles the log's end: skip the rest of it.
  const std::uint64_t position = tail_ & log_mask_;
  if (position + entry_bytes > config_.log_bytes) tail_ += config_.log_bytes - position;
  const std::uint64_t offset = tail_ & kOffsetMask;
  std::uint8_t* entry = log_ + (tail_ & log_mask_);
  // The value first, with memmove: a caller may PUT a value it got from this log, and
  // the new entry may overlap it.
  if (bytes != 0) std::memmove(entry + kEntryHeaderBytes, value, bytes);
  const KeyHash stored{StoredLo(key, bytes), key.hi};
  std::memcpy(entry, &stored, sizeof(KeyHash));
  tail_ += entry_bytes;

  // One pass over the bucket: the slot of the same tag, else the first free (empty or
  // written over) slot, else the live slot with the oldest entry, which is lost.
  Bucket& bucket = buckets_[BucketIndex(key)];
  const std::uint64_t tag = TagOf(key);
  std::uint32_t same = kSlotsPerBucket, free = kSlotsPerBucket, oldest = 0;
  std::uint64_t oldest_distance = 0;
  for (std::uint32_t i = 0; i < kSlotsPerBucket; ++i) {
    const std::uint64_t slot = bucket.slots[i];
    const std::uint64_t slot_tag = slot >> kTagShift;
    if (slot_tag == tag) {
      same = i;
      break;
    }
    const std::uint64_t distance = (tail_ - slot) & kOffsetMask;
    if (slot_tag == 0 || distance > config_.log_bytes) {
      if (free == kSlotsPerBucket) free = i;
    } else if (distance > oldest_distance) {
      oldest_distance = distance;
      oldest = i;
    }
  }
  std::uint32_t target = same != kSlotsPerBucket ? same : free;
  if (target == kSlotsPerBucket) {
    target = oldest;
    ++stats_.index_evictions;
  }
  bucket.slots[target] = (tag << kTagShift) | offset;
  return true;
}

}  // namespace rdmalab::kv
