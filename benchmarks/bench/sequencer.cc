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
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/sequencer_check.h"
#include "benchmarks/bench/sequencer_client.h"
#include "benchmarks/bench/tput_plan.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

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

Design ParseDesign(const std::string& name) {
  if (name == "herd-rpc") return Design::kHerd;
  if (name == "herd-rpc-batch") return Design::kHerdBatch;
  if (name == "herd-rpc-mq") return Design::kHerdMq;
  if (name == "spec-s0") return Design::kSpec;
  if (name == "atomics") return Design::kAtomics;
  Fail("bad --design '", name, "': valid designs are herd-rpc, herd-rpc-batch, herd-rpc-mq, spec-s0, atomics");
}

bool IsHerd(Design design) {
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
  json CreateWorkers();
  void SetupServer();
  void SetupClient();
  void ServeHerd(Worker& worker, std::uint32_t index);
  void ServeSpec(Worker& worker);
  void Answer(Worker& worker, std::size_t count);
  void PostWorkerRecv(Worker& worker, std::uint64_t slot);
  void PostClientRecv(std::uint32_t queue, std::uint32_t slot);
  void PostRequest(std::uint64_t seq);
  void Collect(std::uint64_t now);
  void RunClient(ResultRow& row);
  ResultRow ServeAll();

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


// ---- setup ----

// The workers: UD QPs (answers; Spec-S0 requests too), CQs, answer and RECV buffers.
// Returns each worker's QP endpoints.
json SequencerRun::CreateWorkers() {
  const Device& device = session_.device();
  json endpoints = json::array();
  const std::uint32_t batch = design_ == Design::kHerd ? 1u : static_cast<std::uint32_t>(o_.batch);
  const std::uint32_t send_depth = static_cast<std::uint32_t>(o_.cq_mod) + batch + kSendSlackWrs;
  const std::uint32_t recv_slots = design_ == Design::kSpec ? window_ : 1;
  const auto max_wr = static_cast<std::uint32_t>(device.attr().max_qp_wr);
  if (send_depth > max_wr || recv_slots > max_wr) {
    Fail("a sequencer worker needs ", std::max(send_depth, recv_slots), " WRs per queue (--cq-mod ", o_.cq_mod,
         ", --batch ", batch, ", --tx-depth ", window_, "); ", device.name(), " allows ", max_wr);
  }
  const std::uint32_t qps = design_ == Design::kHerdMq ? kMultiQueueQps
                            : design_ == Design::kSpec ? clients_count_
                                                       : 1;
  workers_.resize(workers_count_);
  for (std::uint32_t w = 0; w < workers_count_; ++w) {
    Worker& worker = workers_[w];
    worker.send_cq = CreateCq(device, static_cast<int>(qps * send_depth));
    worker.recv_cq = CreateCq(device, static_cast<int>(qps * recv_slots));
    json mine = json::array();
    for (std::uint32_t q = 0; q < qps; ++q) {
      QpCaps caps;
      caps.type = IBV_QPT_UD;
      caps.send_depth = send_depth;
      caps.recv_depth = recv_slots;
      caps.inline_bytes = inline_bytes_;
      worker.qps.push_back(CreateQp(device, session_.pd(), worker.send_cq.get(), worker.recv_cq.get(), caps));
      ActivateUdQp(worker.qps.back().get(), device, 0);
      worker.rings.push_back({worker.qps.back().get(), q, send_depth, static_cast<std::uint32_t>(o_.cq_mod)});
      mine.push_back(ToJson(Endpoint{worker.qps.back()->qp_num, 0, session_.address()}));
    }
    endpoints.push_back(mine);
    worker.claims.resize(batch);
    worker.wrs.resize(batch);
    worker.sges.resize(batch);
    worker.values = MakeRegion(session_, std::uint64_t{send_depth} * qps * kIntegerBytes);
    if (design_ == Design::kSpec) {
      worker.recv_slots = recv_slots;
      worker.recv = MakeRegion(session_, std::uint64_t{qps} * recv_slots * kRecvSlotBytes);
    }
  }
  return endpoints;
}

void SequencerRun::SetupServer() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  clients_count_ = static_cast<std::uint32_t>(peers.size());
  const std::uint64_t slots = std::uint64_t{workers_count_} * clients_count_ * window_;
  exposed_ = MakeRegion(session_, std::max<std::uint64_t>(4096, IsHerd(design_) ? slots * kRequestSlotBytes : 8));
  session_.Put("region", exposed_.Describe());
  json endpoints = {{"workers", json::array()}};
  // HERD: one UC QP per client (the initializer's); atomics: one RC QP per client.
  const ibv_qp_type connected = design_ == Design::kAtomics ? IBV_QPT_RC : IBV_QPT_UC;
  std::vector<QpLink> links;
  if (IsHerd(design_) || design_ == Design::kAtomics) {
    idle_cq_ = CreateCq(device, static_cast<int>(2 * clients_count_));
    for (const auto& peer : peers) {
      QpCaps caps;
      caps.type = connected;
      caps.send_depth = caps.recv_depth = 1;
      client_qps_.push_back(CreateQp(device, session_.pd(), idle_cq_.get(), idle_cq_.get(), caps));
      links.push_back({peer, 0, client_qps_.back().get()});
    }
  }
  if (design_ != Design::kAtomics) endpoints["workers"] = CreateWorkers();
  session_.Put("endpoints", endpoints);
  session_.ConnectQps(links, static_cast<std::uint8_t>(std::clamp(device.attr().max_qp_rd_atom, 1, 16)));
  response_qpns_.resize(clients_count_);
  for (std::uint32_t c = 0; c < clients_count_; ++c) {
    if (design_ == Design::kAtomics) continue;
    const json theirs = session_.Get(peers[c], "endpoints");
    for (std::uint32_t w = 0; w < workers_count_; ++w) {
      const Endpoint remote = EndpointFromJson(theirs.at("queues").at(w));
      if (w == 0) ahs_.push_back(CreateAh(session_.pd(), device, session_.address(), remote.address));
      response_qpns_[c].push_back(remote.qpn);
    }
  }
  for (auto& worker : workers_) {
    for (std::uint64_t slot = 0; slot < worker.recv_slots * worker.qps.size(); ++slot) {
      PostWorkerRecv(worker, slot);
    }
  }
}

