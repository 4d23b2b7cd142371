#include "kv/remote/crc64.h"

#include <array>
#include <cstring>

namespace rdmalab::kv::remote {
namespace {

constexpr std::uint64_t kCrc64Polynomial = 0x42F0E1EBA9EA3693ull;

constexpr std::array<std::uint64_t, 256> Crc64Table() {
  std::array<std::uint64_t, 256> table{};
  for (std::uint64_t i = 0; i < 256; ++i) {
    std::uint64_t crc = i << 56;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & (1ull << 63)) ? (crc << 1) ^ kCrc64Polynomial : crc << 1;
    table[i] = crc;
  }
  return table;
}
constexpr std::array<std::uint64_t, 256> kCrc64Table = Crc64Table();

}  // namespace

std::uint64_t Crc64(const std::uint8_t* bytes, std::size_t length) {
  std::uint64_t crc = 0;
  for (std::size_t i = 0; i < length; ++i) crc = kCrc64Table[((crc >> 56) ^ bytes[i]) & 0xFF] ^ (crc << 8);
  return crc;
}

bool ExtentChecks(const std::uint8_t* extent, std::uint32_t value_bytes) {
  std::uint64_t crc = 0;
  std::memcpy(&crc, extent + value_bytes, kCrcBytes);
  return crc == Crc64(extent, value_bytes);
}

void SealExtent(std::uint8_t* extent, std::uint32_t value_bytes) {
  const std::uint64_t crc = Crc64(extent, value_bytes);
  std::memcpy(extent + value_bytes, &crc, kCrcBytes);
}

}  // namespace rdmalab::kv::remote
