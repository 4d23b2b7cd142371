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

}  // namespace rdmalab::bench
