// The sequencer's exactly-once check: each client records the integers it was handed in a
// bitmap; after the run the server gathers every client's bitmap through the rendezvous
// (base64 chunks that stay well under the rendezvous' line limit) and counts, for every
// integer in [0, count), how many times it was handed out.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "benchmarks/bench/session.h"

namespace rdmalab::bench {

class IntegerSet {
 public:
  IntegerSet() = default;
  explicit IntegerSet(std::uint64_t count) : words_((count + 63) / 64, 0) {}
  // Records `value` (< count); false when it was recorded before. Hot path: one word update.
  bool Insert(std::uint64_t value) {
    std::uint64_t& word = words_[value >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (value & 63);
    const bool fresh = (word & bit) == 0;
    word |= bit;
    return fresh;
  }
  const std::vector<std::uint64_t>& words() const { return words_; }

 private:
  std::vector<std::uint64_t> words_;
};

// Fails naming the value when a bitmap of `count` bits per process would be too large.
void CheckIntegerCount(std::uint64_t count);

// Client side: publishes the set, how many integers were received and how many of them
// this client got more than once.
void PublishIntegers(Session& session, const IntegerSet& set, std::uint64_t received, std::uint64_t local_duplicates);

// Server side: gathers every client's set and returns
// {"ok", "integers", "duplicates", "missing", "count"}.
nlohmann::json GatherAndCheck(Session& session, std::uint64_t count);

}  // namespace rdmalab::bench
