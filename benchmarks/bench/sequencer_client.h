// A sequencer client's own work per answer beside its verbs: the window slot a request leaves
// on and when, the answer's latency sample, the exactly-once bitmap, and the count of requests
// still in flight. rdmalab-bench's sequencer clients run it around their posts and polls;
// rdmalab-micro-bench-core's BM_SequencerClientAnswer runs the same code with the network
// taken out, which `run_all.py calibrate` reads as the model's
// cpu.sequencer_client_answer_ns (the model charges it to the clients of a host engine).
// Hot path: no allocation (the free list's capacity is the window), lock or syscall.
#pragma once

#include <cstdint>
#include <vector>

#include "benchmarks/bench/sequencer_check.h"
#include "rdma/clock.h"
#include "rdma/histogram.h"

namespace rdmalab::bench {

struct SequencerClientStats {
  std::uint64_t received = 0;
  std::uint64_t local_duplicates = 0;
  std::uint64_t exhausted = 0;  // answers at or past --count
  std::uint64_t header_only = 0;
  std::uint64_t regular = 0;
};

class SequencerClientWindow {
 public:
  SequencerClientWindow() = default;
  // `window` requests in flight at most; integers below `count` are recorded; every answer's
  // round trip goes into `latency` (kept by the caller).
  SequencerClientWindow(std::uint32_t window, std::uint64_t count, const TscClock& clock, LatencyHistogram& latency)
      : window_(window), count_(count), clock_(&clock), latency_(&latency), received_(count), posted_at_(window, 0) {
    free_.reserve(window);
    for (std::uint32_t slot = window; slot-- > 0;) free_.push_back(slot);
  }

  // Whether another request may leave: the window has room and the hand-out is not over.
  bool CanPost() const { return !exhausted_ && in_flight_ < window_; }
  bool Done() const { return exhausted_ && in_flight_ == 0; }
  std::uint64_t in_flight() const { return in_flight_; }

  // HERD and atomics: the free window slot a request leaving at `now` takes.
  std::uint32_t TakeSlot(std::uint64_t now) {
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    posted_at_[slot] = now;
    ++in_flight_;
    return slot;
  }
  // Spec-S0: a request that takes no slot (its worker's answers come back in request order).
  void Posted() { ++in_flight_; }

  // HERD and atomics: the answer to `slot`'s request, carrying `value`, seen at `now`.
  void AnswerSlot(std::uint32_t slot, std::uint64_t value, std::uint64_t now) {
    Answer(value, now - posted_at_[slot]);
    free_.push_back(slot);
  }
  // Any design: an answer carrying `value` whose request left `ticks` ago.
  void Answer(std::uint64_t value, std::uint64_t ticks) {
    latency_->Record(clock_->TicksToNs(ticks));
    --in_flight_;
    if (value >= count_) {
      exhausted_ = true;
      ++stats_.exhausted;
    } else {
      stats_.local_duplicates += received_.Insert(value) ? 0 : 1;
      ++stats_.received;
    }
  }

  SequencerClientStats& stats() { return stats_; }
  const SequencerClientStats& stats() const { return stats_; }
  const IntegerSet& received() const { return received_; }

 private:
  std::uint32_t window_ = 0;
  std::uint64_t count_ = 0;
  const TscClock* clock_ = nullptr;
  LatencyHistogram* latency_ = nullptr;
  IntegerSet received_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint64_t> posted_at_;
  std::uint64_t in_flight_ = 0;
  bool exhausted_ = false;
  SequencerClientStats stats_;
};

}  // namespace rdmalab::bench
