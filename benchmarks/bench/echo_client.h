// An ECHO client's own work per answer beside its verbs: which request each window slot
// holds and when it left, the answer's latency sample inside the measured interval, and the
// count of requests in flight. rdmalab-bench's echo clients run it around their posts and
// polls; rdmalab-micro-bench-core's BM_EchoClientAnswer runs the same code with the network
// taken out, which `run_all.py calibrate` reads as the model's cpu.echo_client_answer_ns (the
// model charges it to the clients of a host engine).
// Hot path: no allocation, lock or syscall.
#pragma once

#include <cstdint>
#include <vector>

#include "rdma/clock.h"
#include "rdma/histogram.h"

namespace rdmalab::bench {

class EchoClientWindow {
 public:
  EchoClientWindow() = default;
  // `window` requests in flight at most, one per slot; every counted answer's round trip goes
  // into `latency` (kept by the caller).
  EchoClientWindow(std::uint32_t window, const TscClock& clock, LatencyHistogram& latency)
      : clock_(&clock), latency_(&latency), sequence_(window, kFree), posted_at_(window, 0) {}

  // The request numbered `seq` leaves on `slot` at `now`.
  void Post(std::uint32_t slot, std::uint64_t seq, std::uint64_t now) {
    sequence_[slot] = seq;
    posted_at_[slot] = now;
    ++in_flight_;
  }
  bool Outstanding(std::uint32_t slot) const { return sequence_[slot] != kFree; }
  std::uint64_t Sequence(std::uint32_t slot) const { return sequence_[slot]; }

  // The answer to `slot`'s request, seen at `now`; `counting`: inside the measured interval.
  void Answer(std::uint32_t slot, std::uint64_t now, bool counting) {
    if (counting) {
      latency_->Record(clock_->TicksToNs(now - posted_at_[slot]));
      ++measured_;
    }
    sequence_[slot] = kFree;
    --in_flight_;
  }

  std::uint64_t in_flight() const { return in_flight_; }
  std::uint64_t measured() const { return measured_; }

 private:
  static constexpr std::uint64_t kFree = ~std::uint64_t{0};
  const TscClock* clock_ = nullptr;
  LatencyHistogram* latency_ = nullptr;
  std::vector<std::uint64_t> sequence_;  // per slot: the request's number, or kFree
  std::vector<std::uint64_t> posted_at_;
  std::uint64_t in_flight_ = 0;
  std::uint64_t measured_ = 0;
};

}  // namespace rdmalab::bench
