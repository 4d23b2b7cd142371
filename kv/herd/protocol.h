// HERD's wire formats (spec: systems.md, HERD). A request is WRITTEN into its 1 KB slot so
// that it ends at the slot's end: [value (LEN B)][id, 4 B][LEN and check, 4 B][keyhash, 16 B]
// (LEN in the low 10 bits, a 22-bit check above it).
// The server polls only the slot's last byte, the keyhash's last byte, which clients make
// non-zero: WRITEs land in increasing address order, so when that byte is set the whole
// request is there. (The original code puts LEN first; any order works as long as the
// polled byte is written last.) The id is the client core's request id, echoed in the
// response so that a retried request's second answer is recognized.
// The check word is ours, not the original's: with retries, a request sent again may be
// detected while the client, answered already, WRITEs its next request into the same slot;
// the server then reads a mix of the two. The check (over id, LEN, key and value, verified
// on the server's own copy) turns such a torn read into a dropped request (the client sends
// it again), not a value stored under the wrong key, but for a 1 in 4 Mi chance per torn read.
// A response is one UD SEND: [id, 4 B][status, 1 B][pad, 1 B][LEN, 2 B][value].
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kv/cache/mica.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::herd {

constexpr std::uint32_t kSlotBytes = 1024;
// Slots lie this far apart in the region: one line more than a slot, so that the polled last
// lines of consecutive slots fall into different L1 sets (a 1 KB stride put all of a
// worker's polled lines into 4 of 64 sets: 32 lines cached, so a sweep of more slots
// missed L1 on every poll). The request still ends at the slot's kSlotBytes-th byte.
constexpr std::uint32_t kSlotStrideBytes = kSlotBytes + 64;
constexpr std::uint32_t kTrailerBytes = 4 + 4 + sizeof(KeyHash);  // id, LEN and check, keyhash
constexpr std::uint32_t kLenBits = 10;
constexpr std::uint32_t kLenMask = (1u << kLenBits) - 1;
static_assert(kMaxValueBytes <= kLenMask, "LEN's bits hold the largest value's length");
constexpr std::uint32_t kMaxRequestValueBytes = kSlotBytes - kTrailerBytes;
static_assert(kMaxValueBytes <= kMaxRequestValueBytes, "a HERD slot must hold the largest value");
constexpr std::uint32_t kResponseHeaderBytes = 8;
constexpr std::uint32_t kUdGrhBytes = 40;
constexpr std::uint32_t kCacheLineBytes = 64;
// A client's RECV buffers for responses carrying up to `value_bytes` follow each other
// this far apart: a line whose last 40 bytes are the buffer's GRH area, then the header and
// value in whole lines. The response thus starts a line, and on IB, where a response carries
// no GRH and the NIC leaves that area alone, it is written into the client's cache as its
// own lines only (a 32-byte value: one line, where GRH, header and value took two). Packed,
// not 1 KB apart: 1 KB buffers put every response into the same few L1 sets, at the client
// and at the server that writes them.
inline std::uint32_t ResponseStrideBytes(std::uint32_t value_bytes) {
  return kCacheLineBytes +
         (kResponseHeaderBytes + value_bytes + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}
// Where a RECV buffer starts in its stride (it ends with the stride).
constexpr std::uint32_t kResponseBufferOffset = kCacheLineBytes - kUdGrhBytes;

enum class RequestKind : std::uint8_t { kEmpty, kGet, kPut, kMalformed, kTorn };
enum ResponseStatus : std::uint8_t { kMiss = 0, kHit = 1, kStored = 2, kRefused = 3 };

struct ParsedRequest {
  KeyHash key{};
  std::uint32_t id = 0;
  std::uint16_t value_bytes = 0;
  const std::uint8_t* value = nullptr;  // the server's copy
};

// The request's check: a multiply-xorshift mix over id, LEN, key and value, in the bits above LEN.
inline std::uint32_t RequestCheck(const KeyHash& key, std::uint32_t id, std::uint16_t value_bytes,
                                  const std::uint8_t* value) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = (std::uint64_t{id} << 16 | value_bytes) * kMul;
  h = (h ^ key.lo ^ (h >> 29)) * kMul;
  h = (h ^ key.hi ^ (h >> 29)) * kMul;
  std::uint32_t i = 0;
  for (; i + 8 <= value_bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, value + i, 8);
    h = (h ^ word ^ (h >> 29)) * kMul;
  }
  if (i < value_bytes) {
    std::uint64_t word = 0;
    std::memcpy(&word, value + i, value_bytes - i);
    h = (h ^ word ^ (h >> 29)) * kMul;
  }
  return static_cast<std::uint32_t>(h ^ (h >> 32)) >> kLenBits;
}

