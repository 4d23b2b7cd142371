// echo's server loop: detects requests (a polled last byte or a RECV completion), stages
// them, makes the --accesses table reads and posts the responses. It allocates nothing,
// takes no lock and makes no syscall beyond the provider's post/poll.
#include <cstring>

#include "benchmarks/bench/echo/run.h"
#include "benchmarks/bench/hot_loop.h"
#include "rdma/error.h"

namespace rdmalab::bench::echo {

void EchoRun::Respond(ServerThread& thread, std::uint32_t client_index, std::uint32_t slot, std::uint32_t size) {
  ServerClient& client = clients_[client_index];
  SendRing& ring = thread.rings[client.ring];
  while (!ring.HasRoom(1)) ReapSends(thread.send_cq.get(), thread.rings.data(), "sending echo responses");
  const std::uint32_t index = client_index * shape_.window + slot;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(staging_.data() + std::uint64_t{index} * shape_.slot_bytes), size,
              staging_.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = size <= shape_.inline_bytes ? unsigned{IBV_SEND_INLINE} : 0u;
  if (shape_.response_write) {
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma = {client.responses.address + std::uint64_t{slot} * shape_.recv_bytes, client.responses.rkey};
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = slot;
    if (shape_.response_type == IBV_QPT_UD) wr.wr.ud = {client.ah.get(), client.remote_ud_qpn, kUdQkey};
  }
  PostOnRing(ring, wr, "echo response");
  ++thread.served;
}

void EchoRun::ServeOldest(ServerThread& thread, std::uint32_t size) {
  const Pending& item = thread.pipeline[thread.head];
  const auto* table = reinterpret_cast<const std::uint64_t*>(table_.data());
  for (int a = 0; a < o_.accesses; ++a) thread.sink += table[item.lines[a]];
  Respond(thread, item.client, item.slot, size);
  thread.head = (thread.head + 1) % (kPrefetchDepth + 1);
  --thread.queued;
}

// A request is in: stage its bytes (it is echoed from there), then serve it now or, with
// --prefetch, after the requests behind it have had their table lines prefetched.
void EchoRun::Accept(ServerThread& thread, std::uint32_t client, std::uint32_t slot, const std::uint8_t* request,
                     std::uint32_t size, volatile std::uint8_t* polled, std::uint64_t recv_buffer) {
  std::memcpy(staging_.data() + std::uint64_t{client * shape_.window + slot} * shape_.slot_bytes, request, size);
  // The request's slot or RECV is given back as soon as it is copied, before the response:
  // once the client has the response its next request may come, and must find the slot
  // clear (a late clear would erase it) or a RECV posted (on UC/UD it would be lost).
  if (polled != nullptr) {
    *polled = 0;
  } else {
    PostServerRecv(recv_buffer);
  }
  if (o_.accesses == 0) {
    Respond(thread, client, slot, size);
    return;
  }
  Pending& item = thread.pipeline[(thread.head + thread.queued) % (kPrefetchDepth + 1)];
  ++thread.queued;
  item.client = client;
  item.slot = slot;
  for (int a = 0; a < o_.accesses; ++a) {
    item.lines[a] = static_cast<std::uint64_t>((static_cast<unsigned __int128>(XorShift(thread.rng)) * table_words_) >> 64);
    if (o_.prefetch) __builtin_prefetch(table_.data() + item.lines[a] * sizeof(std::uint64_t));
  }
  if (!o_.prefetch || thread.queued > kPrefetchDepth) ServeOldest(thread, size);
}

void EchoRun::ServerThreadLoop(ServerThread& thread, std::uint32_t size) {
  const std::uint32_t window = shape_.window;
  const std::uint32_t grh = shape_.request_type == IBV_QPT_UD ? kUdGrhBytes : 0;
  const std::uint64_t deadline = DeadlineTicks(session_);
  const auto clients = static_cast<std::uint32_t>(clients_.size());
  thread.served = 0;
  ibv_wc completions[kPollBatch];
  for (std::uint64_t spins = 1;; ++spins) {
    bool found = false;
    if (shape_.request_write) {
      for (std::uint32_t client : thread.clients) {
        std::uint8_t* slots = requests_.data() + std::uint64_t{client} * window * shape_.recv_bytes;
        for (std::uint32_t slot = 0; slot < window; ++slot) {
          std::uint8_t* request = slots + std::uint64_t{slot} * shape_.recv_bytes;
          volatile std::uint8_t* last = request + size - 1;
          if (*last == 0) continue;
          std::atomic_thread_fence(std::memory_order_acquire);
          Accept(thread, client, slot, request, size, last, 0);
          found = true;
        }
      }
    } else {
      const int n = ibv_poll_cq(thread.recv_cq.get(), kPollBatch, completions);
      if (n < 0) Fail("ibv_poll_cq failed on the echo server's RECV CQ");
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = completions[i];
        if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving echo requests");
        const std::uint32_t client = wc.imm_data >> kImmClientShift;
        const std::uint32_t slot = wc.imm_data & (kMaxWindow - 1);
        if (client >= clients || slot >= window || wc.byte_len != size + grh) {
          Fail("malformed echo request: immediate ", wc.imm_data, ", ", wc.byte_len, " bytes (expected client < ",
               clients, ", slot < ", window, ", ", size + grh, " bytes)");
        }
        const auto buffer = static_cast<std::uint32_t>(wc.wr_id);
        Accept(thread, client, slot, requests_.data() + std::uint64_t{buffer} * shape_.recv_bytes + grh, size,
               nullptr, buffer);
        found = true;
      }
    }
    // An idle sweep serves a prefetched request: nothing newer is coming to hide it behind.
    if (!found && thread.queued > 0) ServeOldest(thread, size);
    if ((spins & kStopCheckMask) == 0) {
      if (stop_.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) break;
      if (session_.clock().Now() >= deadline) Fail("--timeout ", o_.timeout_s, " s passed while serving echo requests");
    }
  }
  while (thread.queued > 0) ServeOldest(thread, size);
}

void EchoRun::PostServerRecv(std::uint64_t buffer) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(requests_.data() + buffer * shape_.recv_bytes),
              shape_.recv_bytes, requests_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = buffer;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const std::uint64_t client = buffer / shape_.window;
  ibv_qp* qp = clients_[client].request_qp.get();
  PostRecvOrFail(qp, &wr, "echo server");
}

}  // namespace rdmalab::bench::echo
