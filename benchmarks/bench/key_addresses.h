// Where a keyed READ goes (tput --distribution, the NoSQL survey's Sec. 4.4 and Fig. 14):
// the server holds `keys` values of SV bytes packed in one array; each READ draws a key by
// its popularity (uniform, or Zipf by rank) and reads that key's value. The survey deploys
// the data "clustered (i.e., in order)" or "unclustered (i.e., random)": clustered, the key
// of popularity rank r sits in slot r, so the hottest values are neighbours and share cache
// lines and pages; unclustered, rank r sits in a pseudo-random slot (a fixed permutation of
// the slots), so hot values are scattered over the whole region.
//
// Next() is the post path's: no allocation, lock or system call; one 64-bit random draw,
// for Zipf one pow(), and for unclustered a few multiplies (about two rounds on average).
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <span>

namespace rdmalab::bench {

// Zeta is summed over every key once per process: ~60 ms for 4 Mi keys, ~4 s at this bound.
constexpr std::uint64_t kMaxKeys = std::uint64_t{1} << 28;

struct KeySpace {
  std::uint64_t keys = 1;
  bool zipf = false;
  double zipf_theta = 0.99;
  bool clustered = true;
  std::uint64_t seed = 1;  // picks the unclustered permutation; every process must agree on it
};

class KeyAddresses {
 public:
  // Fails naming the value when keys is out of 1..kMaxKeys or theta out of (0, 1).
  explicit KeyAddresses(const KeySpace& space);

  // An independent stream of draws over the same key space and permutation (one per thread).
  KeyAddresses Stream(std::uint64_t stream) const;

  // The slot (0..keys-1) of the next READ's value.
  std::uint64_t NextSlot() { return SlotOfRank(space_.zipf ? ZipfRank() : UniformRank()); }

  // The slot holding the value of popularity rank `rank` (0 = hottest; uniform: any key).
  std::uint64_t SlotOfRank(std::uint64_t rank) const {
    if (space_.clustered) return rank;
    // Cycle walking: the permutation of [0, 2^bits) applied until the slot falls below keys
    // permutes [0, keys); 2^bits < 2 * keys, so it takes under two rounds on average.
    std::uint64_t slot = rank;
    do {
      slot = Scatter(slot);
    } while (slot >= space_.keys);
    return slot;
  }

  // Zipf: 1 / zeta(keys, theta), the share of READs that go to the hottest key; uniform: 1 / keys.
  double HottestKeyProbability() const;
  const KeySpace& space() const { return space_; }

 private:
  // SplitMix64 (Steele, Lea and Flood): one add and three multiply-xorshifts a draw.
  std::uint64_t NextRandom() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Lemire's multiply-shift: no division.
  std::uint64_t UniformRank() {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(NextRandom()) * space_.keys) >> 64);
  }
  // Gray et al., "Quickly generating billion-record synthetic databases" (SIGMOD'94), as
  // YCSB's ZipfianGenerator: exact for ranks 0 and 1, the closed-form inverse beyond.
  std::uint64_t ZipfRank() {
    const double u = static_cast<double>(NextRandom() >> 11) * 0x1.0p-53;
    const double uz = u * zeta_n_;
    if (uz < 1.0) return 0;
    if (uz < rank1_bound_) return 1;
    const auto rank = static_cast<std::uint64_t>(keys_ * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return rank < space_.keys ? rank : space_.keys - 1;  // rounding can reach keys itself
  }
  // A bijection of [0, 2^bits): add, then two rounds of xorshift and odd multiply, each
  // invertible modulo 2^bits.
  std::uint64_t Scatter(std::uint64_t x) const {
    x = (x + scatter_add_) & scatter_mask_;
    x ^= x >> scatter_shift_;
    x = (x * scatter_multiply_[0]) & scatter_mask_;
    x ^= x >> scatter_shift_;
    x = (x * scatter_multiply_[1]) & scatter_mask_;
    return x ^ (x >> scatter_shift_);
  }

  KeySpace space_;
  std::uint64_t state_ = 0;
  double keys_ = 1;
  double zeta_n_ = 1;
  double alpha_ = 1;
  double eta_ = 0;
  double rank1_bound_ = 1;  // 1 + 0.5^theta: u * zeta_n below it (and above 1) means rank 1
  std::uint64_t scatter_mask_ = 0;
  std::uint64_t scatter_add_ = 0;
  std::uint64_t scatter_multiply_[2] = {1, 1};
  unsigned scatter_shift_ = 1;
};

// What sampled READs touched, from the slots they read (cold path): distinct keys, the
// hottest key's share beside the generator's promise, distinct cache lines and pages and
// how many of them take half of the READs (the locality that placement decides), and the
// lowest and highest byte read, against the region of keys x value_bytes.
nlohmann::json SummarizeKeyReads(const KeyAddresses& addresses, std::span<const std::uint64_t> slots,
                                 std::uint32_t value_bytes);

}  // namespace rdmalab::bench
