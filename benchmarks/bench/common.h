// Pieces every mode shares beyond rdma/: regions sized by --use_hugepages, the byte pattern
// that --validate checks, message slot sizes.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "benchmarks/bench/session.h"
#include "rdma/buffer.h"
#include "rdma/send_ring.h"
#include "rdma/verbs.h"

namespace rdmalab::bench {

constexpr std::uint32_t kCacheLineBytes = 64;
constexpr std::uint32_t kPageBytes = 4096;
constexpr std::uint32_t kUdGrhBytes = 40;

// A registered region of --use_hugepages memory near the device (rdma/session.h).
Region MakeRegion(const Session& session, std::size_t bytes);

// --validate's pattern: message `tag` carries byte (tag * 131 + i * 7 + 1) mod 256 at offset i.
inline std::uint8_t PatternByte(std::uint32_t tag, std::uint32_t offset) {
  return static_cast<std::uint8_t>(tag * 131u + offset * 7u + 1u);
}
void FillPattern(std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag);
// Number of bytes that differ from the pattern.
std::uint64_t PatternMismatches(const std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag);

// Bytes a message slot takes: the payload rounded up to a cache line (at least one).
inline std::uint32_t SlotBytes(std::uint32_t payload) {
  return payload == 0 ? kCacheLineBytes : (payload + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}

// Whole-number division rounding up.
constexpr std::uint64_t DivideRoundUp(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace rdmalab::bench
