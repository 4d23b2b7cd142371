// sequencer's server loops: HERD workers poll their request slots, Spec-S0 workers their
// RECV CQ; both claim integers from the shared counter and answer by UD SEND. They allocate
// nothing in the loop, take no lock and make no syscall beyond the provider's post/poll.
#include <cstring>

#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/sequencer/run.h"
#include "rdma/error.h"

namespace rdmalab::bench::sequencer {

// Claims `count` integers with one atomic add and answers the claims in one linked post
// (a single claim is one plain post: WQE-by-MMIO on a real NIC).
void SequencerRun::Answer(Worker& worker, std::size_t count) {
  const std::uint64_t first = counter_.fetch_add(count, std::memory_order_relaxed);
  const std::size_t queue = design_ == Design::kHerdMq ? worker.batches % kMultiQueueQps : 0;
  SendRing& ring = worker.rings[queue];
  const auto needed = static_cast<std::uint32_t>(count);
  while (!ring.HasRoom(needed)) ReapSends(worker.send_cq.get(), worker.rings.data(), "sending sequencer responses");
  auto* values = reinterpret_cast<std::uint64_t*>(worker.values.data()) + std::uint64_t{queue} * ring.depth;
  for (std::size_t i = 0; i < count; ++i) {
    const Claim& claim = worker.claims[i];
    const std::uint64_t value = first + i;
    const std::uint64_t seq = ring.posted + i;
    std::uint64_t& payload = values[seq % ring.depth];
    payload = value;
    ibv_send_wr& wr = worker.wrs[i];
    wr = {};
    wr.wr_id = ring.WrId(seq);
    wr.next = i + 1 < count ? &worker.wrs[i + 1] : nullptr;
    wr.wr.ud = {ahs_[claim.client].get(), response_qpns_[claim.client][&worker - workers_.data()], kUdQkey};
    worker.sges[i] = {reinterpret_cast<std::uintptr_t>(&payload), kIntegerBytes, worker.values.mr->lkey};
    const bool header_only = design_ == Design::kSpec && (value >> 32) == claim.tag;
    if (header_only) {
      wr.opcode = IBV_WR_SEND_WITH_IMM;
      wr.imm_data = static_cast<std::uint32_t>(value);
      ++worker.header_only;
    } else {
      wr.opcode = IsHerd(design_) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
      wr.imm_data = claim.tag;  // HERD: the client's window slot
      wr.sg_list = &worker.sges[i];
      wr.num_sge = 1;
    }
    wr.send_flags = (ring.Signaled(seq) ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                    (kIntegerBytes <= inline_bytes_ ? unsigned{IBV_SEND_INLINE} : 0u);
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring.qp, worker.wrs.data(), &bad);
  if (error_number != 0) Fail("ibv_post_send of ", count, " sequencer responses: ", std::strerror(error_number));
  ring.posted += count;
  ++worker.batches;
  worker.handed_out += count;
}

void SequencerRun::ServeHerd(Worker& worker, std::uint32_t index) {
  const std::uint64_t deadline = DeadlineTicks(session_);
  const std::size_t batch = worker.claims.size();
  std::uint8_t* chunk = exposed_.data() + std::uint64_t{index} * clients_count_ * window_ * kRequestSlotBytes;
  for (std::uint64_t spins = 1;; ++spins) {
    std::size_t found = 0;
    for (std::uint32_t client = 0; client < clients_count_; ++client) {
      for (std::uint32_t slot = 0; slot < window_; ++slot) {
        volatile std::uint8_t* last =
            chunk + (std::uint64_t{client} * window_ + slot) * kRequestSlotBytes + kRequestBytes - 1;
        if (*last == 0) continue;
        // Cleared at detection: the client reuses the slot as soon as it has the answer.
        *last = 0;
        worker.claims[found++] = {client, slot};
        if (found == batch) {
          Answer(worker, found);
          found = 0;
        }
      }
    }
    if (found > 0) Answer(worker, found);
    if ((spins & kStopCheckMask) == 0) {
      if (stop_.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) return;
      if (session_.clock().Now() >= deadline) Fail("--timeout ", o_.timeout_s, " s passed while handing out integers");
    }
  }
}

void SequencerRun::ServeSpec(Worker& worker) {
  const std::uint64_t deadline = DeadlineTicks(session_);
  const int batch = static_cast<int>(worker.claims.size());
  std::vector<ibv_wc> completions(static_cast<std::size_t>(batch));
  for (std::uint64_t spins = 1;; ++spins) {
    const int n = ibv_poll_cq(worker.recv_cq.get(), batch, completions.data());
    if (n < 0) Fail("ibv_poll_cq failed on a sequencer worker's RECV CQ");
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[static_cast<std::size_t>(i)];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving Spec-S0 requests");
      if (!(wc.wc_flags & IBV_WC_WITH_IMM)) Fail("Spec-S0 request from QP ", wc.src_qp, " without immediate");
      // The RECV's QP, hence its buffer, says whose request it is.
      worker.claims[static_cast<std::size_t>(i)] = {static_cast<std::uint32_t>(wc.wr_id / worker.recv_slots),
                                                    wc.imm_data};
      PostWorkerRecv(worker, wc.wr_id);
    }
    if (n > 0) Answer(worker, static_cast<std::size_t>(n));
    if ((spins & kStopCheckMask) == 0) {
      if (stop_.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) return;
      if (session_.clock().Now() >= deadline) Fail("--timeout ", o_.timeout_s, " s passed while handing out integers");
    }
  }
}

void SequencerRun::PostWorkerRecv(Worker& worker, std::uint64_t slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(worker.recv.data() + slot * kRecvSlotBytes), kRecvSlotBytes,
              worker.recv.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  PostRecvOrFail(worker.qps[slot / worker.recv_slots].get(), &wr, "sequencer worker");
}

}  // namespace rdmalab::bench::sequencer
