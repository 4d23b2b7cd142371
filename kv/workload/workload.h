// Client workloads (kv/README.md): which key each operation touches, GET or
// PUT, and the value a PUT writes, self-describing so that a client can check every GET.
#pragma once

#include <cstdint>

namespace rdmalab::kv {

inline constexpr std::uint32_t kMaxWorkloadValueBytes = 1000;  // HERD's request slot limit
// Zeta is summed over every key once per (keys, theta): 0.27 s for 8 Mi keys here, so this
// bound costs ~35 s.
inline constexpr std::uint64_t kMaxZipfKeys = std::uint64_t{1} << 30;

struct WorkloadConfig {
  std::uint64_t keys = 1 << 20;
  double get_fraction = 0.95;
  bool zipf = false;
  double zipf_theta = 0.99;
  std::uint32_t value_bytes = 32;
  // Length of KeyText for the TCP stores; HERD's keys are always 16-byte keyhashes.
  std::uint32_t key_bytes = 16;
  std::uint64_t seed = 1;
};
// From 16, key texts of distinct keys differ (keyhash.h); memcached refuses keys above 250.
inline constexpr std::uint32_t kMinKeyTextBytes = 16;
inline constexpr std::uint32_t kMaxKeyTextBytes = 250;

// Throws std::invalid_argument naming the bad field, its value and the valid range.
void Check(const WorkloadConfig& config);

struct Op {
  bool get;
  std::uint64_t key_index;
};

// One client's stream of operations. Streams of the same config and seed but different
// `stream` numbers are independent; all of them agree on which keys are popular, since
// Zipf ranks map to key indices by a fixed scramble. Next() allocates nothing, locks
// nothing. Zipf follows YCSB's ZipfianGenerator (Gray et al., "Quickly generating
// billion-record synthetic databases", 1994) with YCSB's scrambling: the rank is hashed,
// modulo keys, so the hottest key is not key 0 and hot keys are not neighbours (as in
// YCSB, a few ranks can land on the same key).
class Workload {
 public:
  Workload(const WorkloadConfig& config, std::uint64_t stream);

  Op Next() {
    const std::uint64_t r = NextRandom();
    if (one_draw_) {
      // Lemire's multiply-shift picks the key from the product's high word; given the key, the
      // low word runs over [0, 2^64) in steps of `keys` (at most 2^32), so it decides GET or PUT
      // to within 2^-32 of get_fraction, without a second draw.
      const unsigned __int128 product = static_cast<unsigned __int128>(r) * config_.keys;
      return Op{IsGet(static_cast<std::uint64_t>(product)), static_cast<std::uint64_t>(product >> 64)};
    }
    const bool get = IsGet(r);
    return Op{get, config_.zipf ? ZipfKey() : UniformKey()};
  }

  const WorkloadConfig& config() const { return config_; }
  // Zipf: probability of the hottest key, 1 / zeta(keys, theta); uniform: 1 / keys.
  double HottestKeyProbability() const;
  // The key index that Zipf rank `rank` (0 = hottest) maps to.
  std::uint64_t KeyOfRank(std::uint64_t rank) const;

 private:
  // xoshiro256** (Blackman and Vigna): 4 words of state, ~1 ns a draw.
  std::uint64_t NextRandom() {
    const std::uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }
  static std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  // The top 53 bits as a double in [0, 1).
  static double UniformUnit(std::uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }
  // UniformUnit(r) < get_fraction, in integers.
  bool IsGet(std::uint64_t r) const { return (r >> 11) < get_below_; }
  // Lemire's multiply-shift: no division, bias below 2^-64 * keys.
  std::uint64_t UniformKey() {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(NextRandom()) * config_.keys) >> 64);
  }
  std::uint64_t ZipfKey();

  WorkloadConfig config_;
  std::uint64_t state_[4];
  std::uint64_t get_below_ = 0;  // ceil(get_fraction * 2^53)
  bool one_draw_ = false;        // uniform over at most 2^32 keys: one draw an operation
  // Gray et al.'s constants, computed once per (keys, theta).
  double zeta_n_ = 1;
  double alpha_ = 1;
  double eta_ = 0;
  double zeta2_bound_ = 1;  // 1 + 0.5^theta: u * zeta_n below it means rank 1
};

// Values. A value of >= 12 bytes starts with three little-endian 32-bit words: a key word,
// the writer and the version; the rest is a pattern derived from the full key index, the
// writer and the version. The key word is the key index's low 32 bits XOR writer XOR
// version XOR a constant: a change of any one byte of the 12 then shows as a key mismatch,
// and an all-zero buffer does not pass for key 0. A value of fewer than 12 bytes holds the
// first `bytes` bytes of a header whose key word is the key's low 32 bits XOR the constant
// only (the checker cannot know a truncated writer and version), and no pattern.
//
// What CheckValue detects:
//   >= 13 bytes: a value of another key whose index differs in the low 32 bits (kWrongKey:
//     the decoded key differs and that key's pattern matches), any single changed byte and
//     almost any larger damage (kCorrupt), a length mismatch (kCorrupt).
//   12 bytes: another key's value when the low 32 bits of the indices differ, and any one
//     changed byte; both read as kWrongKey (no pattern tells them apart). Changes of several
//     bytes that cancel in the XOR pass.
//   1..11 bytes: another key's value only when the low 8*min(bytes, 4) bits of the key
//     indices differ (keys 2^8 apart collide in a 1-byte value); a change of the key bytes
//     (kWrongKey); nothing about writer and version, which are truncated or absent (StampOf
//     returns what fits, missing bytes as 0); a length mismatch (kCorrupt).
inline constexpr std::uint32_t kValueHeaderBytes = 12;
inline constexpr std::uint32_t kPreloadWriter = 0xFFFFFFFF;
inline constexpr std::uint32_t kPreloadVersion = 0;

void FillValue(std::uint64_t key_index, std::uint32_t writer, std::uint32_t version, std::uint8_t* out,
               std::uint32_t bytes);

enum class ValueCheck { kOk, kWrongKey, kCorrupt };
ValueCheck CheckValue(std::uint64_t key_index, const std::uint8_t* value, std::uint32_t bytes,
                      std::uint32_t expected_bytes);

struct ValueStamp {
  std::uint32_t writer, version;
};
ValueStamp StampOf(const std::uint8_t* value, std::uint32_t bytes);

}  // namespace rdmalab::kv
