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

}  // namespace

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
