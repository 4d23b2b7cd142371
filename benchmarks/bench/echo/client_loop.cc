// echo's client loop: keeps --tx-depth requests in flight, one per window slot, and times
// each round trip. It allocates nothing, takes no lock and makes no syscall beyond the
// provider's post/poll.
#include <algorithm>
#include <cstring>

#include "benchmarks/bench/echo/run.h"
#include "benchmarks/bench/hot_loop.h"
#include "rdma/error.h"

namespace rdmalab::bench::echo {
namespace {

// The last byte of request `seq`: never 0, which marks a slot empty.
std::uint8_t Marker(std::uint64_t seq) { return static_cast<std::uint8_t>(seq % 255 + 1); }

}  // namespace

void EchoRun::PostRequest(std::uint32_t slot, std::uint64_t seq, std::uint32_t size, std::uint64_t now) {
  std::uint8_t* request = local_.data() + std::uint64_t{slot} * shape_.slot_bytes;
  if (o_.validate) FillPattern(request, size - 1, static_cast<std::uint32_t>(seq));
  request[size - 1] = Marker(seq);
  while (!request_ring_.HasRoom(1)) ReapSends(client_send_cq_.get(), &request_ring_, "sending echo requests");
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(request), size, local_.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = size <= shape_.inline_bytes ? unsigned{IBV_SEND_INLINE} : 0u;
  if (shape_.request_write) {
    const std::uint64_t offset = (std::uint64_t{static_cast<std::uint32_t>(session_.index())} * shape_.window + slot) *
                                 shape_.recv_bytes;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma = {server_requests_.address + offset, server_requests_.rkey};
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = (static_cast<std::uint32_t>(session_.index()) << kImmClientShift) | slot;
    if (shape_.request_type == IBV_QPT_UD) wr.wr.ud = {server_ah_.get(), server_ud_qpn_, kUdQkey};
  }
  PostOnRing(request_ring_, wr, "echo request");
  client_.Post(slot, seq, now);
}

void EchoRun::CheckResponse(std::uint32_t slot, const std::uint8_t* data, std::uint32_t size) {
  const std::uint64_t seq = client_.Sequence(slot);
  ++checked_;
  const std::uint64_t bad = PatternMismatches(data, size - 1, static_cast<std::uint32_t>(seq)) +
                            (data[size - 1] != Marker(seq));
  bad_bytes_ += bad;
  bad_messages_ += bad != 0;
}

// Writes the window slots whose responses arrived into `slots`; returns how many. Inline, for
// MeasureClient's loop: a call per poll would add its prologue to every round trip.
[[gnu::always_inline]] inline int EchoRun::CollectResponses(std::uint32_t size, std::uint32_t* slots) {
  int found = 0;
  std::uint8_t* responses = local_.data() + std::uint64_t{shape_.window} * shape_.slot_bytes;
  if (shape_.response_write) {
    for (std::uint32_t slot = 0; slot < shape_.window; ++slot) {
      if (!client_.Outstanding(slot)) continue;
      std::uint8_t* response = responses + std::uint64_t{slot} * shape_.recv_bytes;
      volatile std::uint8_t* last = response + size - 1;
      if (*last == 0) continue;
      std::atomic_thread_fence(std::memory_order_acquire);
      if (o_.validate) CheckResponse(slot, response, size);
      *last = 0;
      slots[found++] = slot;
    }
    return found;
  }
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(client_recv_cq_.get(), kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on the echo client's RECV CQ");
  const std::uint32_t grh = shape_.response_type == IBV_QPT_UD ? kUdGrhBytes : 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving echo responses");
    const std::uint32_t slot = wc.imm_data;
    if (slot >= shape_.window || !client_.Outstanding(slot)) {
      Fail("echo response for window slot ", slot, ", which has no request outstanding (window ", shape_.window, ")");
    }
    const auto buffer = static_cast<std::uint32_t>(wc.wr_id);
    if (o_.validate) {
      if (wc.byte_len != size + grh) {
        ++bad_messages_;
        ++checked_;
      } else {
        CheckResponse(slot, responses + std::uint64_t{buffer} * shape_.recv_bytes + grh, size);
      }
    }
    PostClientRecv(buffer);
    slots[found++] = slot;
  }
  return found;
}

ResultRow EchoRun::MeasureClient(std::uint32_t size) {
  const TscClock& clock = session_.clock();
  const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.duration_s * 1e9));
  const std::uint64_t iterations = o_.duration_s > 0 ? 0 : IterationsOrDefault(o_, 100'000);
  const std::uint64_t deadline = DeadlineTicks(session_);
  ResultRow row = LatencyRow(size, size, "rtt");
  const std::uint32_t window = shape_.window;
  std::vector<std::uint32_t> arrived(std::max<std::uint32_t>(window, kPollBatch));
  client_ = EchoClientWindow(window, clock, *row.latency_ns);
  std::uint64_t seq = 0;
  const std::uint64_t start = session_.clock().Now();
  for (std::uint32_t slot = 0; slot < window; ++slot) PostRequest(slot, seq++, size, session_.clock().Now());
  MeasuredInterval interval(start, warmup_ticks, duration_ticks, iterations);
  std::uint64_t now = start;
  while (client_.in_flight() > 0) {
    const int n = CollectResponses(size, arrived.data());
    now = session_.clock().Now();
    for (int i = 0; i < n; ++i) {
      const std::uint32_t slot = arrived[i];
      client_.Answer(slot, now, interval.counting());
      if (!interval.stopping()) PostRequest(slot, seq++, size, session_.clock().Now());
    }
    interval.Update(now, client_.measured(), clock, row);
    if (now >= deadline) {
      Fail("--timeout ", o_.timeout_s, " s passed with ", client_.in_flight(), " echo requests unanswered (",
           client_.measured(), " measured); is the server alive?");
    }
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
  }
  return row;
}

void EchoRun::PostClientRecv(std::uint64_t buffer) {
  const std::uint64_t offset = std::uint64_t{shape_.window} * shape_.slot_bytes + buffer * shape_.recv_bytes;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local_.data() + offset), shape_.recv_bytes, local_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = buffer;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  PostRecvOrFail(response_recv_qp_, &wr, "echo client");
}

}  // namespace rdmalab::bench::echo
