#include "model/workload.h"

#include <algorithm>
#include <cmath>

namespace rdmalab::model {
namespace {

// The hottest keys are hashed one by one; the rest carry so little probability each that
// their hashing spreads them evenly (their mass per worker deviates by ~1/sqrt(keys)).
constexpr uint64_t kExactKeys = 1 << 16;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// sum over rank = first..last of rank^-theta, by the midpoint integral (exact enough for
// ranks beyond kExactKeys, where the summand barely changes between neighbours).
double ZipfTailMass(uint64_t first, uint64_t last, double theta) {
  if (first > last) return 0;
  double a = static_cast<double>(first) - 0.5, b = static_cast<double>(last) + 0.5;
  if (std::abs(1 - theta) < 1e-9) return std::log(b / a);
  return (std::pow(b, 1 - theta) - std::pow(a, 1 - theta)) / (1 - theta);
}

// Sum of rank^-theta over ranks 1..n: exact for the hottest ranks, the midpoint integral beyond.
double ZipfMass(uint64_t n, double theta) {
  uint64_t exact = std::min(n, kExactKeys);
  double sum = 0;
  for (uint64_t rank = 1; rank <= exact; ++rank) sum += std::pow(static_cast<double>(rank), -theta);
  return sum + ZipfTailMass(exact + 1, n, theta);
}

}  // namespace

double HottestKeysShare(const std::string& distribution, double zipf_theta, uint64_t keys, uint64_t hottest) {
  hottest = std::min(hottest, keys);
  if (keys == 0) return 1;
  if (distribution != "zipf") return static_cast<double>(hottest) / keys;
  return ZipfMass(hottest, zipf_theta) / ZipfMass(keys, zipf_theta);
}

double TranslationMissRate(const std::string& distribution, double zipf_theta, uint64_t keys, uint32_t value_B,
                           bool clustered, uint32_t cache_entries, uint32_t page_B) {
  double pages_per_value = std::ceil(static_cast<double>(std::max(value_B, 1u)) / page_B);
  double values_per_page = std::max(1.0, std::floor(static_cast<double>(page_B) / std::max(value_B, 1u)));
  double pages = std::ceil(keys / values_per_page) * pages_per_value;
  if (pages <= cache_entries) return 0;
  double resident = cache_entries / pages;  // share of pages the cache holds
  if (distribution != "zipf") return 1 - resident;  // every page equally likely, wherever values lie
  // An LRU keeps the hottest pages. Clustered: the hottest keys share pages, so the cache
  // covers values_per_page hot keys per entry; unclustered: each hot key has a page of its
  // own, and the other keys hit only by sharing a page with a hot one.
  auto cached_keys = static_cast<uint64_t>(cache_entries / pages_per_value * (clustered ? values_per_page : 1));
  double hot = HottestKeysShare(distribution, zipf_theta, keys, cached_keys);
  double hit = clustered ? hot : hot + (1 - hot) * resident;
  return 1 - hit;
}

std::vector<double> WorkerShares(const std::string& distribution, double zipf_theta, uint64_t keys,
                                 uint32_t workers) {
  workers = std::max(1u, workers);
  std::vector<double> share(workers, 1.0 / workers);
  if (distribution != "zipf") return share;
  std::fill(share.begin(), share.end(), 0.0);
  uint64_t exact = std::min(keys, kExactKeys);
  double total = 0;
  for (uint64_t rank = 1; rank <= exact; ++rank) {
    double p = std::pow(static_cast<double>(rank), -zipf_theta);
    share[SplitMix64(rank) % workers] += p;
    total += p;
  }
  double tail = ZipfTailMass(exact + 1, keys, zipf_theta);
  for (double& s : share) s += tail / workers;
  total += tail;
  for (double& s : share) s /= total;
  return share;
}

}  // namespace rdmalab::model
