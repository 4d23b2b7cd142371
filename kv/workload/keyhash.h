// Keys as every kv/ system sees them: a 16-byte keyhash derived from a key index, and a
// printable key text of the same key for the TCP stores (memcached, Redis).
//
// Which bits serve whom, so that no two uses correlate (all drawn from independent mixes):
//   lo bits  0..31  MICA bucket index (kv/cache/mica.h, at most 2^32 buckets)
//   lo bits 48..63  MICA slot tag
//   hi bits  0..31  Partition(): the EREW worker that owns the key
//   hi bits 56..63  byte 15 in memory, the byte HERD's server polls: never zero
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

namespace rdmalab::kv {

struct KeyHash {
  std::uint64_t lo, hi;
};
static_assert(sizeof(KeyHash) == 16, "HERD's request slot and MICA's log entry hold exactly 16 key bytes");
static_assert(std::is_standard_layout_v<KeyHash> && std::is_trivially_copyable_v<KeyHash>);
// Byte 15 is the top byte of hi only on little-endian hosts (x86-64, AArch64 Linux).
static_assert(std::endian::native == std::endian::little, "KeyHash's polled byte assumes little-endian");

inline constexpr int kPolledByteShift = 56;

inline bool operator==(const KeyHash& a, const KeyHash& b) { return a.lo == b.lo && a.hi == b.hi; }

// Two different 64-bit finalizers (splitmix64's and MurmurHash3's fmix64) over
// differently salted inputs: both are bijections, so lo alone already tells every key
// index apart and no two key indices share a keyhash.
inline constexpr std::uint64_t SplitMix64Mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline constexpr std::uint64_t MurmurFmix64(std::uint64_t x) {
  x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
  x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

inline constexpr KeyHash KeyHashOf(std::uint64_t key_index) {
  // The salts keep key index 0 away from the finalizers' fixed point 0 -> 0.
  const std::uint64_t lo = SplitMix64Mix(key_index + 0x9e3779b97f4a7c15ull);
  std::uint64_t hi = MurmurFmix64(key_index ^ 0x6a09e667f3bcc909ull);
  // Setting one bit only when the byte is zero keeps the other 255 values equally likely.
  if ((hi >> kPolledByteShift) == 0) hi |= std::uint64_t{1} << kPolledByteShift;
  return KeyHash{lo, hi};
}

// The EREW worker (0..partitions-1) that owns a key; a multiply-shift, not a modulo, so
// that the hot path has no division. partitions must be >= 1.
inline constexpr std::uint32_t Partition(const KeyHash& key, std::uint32_t partitions) {
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.hi)) * partitions) >> 32);
}

// Printable key text: lowercase hex digits of the keyhash (lo first, then hi, then more
// mixes of both for keys longer than 32 characters). Distinct for distinct key indices
// when key_bytes >= 16 (the hex of lo, a bijection); shorter keys are prefixes of it and
// may collide. WriteKeyText fills out[0..key_bytes) without allocating, no terminator.
void WriteKeyText(std::uint64_t key_index, std::uint32_t key_bytes, char* out);
std::string KeyText(std::uint64_t key_index, std::uint32_t key_bytes = 16);

}  // namespace rdmalab::kv