void SequencerRun::SetupClient() {
  const Device& device = session_.device();
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  const std::uint32_t send_depth = window_ + cq_mod;
  const std::uint32_t queues = design_ == Design::kAtomics ? 0 : workers_count_;
  local_ = MakeRegion(session_, std::uint64_t{window_} * kRequestSlotBytes + std::uint64_t{queues} * window_ * kRecvSlotBytes);
  send_cq_ = CreateCq(device, static_cast<int>(std::max(1u, queues) * send_depth));
  recv_cq_ = CreateCq(device, static_cast<int>(std::max(1u, queues) * window_));
  json endpoints = {{"queues", json::array()}};
  if (design_ != Design::kSpec) {
    QpCaps caps;
    caps.type = design_ == Design::kAtomics ? IBV_QPT_RC : IBV_QPT_UC;
    caps.send_depth = send_depth;
    caps.recv_depth = 1;
    caps.inline_bytes = inline_bytes_;
    request_qp_ = CreateQp(device, session_.pd(), send_cq_.get(), recv_cq_.get(), caps);
    rings_.push_back({request_qp_.get(), 0, send_depth, design_ == Design::kAtomics ? 1u : cq_mod});
  }
  for (std::uint32_t w = 0; w < queues; ++w) {
    QpCaps caps;
    caps.type = IBV_QPT_UD;
    caps.send_depth = design_ == Design::kSpec ? send_depth : 1;
    caps.recv_depth = window_;
    caps.inline_bytes = inline_bytes_;
    queues_.push_back(CreateQp(device, session_.pd(), send_cq_.get(), recv_cq_.get(), caps));
    ActivateUdQp(queues_.back().get(), device, 0);
    endpoints["queues"].push_back(ToJson(Endpoint{queues_.back()->qp_num, 0, session_.address()}));
    if (design_ == Design::kSpec) rings_.push_back({queues_.back().get(), w, send_depth, cq_mod});
  }
  session_.Put("endpoints", endpoints);
  const json theirs = session_.Get("server/0", "endpoints");
  remote_ = RemoteRegion::FromJson(session_.Get("server/0", "region"));
  std::vector<QpLink> links;
  if (request_qp_) links.push_back({"server/0", 0, request_qp_.get()});
  session_.ConnectQps(links, static_cast<std::uint8_t>(std::clamp(device.attr().max_qp_rd_atom, 1, 16)));
  if (design_ == Design::kSpec) {
    for (std::uint32_t w = 0; w < workers_count_; ++w) {
      const Endpoint remote = EndpointFromJson(theirs.at("workers").at(w).at(static_cast<std::size_t>(session_.index())));
      server_ahs_.push_back(CreateAh(session_.pd(), device, session_.address(), remote.address));
      server_qpns_.push_back(remote.qpn);
    }
  }
  std::uint8_t* request = local_.data();
  for (std::uint32_t i = 0; i < kRequestBytes; ++i) request[i] = static_cast<std::uint8_t>(i + 1);
  request[kRequestBytes - 1] = kRequestMarker;
  for (std::uint32_t w = 0; w < queues; ++w) {
    for (std::uint32_t slot = 0; slot < window_; ++slot) PostClientRecv(w, slot);
  }
  fifo_tsc_.assign(std::uint64_t{queues} * window_, 0);
  fifo_guess_.assign(std::uint64_t{queues} * window_, 0);
  fifo_head_.assign(queues, 0);
  fifo_tail_.assign(queues, 0);
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

// ---- server ----

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

ResultRow SequencerRun::ServeAll() {
  // The atomics design has no workers: the server only waits at the barriers.
  ServeBetweenBarriers(session_, static_cast<int>(workers_.size()), stop_, "/0", [&](int t) {
    Worker& worker = workers_[static_cast<std::size_t>(t)];
    if (design_ == Design::kSpec) {
      ServeSpec(worker);
    } else {
      ServeHerd(worker, static_cast<std::uint32_t>(t));
    }
  });
  ResultRow row;
  row.size_bytes = kIntegerBytes;
  row.payload_bytes_per_op = kIntegerBytes;
  for (std::size_t t = 0; t < workers_.size(); ++t) {
    const Worker& worker = workers_[t];
    row.per_thread.push_back({{"thread", t}, {"handed_out", worker.handed_out}, {"batches", worker.batches},
                              {"mean_batch", worker.batches ? double(worker.handed_out) / double(worker.batches) : 0.0},
                              {"header_only_responses", worker.header_only}});
  }
  for (const auto& peer : session_.PeerNames()) {
    const json result = session_.Get(peer, "result/0");
    const auto ops = result.at("ops").get<std::uint64_t>();
    const double duration = result.at("duration_s").get<double>();
    row.ops += ops;
    row.duration_s = std::max(row.duration_s, duration);
    row.per_peer.push_back({{"peer", peer}, {"ops", ops}, {"mops", duration > 0 ? ops / duration / 1e6 : 0.0}});
  }
  std::uint64_t counter = counter_.load();
  if (design_ == Design::kAtomics) std::memcpy(&counter, exposed_.data(), sizeof(counter));
  row.extra["counter_final"] = counter;
  // The baseline answers every request with a post of its own, whatever --batch says.
  row.extra["responses_per_post_max"] = design_ == Design::kHerd ? 1 : o_.batch;
  return row;
}

// ---- client ----

void SequencerRun::PostRequest(std::uint64_t seq) {
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
void SequencerRun::Collect(std::uint64_t now) {
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

Report SequencerRun::Run() {
  inline_bytes_ = static_cast<std::uint32_t>(std::min(o_.inline_size, int{kRequestBytes}));
  if (session_.is_server()) {
    SetupServer();
  } else {
    SetupClient();
  }
  session_.Barrier("connected");
  Report report;
  if (session_.is_server()) {
    report.rows.push_back(ServeAll());
    ResultRow& row = report.rows.back();
    const json check = GatherAndCheck(session_, o_.count);
    row.extra["sequencer_check"] = check;
    report.validation = {{"enabled", true}, {"sequencer_check", check}, {"ok", check.at("ok")}};
  } else {
    ResultRow row;
    row.size_bytes = kIntegerBytes;
    row.payload_bytes_per_op = kIntegerBytes;
    row.latency_ns = std::make_unique<LatencyHistogram>();
    row.latency_kind = "rtt";
    client_ = SequencerClientWindow(window_, o_.count, session_.clock(), *row.latency_ns);
    session_.Barrier("start/0");
    RunClient(row);
    session_.Put("result/0", {{"ops", row.ops}, {"duration_s", row.duration_s}});
    session_.Barrier("done/0");
    const SequencerClientStats& stats = client_.stats();
    row.extra["integers_received"] = stats.received;
    row.extra["local_duplicates"] = stats.local_duplicates;
    row.extra["exhausted_answers"] = stats.exhausted;
    if (design_ == Design::kSpec) {
      row.extra["header_only_answers"] = stats.header_only;
      row.extra["regular_answers"] = stats.regular;
    }
    PublishIntegers(session_, client_.received(), stats.received, stats.local_duplicates);
    report.rows.push_back(std::move(row));
    report.validation = {{"enabled", true}, {"checked_by", "server"}};
  }
  session_.Barrier("finished");
  report.notes.push_back("rates cover the whole hand-out of --count integers (no warm-up is excluded)");
  if (design_ == Design::kAtomics) report.notes.push_back("design atomics: the server's CPU takes no part");
  return report;
}

}  // namespace

void CheckSequencer(Options& options) {
  const Design design = ParseDesign(options.design);
  if (!options.verb.empty()) Fail("--verb ", options.verb, " does not apply to sequencer: choose --design");
  if (options.duration_s > 0 || options.iters != 0) {
    Fail("-D/--duration and -n/--iters do not apply to sequencer: a run hands out --count integers (", options.count,
         ")");
  }
  if (options.all) Fail("-a/--all does not apply to sequencer: it moves 8-byte integers");
  for (auto size : options.sizes) {
    if (size != kIntegerBytes) Fail("--size ", size, " with sequencer: the integers are 8 bytes (--size 8)");
  }
  if (options.sizes.empty()) options.sizes.push_back(kIntegerBytes);
  if (options.connection != "RC") {
    Fail("-c ", options.connection, " with sequencer: each --design fixes its transports; leave -c at RC");
  }
  if (options.header_only) Fail("--header-only with sequencer: spec-s0 is header-only by design");
  if (options.post_list != 1 || options.qp != 1 || options.sge != 1) {
    Fail("--post_list, --qp and --sge do not apply to sequencer: use --batch and --design herd-rpc-mq");
  }
  if (design == Design::kAtomics && options.cq_mod != 1) {
    Fail("--cq-mod ", options.cq_mod, " with --design atomics: every fetch-and-add's result is read at its "
         "completion, so each one is signaled; use -Q 1");
  }
  CheckIntegerCount(options.count);
}

Report RunSequencer(Session& session) { return SequencerRun(session).Run(); }

}  // namespace rdmalab::bench
