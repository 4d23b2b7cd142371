// The generator side of a datagram forwarding loop (--stack udp and raw): sequence numbers
// and timestamps written into each datagram, and for each one that comes back its one-way
// latency and what it says about the ones that did not. Nothing resends a datagram, so one
// overtaken by a later one, or not back after kLossTimeoutMs of silence, counts as lost; one
// that comes back after that counts as late. No allocation, lock or system call.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/modes.h"

namespace rdmalab::bench {

// The measured interval of a generator (--warmup, then -n datagrams or -D seconds; lat's
// default -n 1000, tput's 100000), and its row: one-way latency of `payload_bytes` datagrams.
inline MeasuredInterval DatagramInterval(const Options& o, const TscClock& clock, std::uint64_t now) {
  const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o.duration_s * 1e9));
  const std::uint64_t iterations = o.duration_s > 0 ? 0 : IterationsOrDefault(o, o.mode == "lat" ? 1000 : 100'000);
  return MeasuredInterval(now, warmup_ticks, duration_ticks, iterations);
}

inline ResultRow OneWayRow(std::uint32_t payload_bytes) { return LatencyRow(payload_bytes, payload_bytes, "one_way"); }

// The run of one point: the server forwards between the start and done barriers and reports
// how many datagrams it forwarded; the client generates and reports the row.
template <typename Forward, typename Generate>
ResultRow ForwardOrGenerate(Session& session, std::atomic<bool>& stop, std::uint32_t payload_bytes,
                            const std::uint64_t& forwarded, Forward forward, Generate generate) {
  session.Barrier("connected");
  if (session.is_server()) {
    ServeBetweenBarriers(session, 1, stop, "/0", [&](int) { forward(); });
    return ServedRow(payload_bytes, "forwarded_packets", forwarded);
  }
  session.Barrier("start/0");
  ResultRow row = generate();
  session.Barrier("done/0");
  return row;
}

class DatagramWindow {
 public:
  static constexpr int kLossTimeoutMs = 20;

  DatagramWindow(const TscClock& clock, std::uint64_t window, std::uint64_t now)
      : clock_(clock), window_(window), loss_ticks_(clock.NsToTicks(std::uint64_t{kLossTimeoutMs} * 1'000'000)),
        last_arrival_(now) {}

  // Room in the window for `count` more datagrams.
  bool HasRoom(std::uint64_t count) const { return next_seq_ + count <= window_start_ + window_; }
  bool Drained() const { return window_start_ >= next_seq_; }
  std::uint64_t next_seq() const { return next_seq_; }

  // Writes the next sequence number and the send time into a datagram's first bytes.
  void Stamp(std::uint8_t* datagram, std::uint64_t t1) {
    const std::uint64_t seq = next_seq_++;
    std::memcpy(datagram + kSeqOffset, &seq, sizeof(seq));
    std::memcpy(datagram + kStampOffset, &t1, sizeof(t1));
  }

  // A datagram came back at `now`; its one-way latency goes to `latency` while `counting`.
  // Returns whether it was counted.
  bool Returned(const std::uint8_t* datagram, std::uint64_t now, bool counting, LatencyHistogram& latency) {
    std::uint64_t t1, turnaround_ns, seq;
    std::memcpy(&t1, datagram + kStampOffset, sizeof(t1));
    std::memcpy(&turnaround_ns, datagram + kTurnaroundOffset, sizeof(turnaround_ns));
    std::memcpy(&seq, datagram + kSeqOffset, sizeof(seq));
    last_arrival_ = now;
    if (seq < window_start_) {  // given up for lost, then came back
      ++late_;
      return false;
    }
    lost_ += seq - window_start_;  // overtaken by this one
    window_start_ = seq + 1;
    if (counting) latency.Record(OneWayNs(clock_.TicksToNs(now - t1), turnaround_ns));
    return counting;
  }

  // Nothing came back for kLossTimeoutMs: what is still out was dropped, the window moves on.
  void GiveUpIfSilent(std::uint64_t now) {
    if (now - last_arrival_ >= loss_ticks_ && window_start_ < next_seq_) {
      lost_ += next_seq_ - window_start_;
      window_start_ = next_seq_;
      last_arrival_ = now;
    }
  }

  // Into the row: which stack generated the datagrams, in batches of how many, and how many
  // were lost or late.
  void Report(ResultRow& row, const char* stack, int io_batch) const {
    row.extra["stack"] = stack;
    row.extra["io_batch"] = io_batch;
    row.extra["lost_packets"] = lost_;
    row.extra["late_packets"] = late_;
  }

 private:
  const TscClock& clock_;
  const std::uint64_t window_;
  const std::uint64_t loss_ticks_;
  std::uint64_t last_arrival_;
  std::uint64_t next_seq_ = 0, window_start_ = 0, lost_ = 0, late_ = 0;
};

}  // namespace rdmalab::bench
