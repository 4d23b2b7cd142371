// CRC-64/ECMA-182 (polynomial 0x42F0E1EBA9EA3693, MSB first, no reflection, init and xorout
// 0), table-driven: the checksum the full stores seal their buckets and extents with
// (Pilaf's self-verifying entries; FaRM full's buckets, kv/remote/hopscotch.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmalab::kv::remote {

constexpr std::uint32_t kCrcBytes = 8;

std::uint64_t Crc64(const std::uint8_t* bytes, std::size_t length);

// A sealed extent: `value_bytes` of value, then their CRC64. Whether one checks; sealing one.
bool ExtentChecks(const std::uint8_t* extent, std::uint32_t value_bytes);
void SealExtent(std::uint8_t* extent, std::uint32_t value_bytes);

}  // namespace rdmalab::kv::remote
