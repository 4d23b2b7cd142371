// sequencer's client loop: keeps --tx-depth requests in flight (HERD WRITEs, Spec-S0
// SENDs, or FETCH_ADDs) and takes the answers into its window until every integer below
// --count is handed out. It allocates nothing, takes no lock and makes no syscall beyond the
// provider's post/poll.
#include <cstring>

#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/sequencer/run.h"
#include "rdma/error.h"

namespace rdmalab::bench::sequencer {

// Inline, for RunClient's loop, as Collect: one request per answer.
[[gnu::always_inline]] inline void SequencerRun::PostRequest(std::uint64_t seq) {
  ibv_send_wr wr{};
  ibv_sge sge{};
  SendRing* ring = &rings_[0];
  std::uint32_t worker = static_cast<std::uint32_t>(seq % std::max(1u, workers_count_));
  if (design_ == Design::kSpec) {
    ring = &rings_[worker];
    const std::uint64_t entry = std::uint64_t{worker} * window_ + fifo_tail_[worker]++ % window_;
    fifo_tsc_[entry] = session_.clock().Now();
    fifo_guess_[entry] = guess_;
    client_.Posted();
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = guess_;
    wr.wr.ud = {server_ahs_[worker].get(), server_qpns_[worker], kUdQkey};
  } else {
    const std::uint32_t slot = client_.TakeSlot(session_.clock().Now());
    if (design_ == Design::kAtomics) {
      sge = {reinterpret_cast<std::uintptr_t>(local_.data() + std::uint64_t{slot} * kRequestSlotBytes), kIntegerBytes,
             local_.mr->lkey};
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic = {remote_.address, 1, 0, remote_.rkey};
      wr.wr_id = slot;
    } else {
      const std::uint64_t offset =
          ((std::uint64_t{worker} * clients_count_ + static_cast<std::uint32_t>(session_.index())) * window_ + slot) *
          kRequestSlotBytes;
      sge = {reinterpret_cast<std::uintptr_t>(local_.data()), kRequestBytes, local_.mr->lkey};
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.wr.rdma = {remote_.address + offset, remote_.rkey};
      wr.send_flags = kRequestBytes <= inline_bytes_ ? unsigned{IBV_SEND_INLINE} : 0u;
    }
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  while (!ring->HasRoom(1)) ReapSends(send_cq_.get(), rings_.data(), "sending sequencer requests");
  if (design_ != Design::kAtomics) {
    wr.wr_id = ring->WrId(ring->posted);
    if (ring->Signaled(ring->posted)) wr.send_flags |= IBV_SEND_SIGNALED;
  } else {
    wr.send_flags = IBV_SEND_SIGNALED;
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring->qp, &wr, &bad);
  if (error_number != 0) Fail("ibv_post_send (sequencer request): ", std::strerror(error_number));
  ++ring->posted;
}

// Takes the answers that arrived by `now` into the client's window.
[[gnu::always_inline]] inline void SequencerRun::Collect(std::uint64_t now) {
  ibv_wc completions[kPollBatch];
  if (design_ == Design::kAtomics) {
    const int n = ibv_poll_cq(send_cq_.get(), kPollBatch, completions);
    if (n < 0) Fail("ibv_poll_cq failed on the sequencer client's CQ");
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "fetch-and-add on the sequencer counter");
      const auto slot = static_cast<std::uint32_t>(wc.wr_id);
      std::uint64_t value;
      std::memcpy(&value, local_.data() + std::uint64_t{slot} * kRequestSlotBytes, sizeof(value));
      client_.AnswerSlot(slot, value, now);
      ++rings_[0].retired;
    }
    return;
  }
  ReapSends(send_cq_.get(), rings_.data(), "sending sequencer requests");
  const int n = ibv_poll_cq(recv_cq_.get(), kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on the sequencer client's RECV CQ");
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving sequencer answers");
    const auto queue = static_cast<std::uint32_t>(wc.wr_id >> 32);
    const auto buffer = static_cast<std::uint32_t>(wc.wr_id);
    const std::uint8_t* payload =
        local_.data() + std::uint64_t{window_} * kRequestSlotBytes + (std::uint64_t{queue} * window_ + buffer) * kRecvSlotBytes + kUdGrhBytes;
    const bool with_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    std::uint64_t value;
    if (IsHerd(design_)) {
      const std::uint32_t slot = wc.imm_data;
      if (!with_imm || slot >= window_ || wc.byte_len != kRecvBytes) {
        Fail("malformed sequencer answer: ", wc.byte_len, " bytes, window slot ", slot, " (window ", window_, ")");
      }
      std::memcpy(&value, payload, sizeof(value));
      client_.AnswerSlot(slot, value, now);
    } else {
      // Answers of one worker come back in request order: its FIFO says when and with what guess.
      const std::uint64_t entry = std::uint64_t{queue} * window_ + fifo_head_[queue]++ % window_;
      if (with_imm && wc.byte_len == kUdGrhBytes) {
        value = (std::uint64_t{fifo_guess_[entry]} << 32) | wc.imm_data;
        ++client_.stats().header_only;
      } else if (!with_imm && wc.byte_len == kRecvBytes) {
        std::memcpy(&value, payload, sizeof(value));
        guess_ = static_cast<std::uint32_t>(value >> 32);
        ++client_.stats().regular;
      } else {
        Fail("malformed Spec-S0 answer: ", wc.byte_len, " bytes, ", with_imm ? "with" : "without", " immediate");
      }
      client_.Answer(value, now - fifo_tsc_[entry]);
    }
    PostClientRecv(queue, buffer);
  }
}

void SequencerRun::RunClient(ResultRow& row) {
  const std::uint64_t deadline = DeadlineTicks(session_);
  std::uint64_t seq = 0;
  const std::uint64_t start = session_.clock().Now();
  std::uint64_t now = start;
  while (!client_.Done()) {
    while (client_.CanPost()) PostRequest(seq++);
    now = session_.clock().Now();
    Collect(now);
    if (now >= deadline) {
      Fail("--timeout ", o_.timeout_s, " s passed with ", client_.in_flight(), " sequencer requests unanswered after ",
           client_.stats().received, " integers (answers lost, or the server stopped?)");
    }
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
  }
  row.ops = client_.stats().received;
  row.duration_s = static_cast<double>(session_.clock().TicksToNs(now - start)) / 1e9;
}

void SequencerRun::PostClientRecv(std::uint32_t queue, std::uint32_t slot) {
  const std::uint64_t offset = std::uint64_t{window_} * kRequestSlotBytes +
                               (std::uint64_t{queue} * window_ + slot) * kRecvSlotBytes;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local_.data() + offset), kRecvSlotBytes, local_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = (std::uint64_t{queue} << 32) | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  PostRecvOrFail(queues_[queue].get(), &wr, "sequencer client");
}

}  // namespace rdmalab::bench::sequencer
