// HERD's wire formats (spec: systems.md, HERD). A request is WRITTEN into its 1 KB slot so
// that it ends at the slot's end: [value (LEN bytes)][id, 4 B][LEN, 2 B][keyhash, 16 B].
// The server polls only the slot's last byte, the keyhash's last byte, which clients make
// non-zero: WRITEs land in increasing address order, so when that byte is set the whole
// request is there. (The original code puts LEN first; any order works as long as the
// polled byte is written last.) The id is the client core's request id, echoed in the
// response so that a retried request's second answer is recognized.
// A response is one UD SEND: [id, 4 B][status, 1 B][pad, 1 B][LEN, 2 B][value].
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kv/cache/mica.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::herd {

constexpr std::uint32_t kSlotBytes = 1024;
constexpr std::uint32_t kTrailerBytes = 4 + 2 + sizeof(KeyHash);  // id, LEN, keyhash
constexpr std::uint32_t kMaxRequestValueBytes = kSlotBytes - kTrailerBytes;
static_assert(kMaxValueBytes <= kMaxRequestValueBytes, "a HERD slot must hold the largest value");
constexpr std::uint32_t kResponseHeaderBytes = 8;
constexpr std::uint32_t kUdGrhBytes = 40;
constexpr std::uint32_t kResponseBufferBytes = kUdGrhBytes + kResponseHeaderBytes + kMaxValueBytes;

enum class RequestKind : std::uint8_t { kEmpty, kGet, kPut, kMalformed };
enum ResponseStatus : std::uint8_t { kMiss = 0, kHit = 1, kStored = 2, kRefused = 3 };

struct ParsedRequest {
  KeyHash key{};
  std::uint32_t id = 0;
  std::uint16_t value_bytes = 0;
  const std::uint8_t* value = nullptr;  // inside the slot
};

// Which slot of the request region serves (worker, client, window slot).
struct RegionLayout {
  std::uint32_t workers = 1, clients = 1, window = 1;
  std::uint64_t Slot(std::uint32_t worker, std::uint32_t client, std::uint32_t w) const {
    return (std::uint64_t{worker} * clients + client) * window + w;
  }
  std::uint64_t Bytes() const { return std::uint64_t{workers} * clients * window * kSlotBytes; }
};

// Bytes a request takes on the wire, and its offset within the slot.
inline std::uint32_t RequestBytes(std::uint32_t value_bytes) { return value_bytes + kTrailerBytes; }

// Writes the request ending at `slot_end` (the client's staging copy of its slot).
inline void EncodeRequest(std::uint8_t* slot_end, const KeyHash& key, std::uint32_t id, const std::uint8_t* value,
                          std::uint16_t value_bytes) {
  std::uint8_t* trailer = slot_end - kTrailerBytes;
  if (value_bytes != 0) std::memcpy(trailer - value_bytes, value, value_bytes);
  std::memcpy(trailer, &id, 4);
  std::memcpy(trailer + 4, &value_bytes, 2);
  std::memcpy(trailer + 6, &key, sizeof(KeyHash));
}

// Reads the slot that starts at `slot` (kSlotBytes long). kEmpty when the polled byte is 0.
// Anything else is a request or malformed: LEN beyond kMaxValueBytes, an all-zero keyhash
// below the polled byte, or a key of another worker's partition. Never reads outside the slot.
inline RequestKind ParseRequest(const std::uint8_t* slot, std::uint32_t worker, std::uint32_t workers,
                                ParsedRequest* out) {
  const volatile std::uint8_t* polled = slot + kSlotBytes - 1;
  if (*polled == 0) return RequestKind::kEmpty;
  std::atomic_signal_fence(std::memory_order_acquire);
  const std::uint8_t* trailer = slot + kSlotBytes - kTrailerBytes;
  std::memcpy(&out->id, trailer, 4);
  std::memcpy(&out->value_bytes, trailer + 4, 2);
  std::memcpy(&out->key, trailer + 6, sizeof(KeyHash));
  if (out->value_bytes > kMaxValueBytes) return RequestKind::kMalformed;
  if (out->key.lo == 0 && (out->key.hi << 8) == 0) return RequestKind::kMalformed;
  if (Partition(out->key, workers) != worker) return RequestKind::kMalformed;
  out->value = trailer - out->value_bytes;
  return out->value_bytes == 0 ? RequestKind::kGet : RequestKind::kPut;
}

// Zeroes the polled keyhash and LEN at once, on detection: zeroing after the response
// would let round-robin polling see the request again, or erase the client's next one.
inline void ClearRequest(std::uint8_t* slot) {
  std::memset(slot + kSlotBytes - sizeof(KeyHash) - 2, 0, sizeof(KeyHash) + 2);
}

}  // namespace rdmalab::kv::herd
