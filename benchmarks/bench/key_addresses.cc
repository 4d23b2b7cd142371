#include "benchmarks/bench/key_addresses.h"

#include <algorithm>
#include <bit>
#include <unordered_map>
#include <functional>
#include <vector>

#include "benchmarks/bench/common.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

double Zeta(std::uint64_t keys, double theta) {
  // Smallest terms first, so that they are not lost against the large partial sum.
  double sum = 0;
  for (std::uint64_t rank = keys; rank >= 1; --rank) sum += std::pow(static_cast<double>(rank), -theta);
  return sum;
}

std::uint64_t Mix(std::uint64_t x) {
  x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCDull;
  x = (x ^ (x >> 33)) * 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

// How many of the units (lines, pages) that were read take half of the reads, hottest first:
// what a cache of that many entries would need to hit on every other READ.
std::uint64_t UnitsForHalfOfReads(const std::unordered_map<std::uint64_t, std::uint64_t>& reads_of_unit,
                                  std::uint64_t total_reads) {
  std::vector<std::uint64_t> reads;
  reads.reserve(reads_of_unit.size());
  for (const auto& [unit, count] : reads_of_unit) reads.push_back(count);
  std::sort(reads.begin(), reads.end(), std::greater<>());
  std::uint64_t units = 0, covered = 0;
  while (units < reads.size() && 2 * covered < total_reads) covered += reads[units++];
  return units;
}

}  // namespace

KeyAddresses::KeyAddresses(const KeySpace& space) : space_(space) {
  if (space_.keys < 1 || space_.keys > kMaxKeys) {
    Fail("--keys ", space_.keys, " is out of range: valid is 1..", kMaxKeys, " (Zipf sums zeta over every key)");
  }
  if (!(space_.zipf_theta > 0.0 && space_.zipf_theta < 1.0)) {
    Fail("--zipf-theta ", space_.zipf_theta, " is out of range: valid is (0, 1) exclusive (Gray et al.'s "
         "generator needs theta < 1; YCSB's default is 0.99)");
  }
  keys_ = static_cast<double>(space_.keys);
  state_ = Mix(space_.seed);
  if (space_.zipf) {
    const double theta = space_.zipf_theta;
    zeta_n_ = Zeta(space_.keys, theta);
    alpha_ = 1.0 / (1.0 - theta);
    rank1_bound_ = 1.0 + std::pow(0.5, theta);
    // With 1 or 2 keys ZipfRank never reaches the formula that uses eta (its denominator is 0 then).
    if (space_.keys > 2) eta_ = (1.0 - std::pow(2.0 / keys_, 1.0 - theta)) / (1.0 - rank1_bound_ / zeta_n_);
  }
  const unsigned bits = std::max(1u, static_cast<unsigned>(std::bit_width(space_.keys - 1)));
  scatter_mask_ = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  scatter_shift_ = bits / 2 + 1;
  scatter_add_ = Mix(space_.seed ^ 0x5CA7) & scatter_mask_;
  scatter_multiply_[0] = (Mix(space_.seed ^ 0x5CA70001) | 1) & scatter_mask_;
  scatter_multiply_[1] = (Mix(space_.seed ^ 0x5CA70002) | 1) & scatter_mask_;
}

KeyAddresses KeyAddresses::Stream(std::uint64_t stream) const {
  KeyAddresses copy = *this;
  copy.state_ = Mix(space_.seed ^ Mix(stream + 1));
  return copy;
}

double KeyAddresses::HottestKeyProbability() const { return space_.zipf ? 1.0 / zeta_n_ : 1.0 / keys_; }

nlohmann::json SummarizeKeyReads(const KeyAddresses& addresses, std::span<const std::uint64_t> slots,
                                 std::uint32_t value_bytes) {
  std::unordered_map<std::uint64_t, std::uint64_t> reads_of_slot, reads_of_line, reads_of_page;
  std::uint64_t lowest = ~std::uint64_t{0}, highest = 0;
  for (const std::uint64_t slot : slots) {
    ++reads_of_slot[slot];
    const std::uint64_t first = slot * value_bytes, last = first + std::max(value_bytes, 1u) - 1;
    for (std::uint64_t line = first / kCacheLineBytes; line <= last / kCacheLineBytes; ++line) ++reads_of_line[line];
    for (std::uint64_t page = first / kPageBytes; page <= last / kPageBytes; ++page) ++reads_of_page[page];
    lowest = std::min(lowest, first);
    highest = std::max(highest, last);
  }
  std::uint64_t hottest_reads = 0, hottest_slot = 0;
  for (const auto& [slot, reads] : reads_of_slot) {
    if (reads > hottest_reads) hottest_reads = reads, hottest_slot = slot;
  }
  const KeySpace& space = addresses.space();
  const double sampled = static_cast<double>(slots.size());
  return {{"distribution", space.zipf ? "zipf" : "uniform"},
          {"placement", space.clustered ? "clustered" : "unclustered"},
          {"keys", space.keys},
          {"zipf_theta", space.zipf ? nlohmann::json(space.zipf_theta) : nlohmann::json(nullptr)},
          {"value_stride_bytes", value_bytes},
          {"region_bytes", space.keys * value_bytes},
          {"sampled_reads", slots.size()},
          {"distinct_keys", reads_of_slot.size()},
          {"hottest_key_share", slots.empty() ? 0.0 : static_cast<double>(hottest_reads) / sampled},
          {"expected_hottest_key_share", addresses.HottestKeyProbability()},
          {"hottest_slot", hottest_slot},
          {"distinct_cache_lines", reads_of_line.size()},
          {"distinct_pages", reads_of_page.size()},
          {"cache_lines_for_half_of_reads", UnitsForHalfOfReads(reads_of_line, slots.size())},
          {"pages_for_half_of_reads", UnitsForHalfOfReads(reads_of_page, slots.size())},
          {"lowest_offset_bytes", slots.empty() ? 0 : lowest},
          {"highest_offset_bytes", highest}};
}

}  // namespace rdmalab::bench
