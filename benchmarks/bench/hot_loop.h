// What the request/response loops of echo, sgbatch and sequencer share beyond rdma/
// (send rings, RECV posting and serving between barriers live there): the random stream
// of server-side accesses and the deadline in TSC ticks.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/session.h"
#include "rdma/clock.h"
#include "rdma/error.h"
#include "rdma/result_row.h"
#include "rdma/send_ring.h"

namespace rdmalab::bench {

// xorshift64: the random stream of server-side accesses and packet placement.
inline std::uint64_t XorShift(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// The session's deadline as a TSC value, so that hot loops compare without a clock call.
inline std::uint64_t DeadlineTicks(const Session& session) { return session.DeadlineTicks(); }

// The first packet of a forwarded message (sgbatch, --stack udp):
// [t1 client ticks][turnaround t3 - t2 in ns][sequence number].
constexpr std::uint32_t kStampOffset = 0;
constexpr std::uint32_t kTurnaroundOffset = 8;
constexpr std::uint32_t kSeqOffset = 16;
constexpr std::uint32_t kStampHeaderBytes = 24;
static_assert(kStampHeaderBytes >= kSeqOffset + 8, "the header holds three 8-byte fields");

// One-way latency by symmetric timestamps, ((t4 - t1) - (t3 - t2)) / 2: no synchronized clocks needed.
inline std::uint64_t OneWayNs(std::uint64_t round_trip_ns, std::uint64_t turnaround_ns) {
  return round_trip_ns > turnaround_ns ? (round_trip_ns - turnaround_ns) / 2 : 0;
}

// The row of a server that only forwarded or answered: `count` of `what`, its rate belongs to the client.
inline ResultRow ServedRow(std::uint32_t size, const char* what, std::uint64_t count) {
  ResultRow row;
  row.size_bytes = size;
  row.rate_measured = false;
  row.extra[what] = count;
  return row;
}

// The measured interval of a generator loop (echo, sgbatch, --stack udp): a warm-up, then
// `iterations` ops, or `duration_ticks` when iterations is 0. Update() runs after each poll;
// when the interval ends it writes ops and duration into the row, and the loop then drains
// what is still in flight.
class MeasuredInterval {
 public:
  MeasuredInterval(std::uint64_t start, std::uint64_t warmup_ticks, std::uint64_t duration_ticks,
                   std::uint64_t iterations)
      : measure_start_(start + warmup_ticks), duration_ticks_(duration_ticks), iterations_(iterations),
        measuring_(warmup_ticks == 0) {}
  // Completions now count towards the row.
  bool counting() const { return measuring_ && !stopping_; }
  bool stopping() const { return stopping_; }
  void Update(std::uint64_t now, std::uint64_t measured, const TscClock& clock, ResultRow& row) {
    if (!measuring_ && now >= measure_start_) {
      measuring_ = true;
      measure_start_ = now;
    } else if (counting() && (iterations_ != 0 ? measured >= iterations_ : now - measure_start_ >= duration_ticks_)) {
      stopping_ = true;
      row.ops = measured;
      row.duration_s = static_cast<double>(clock.TicksToNs(now - measure_start_)) / 1e9;
    }
  }

 private:
  std::uint64_t measure_start_;
  const std::uint64_t duration_ticks_;
  const std::uint64_t iterations_;
  bool measuring_;
  bool stopping_ = false;
};

}  // namespace rdmalab::bench
