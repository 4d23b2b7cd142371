// sequencer setup and connection: the server's request region, connected QPs and workers;
// the client's QPs; the QP pairs, address handles and the first RECVs.
#include <algorithm>

#include "benchmarks/bench/sequencer/run.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench::sequencer {

using nlohmann::json;

Design ParseDesign(const std::string& name) {
  if (name == "herd-rpc") return Design::kHerd;
  if (name == "herd-rpc-batch") return Design::kHerdBatch;
  if (name == "herd-rpc-mq") return Design::kHerdMq;
  if (name == "spec-s0") return Design::kSpec;
  if (name == "atomics") return Design::kAtomics;
  Fail("bad --design '", name, "': valid designs are herd-rpc, herd-rpc-batch, herd-rpc-mq, spec-s0, atomics");
}

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
  ConnectClients();
}

// The address handles and QP numbers the workers answer each client at, and the workers'
// first RECVs.
void SequencerRun::ConnectClients() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
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
  session_.Put("endpoints", CreateClientQps(queues, send_depth));
  ConnectServer();
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

// The request QP (UC for HERD, RC for atomics) and one UD QP per worker for the answers
// (Spec-S0: for the requests too); returns their endpoints.
json SequencerRun::CreateClientQps(std::uint32_t queues, std::uint32_t send_depth) {
  const Device& device = session_.device();
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
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
  return endpoints;
}

void SequencerRun::ConnectServer() {
  const Device& device = session_.device();
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
}

}  // namespace rdmalab::bench::sequencer
