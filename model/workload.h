// Key popularity of the client workloads (README "Throughput": Zipf keys): how the requests of a
// uniform or Zipf key distribution fall on the workers of a store that partitions its keys
// by keyhash (HERD and MICA are EREW: each key belongs to one worker).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rdmalab::model {

// Fraction of all requests each of `workers` partitions receives; sums to 1. Zipf(theta)
// ranks keys 1..keys with probability ~ 1/rank^theta and hashes each rank to a worker.
std::vector<double> WorkerShares(const std::string& distribution, double zipf_theta, uint64_t keys,
                                 uint32_t workers);

// Share of the requests that go to the `hottest` most popular of `keys` keys.
double HottestKeysShare(const std::string& distribution, double zipf_theta, uint64_t keys, uint64_t hottest);

// Share of key-addressed accesses whose page translation misses a NIC cache of
// `cache_entries` pages of `page_B` bytes (nosql Sec. 4.4): values of `value_B` bytes laid out
// in key-popularity order (clustered) or each on a random page (unclustered).
double TranslationMissRate(const std::string& distribution, double zipf_theta, uint64_t keys, uint32_t value_B,
                           bool clustered, uint32_t cache_entries, uint32_t page_B);

}  // namespace rdmalab::model
