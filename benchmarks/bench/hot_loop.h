// What the request/response loops of echo, sgbatch and sequencer share: a send queue
// under selective signaling (WRs numbered in posting order, one in `signal_every`
// signaled, a signaled completion retiring every WR up to it, as WRs of one QP complete
// in order), RECV posting, the deadline in TSC ticks, and the server's serving threads
// that run between the start and done barriers. Hot-path pieces allocate nothing and
// take no lock; their only calls are the provider's post/poll.
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

namespace rdmalab::bench {

struct SendRing {
  ibv_qp* qp = nullptr;
  std::uint32_t id = 0;            // index among the rings sharing one send CQ
  std::uint32_t depth = 1;         // the QP's send depth
  std::uint32_t signal_every = 1;  // --cq-mod
  std::uint64_t posted = 0;
  std::uint64_t retired = 0;

  // Room for `count` more WRs. Progress needs depth >= signal_every + count - 1, so that a
  // full queue always holds a signaled WR whose completion frees it (checked at setup).
  bool HasRoom(std::uint32_t count) const { return posted - retired + count <= depth; }
  // Whether the WR posted as number `seq` (0-based) is signaled.
  bool Signaled(std::uint64_t seq) const { return (seq + 1) % signal_every == 0; }
  std::uint64_t WrId(std::uint64_t seq) const { return (std::uint64_t{id} << 48) | (seq + 1); }
  std::uint64_t Outstanding() const { return posted - retired; }
};

// Polls a send CQ that `rings` (indexed by SendRing::id) share and retires what its
// completions cover. Returns the number of WRs retired. Fails on an error completion.
inline std::uint64_t ReapSends(ibv_cq* cq, SendRing* rings, const char* while_doing) {
  constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 48) - 1;
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(cq, kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on a send CQ while ", while_doing);
  std::uint64_t retired = 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, while_doing);
    SendRing& ring = rings[wc.wr_id >> 48];
    const std::uint64_t upto = wc.wr_id & kSeqMask;
    if (upto > ring.retired) {
      retired += upto - ring.retired;
      ring.retired = upto;
    }
  }
  return retired;
}

// Posts one RECV; fails naming `what` and the error. Every caller re-posts a RECV whose
// completion it has consumed, so the queue always has room: ENOMEM is an error here.
inline void PostRecvOrFail(ibv_qp* qp, ibv_recv_wr* wr, const char* what) {
  ibv_recv_wr* bad = nullptr;
  const int error_number = ibv_post_recv(qp, wr, &bad);
  if (error_number != 0) FailErrno(std::string("ibv_post_recv (") + what + ")", error_number);
}

// xorshift64: the random stream of server-side accesses and packet placement.
inline std::uint64_t XorShift(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// The session's deadline as a TSC value, so that hot loops compare without a clock call.
inline std::uint64_t DeadlineTicks(const Session& session) {
  const std::uint64_t now = MonotonicNs();
  const std::uint64_t left = session.deadline_ns() > now ? session.deadline_ns() - now : 0;
  return session.clock().Now() + session.clock().NsToTicks(left);
}

// Server side of one measured row: `serve(t)` runs on `threads` pinned threads while this
// process passes the barriers "start<suffix>" and "done<suffix>"; then `stop` is raised
// and the threads are joined. A serving thread's failure is rethrown in preference to the
// barrier timeout it caused.
inline void ServeBetweenBarriers(Session& session, int threads, std::atomic<bool>& stop, const std::string& suffix,
                                 const std::function<void(int)>& serve) {
  stop.store(false);
  std::exception_ptr error;
  std::thread runner([&] {
    try {
      RunPinnedThreads(session, threads, serve);
    } catch (...) {
      error = std::current_exception();
    }
  });
  const auto finish = [&] {
    stop.store(true);
    runner.join();
  };
  try {
    session.Barrier("start" + suffix);
    session.Barrier("done" + suffix);
  } catch (...) {
    finish();
    if (error) std::rethrow_exception(error);
    throw;
  }
  finish();
  if (error) std::rethrow_exception(error);
}

}  // namespace rdmalab::bench