// Which slot of the request region serves (worker, client, window slot).
struct RegionLayout {
  std::uint32_t workers = 1, clients = 1, window = 1;
  std::uint64_t Slot(std::uint32_t worker, std::uint32_t client, std::uint32_t w) const {
    return (std::uint64_t{worker} * clients + client) * window + w;
  }
  std::uint64_t Bytes() const { return std::uint64_t{workers} * clients * window * kSlotStrideBytes; }
};

// Bytes a request takes on the wire, and its offset within the slot.
inline std::uint32_t RequestBytes(std::uint32_t value_bytes) { return value_bytes + kTrailerBytes; }

// Writes the request ending at `slot_end` (the client's staging copy of its slot).
inline void EncodeRequest(std::uint8_t* slot_end, const KeyHash& key, std::uint32_t id, const std::uint8_t* value,
                          std::uint16_t value_bytes) {
  std::uint8_t* trailer = slot_end - kTrailerBytes;
  if (value_bytes != 0) std::memcpy(trailer - value_bytes, value, value_bytes);
  const std::uint32_t meta = value_bytes | RequestCheck(key, id, value_bytes, value) << kLenBits;
  std::memcpy(trailer, &id, 4);
  std::memcpy(trailer + 4, &meta, 4);
  std::memcpy(trailer + 8, &key, sizeof(KeyHash));
}

// Whether the slot that starts at `slot` holds a request: its polled byte is set. The one
// load a poll that finds nothing costs; ParseRequest looks again.
inline bool RequestPresent(const std::uint8_t* slot) {
  return *static_cast<const volatile std::uint8_t*>(slot + kSlotBytes - 1) != 0;
}

// The keyhash in the slot that starts at `slot`, as it is now: a request being written may
// be torn (ParsePresentRequest's check word catches that; a prefetch needs only an address).
inline KeyHash PolledKey(const std::uint8_t* slot) {
  KeyHash key;
  std::memcpy(&key, slot + kSlotBytes - sizeof(KeyHash), sizeof(KeyHash));
  return key;
}

// Reads the slot that starts at `slot` (kSlotBytes long), whose polled byte was seen set
// (RequestPresent), copying the value to `value_copy` (kMaxValueBytes): a request, or
// malformed (LEN beyond kMaxValueBytes, an all-zero keyhash below the polled byte, a key of
// another worker's partition), or torn (the check word disagrees). Never reads outside the slot.
inline RequestKind ParsePresentRequest(const std::uint8_t* slot, std::uint32_t worker, std::uint32_t workers,
                                       ParsedRequest* out, std::uint8_t* value_copy) {
  std::atomic_signal_fence(std::memory_order_acquire);
  const std::uint8_t* trailer = slot + kSlotBytes - kTrailerBytes;
  std::uint32_t meta = 0;
  std::memcpy(&out->id, trailer, 4);
  std::memcpy(&meta, trailer + 4, 4);
  out->key = PolledKey(slot);
  out->value_bytes = static_cast<std::uint16_t>(meta & kLenMask);
  const std::uint32_t check = meta >> kLenBits;
  if (out->value_bytes > kMaxValueBytes) return RequestKind::kMalformed;
  if (out->key.lo == 0 && (out->key.hi << 8) == 0) return RequestKind::kMalformed;
  if (Partition(out->key, workers) != worker) return RequestKind::kMalformed;
  if (out->value_bytes != 0) std::memcpy(value_copy, trailer - out->value_bytes, out->value_bytes);
  out->value = value_copy;
  if (RequestCheck(out->key, out->id, out->value_bytes, value_copy) != check) return RequestKind::kTorn;
  return out->value_bytes == 0 ? RequestKind::kGet : RequestKind::kPut;
}

// ParsePresentRequest, or kEmpty when the slot's polled byte is 0.
inline RequestKind ParseRequest(const std::uint8_t* slot, std::uint32_t worker, std::uint32_t workers,
                                ParsedRequest* out, std::uint8_t* value_copy) {
  if (!RequestPresent(slot)) return RequestKind::kEmpty;
  return ParsePresentRequest(slot, worker, workers, out, value_copy);
}

// Zeroes the polled keyhash and LEN at once, on detection: zeroing after the response
// would let round-robin polling see the request again, or erase the client's next one.
inline void ClearRequest(std::uint8_t* slot) {
  std::memset(slot + kSlotBytes - sizeof(KeyHash) - 4, 0, sizeof(KeyHash) + 4);
}

}  // namespace rdmalab::kv::herd
