// sequencer: a server hands out increasing 8-byte integers to N clients (guide16 Fig. 7,
// Table 3). Designs:
// - herd-rpc: HERD RPCs. Clients WRITE a 16-byte request over UC into per-(worker, client,
//   window slot) slots of the server's request region; each worker polls the last byte of
//   its slots, takes one integer from the shared counter and answers with a UD SEND.
// - herd-rpc-batch: a worker collects up to --batch requests per sweep, claims them all
//   with one atomic add, and answers with one linked post (one doorbell).
// - herd-rpc-mq: as batch, alternating the batches among kMultiQueueQps UD QPs.
// - spec-s0: datagrams only. Header-only SENDs whose immediate guesses the counter's upper
//   4 bytes; a right guess is answered header-only with the lower 4 bytes, a wrong one by a
//   regular SEND of all 8 bytes (then the client learns the upper bytes).
// - atomics: clients FETCH_ADD one counter in the server's memory over RC.
// The run ends when every integer below --count has been handed out. Each client records
// what it got in a bitmap; the server gathers the bitmaps through the rendezvous and
// checks that every integer was handed out exactly once (sequencer_check).
// One class split by concern: setup.cc creates and connects the QPs, server_loop.cc and
// client_loop.cc are the measured loops (no allocation, lock or syscall beyond the
// provider's post/poll), aggregate.cc makes the rows, run.cc runs the hand-out.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/sequencer_client.h"

namespace rdmalab::bench::sequencer {

enum class Design { kHerd, kHerdBatch, kHerdMq, kSpec, kAtomics };

constexpr std::uint32_t kRequestBytes = 16;      // a HERD keyhash; its last byte is the polled one
constexpr std::uint32_t kRequestSlotBytes = 64;  // one cache line per request slot
constexpr std::uint32_t kIntegerBytes = 8;
constexpr std::uint32_t kRecvBytes = kUdGrhBytes + kIntegerBytes;
constexpr std::uint32_t kRecvSlotBytes = 64;
constexpr std::uint32_t kMultiQueueQps = 3;  // guide16: 3 UD QPs per port
constexpr std::uint32_t kSendSlackWrs = 64;
constexpr std::uint32_t kUnknownGuess = 0xFFFFFFFF;  // a new client knows nothing of the counter
constexpr std::uint64_t kStopCheckMask = 0x3FF;
constexpr std::uint8_t kRequestMarker = 0x5A;
static_assert(kRequestBytes <= kRequestSlotBytes, "a request fits its slot");
static_assert(kRecvBytes <= kRecvSlotBytes, "a response and its GRH fit a RECV slot");

Design ParseDesign(const std::string& name);

inline bool IsHerd(Design design) {
  return design == Design::kHerd || design == Design::kHerdBatch || design == Design::kHerdMq;
}

// A request the worker answers: whose, and (HERD) its window slot or (Spec-S0) its guess.
struct Claim {
  std::uint32_t client = 0;
  std::uint32_t tag = 0;
};

struct Worker {
  CqPtr send_cq, recv_cq;
  // UD: HERD answers on qps[0] (herd-rpc-mq: alternating among all); Spec-S0: one QP per
  // client, so that no receive queue has two senders, answers leaving from qps[0].
  std::vector<QpPtr> qps;
  std::vector<SendRing> rings;
  std::vector<Claim> claims;
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  Region values;  // non-inline response payloads, one per send-queue entry
  Region recv;    // Spec-S0 RECV buffers
  std::uint32_t recv_slots = 0;  // Spec-S0: per client QP
  std::uint64_t batches = 0;
  std::uint64_t handed_out = 0;
  std::uint64_t header_only = 0;
};

class SequencerRun {
 public:
  explicit SequencerRun(Session& session)
      : session_(session), o_(session.options()), design_(ParseDesign(o_.design)),
        window_(static_cast<std::uint32_t>(o_.tx_depth)), workers_count_(static_cast<std::uint32_t>(o_.threads)) {}
  Report Run();

 private:
  // setup.cc
  nlohmann::json CreateWorkers();
  void SetupServer();
  void ConnectClients();
  void SetupClient();
  nlohmann::json CreateClientQps(std::uint32_t queues, std::uint32_t send_depth);
  void ConnectServer();

  // server_loop.cc
  void ServeHerd(Worker& worker, std::uint32_t index);
  void ServeSpec(Worker& worker);
  void Answer(Worker& worker, std::size_t count);
  void PostWorkerRecv(Worker& worker, std::uint64_t slot);

  // client_loop.cc
  void RunClient(ResultRow& row);
  inline void PostRequest(std::uint64_t seq);
  inline void Collect(std::uint64_t now);
  void PostClientRecv(std::uint32_t queue, std::uint32_t slot);

  // run.cc
  Report Serve();
  Report Request();
  ResultRow ServeAll();

  // aggregate.cc
  ResultRow ServerRow();
  void AddClientCounts(ResultRow& row) const;

  Session& session_;
  const Options& o_;
  Design design_;
  std::uint32_t window_;
  std::uint32_t workers_count_;
  std::uint32_t clients_count_ = 0;
  std::uint32_t inline_bytes_ = 0;
  // Server.
  Region exposed_;  // HERD request slots, or the atomics counter
  CqPtr idle_cq_;   // the connected QPs' CQ: nothing completes there (the server never posts on them)
  std::vector<QpPtr> client_qps_;
  std::vector<AhPtr> ahs_;                       // per client
  std::vector<std::vector<std::uint32_t>> response_qpns_;  // [client][worker]
  std::vector<Worker> workers_;
  alignas(64) std::atomic<std::uint64_t> counter_{0};
  std::atomic<bool> stop_{false};
  // Client.
  CqPtr send_cq_, recv_cq_;
  QpPtr request_qp_;
  std::vector<QpPtr> queues_;  // per worker: HERD response QPs, Spec-S0 request+response QPs
  std::vector<SendRing> rings_;
  std::vector<AhPtr> server_ahs_;
  std::vector<std::uint32_t> server_qpns_;
  Region local_;
  RemoteRegion remote_;
  std::vector<std::uint64_t> fifo_tsc_;          // Spec-S0: per worker, a FIFO of window entries
  std::vector<std::uint32_t> fifo_guess_;
  std::vector<std::uint64_t> fifo_head_, fifo_tail_;
  std::uint32_t guess_ = kUnknownGuess;
  SequencerClientWindow client_;  // the window, latency samples and bitmap of the answers
};

}  // namespace rdmalab::bench::sequencer
