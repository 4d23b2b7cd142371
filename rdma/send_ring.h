// Send queues under selective signaling and RECV posting, as every request/response loop
// of rdmalab-bench and rdmalab-kv runs them: WRs numbered in posting order, one in
// `signal_every` signaled, a signaled completion retiring every WR up to it (WRs of one QP
// complete in order). Hot-path pieces allocate nothing and take no lock; their only calls
// are the provider's post/poll.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "rdma/error.h"

namespace rdmalab {

constexpr int kPollBatch = 16;

// A failed work completion, said the way a user can act on it. Cold path.
[[noreturn]] void CompletionFailed(const ibv_wc& completion, const char* while_doing);

struct SendRing {
  ibv_qp* qp = nullptr;
  std::uint32_t id = 0;            // index among the rings sharing one send CQ
  std::uint32_t depth = 1;         // the QP's send depth
  std::uint32_t signal_every = 1;  // --cq-mod
  std::uint64_t posted = 0;
  std::uint64_t retired = 0;
  std::uint64_t next_signaled = 0;  // SignalInOrder: WRs posted (seq + 1) at the last signaled one

  // Room for `count` more WRs. Progress needs depth >= signal_every + count - 1, so that a
  // full queue always holds a signaled WR whose completion frees it (checked at setup).
  bool HasRoom(std::uint32_t count) const { return posted - retired + count <= depth; }
  // Whether the WR posted as number `seq` (0-based) is signaled.
  bool Signaled(std::uint64_t seq) const { return (seq + 1) % signal_every == 0; }
  // The same for WRs asked about once each, in posting order, without Signaled's division
  // (tens of cycles on a hot path that posts one WR per request).
  bool SignalInOrder(std::uint64_t seq) {
    if (seq + 1 != next_signaled + signal_every) return false;
    next_signaled += signal_every;
    return true;
  }
  std::uint64_t WrId(std::uint64_t seq) const { return (std::uint64_t{id} << 48) | (seq + 1); }
  std::uint64_t Outstanding() const { return posted - retired; }
};

// Posts `wr`, one WR with its SGEs, opcode, address and flags set, as the ring's next: it
// takes the ring's id and, when its number says so, the signaled flag. Every WR of a ring
// that uses it goes through it (SignalInOrder counts them). Fails naming `what`. The caller
// has made room (HasRoom).
inline void PostOnRing(SendRing& ring, ibv_send_wr& wr, const char* what) {
  wr.wr_id = ring.WrId(ring.posted);
  if (ring.SignalInOrder(ring.posted)) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring.qp, &wr, &bad);
  if (error_number != 0) Fail("ibv_post_send (", what, "): ", std::strerror(error_number));
  ++ring.posted;
}

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

}  // namespace rdmalab
