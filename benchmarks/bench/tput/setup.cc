// tput setup and connection: the exposed region, the passive side's receive QPs, the active
// side's send QPs and source buffers, the QP pairs and the targets each active thread posts to.
#include <algorithm>
#include <bit>
#include <cstring>

#include "benchmarks/bench/tput/run.h"
#include "rdma/affinity.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench::tput {
namespace {

using nlohmann::json;

// The number both ends give the QP pair of `active`'s lane towards `passive`: in all-to-all
// two nodes have a pair per lane in each direction.
std::uint32_t TputLink(const std::string& active, const std::string& passive, std::uint32_t lane) {
  return lane * 2 + (active < passive ? 0 : 1);
}

// The NUMA node of the active side's source buffers (--numa): the device's, or another one.
// A host with one node has nothing far from the device: the point is unsupported there,
// never a near run reported as far.
int SourceBufferNode(const Session& session) {
  const int device_node = DeviceNumaNode(session.device().name());
  if (session.options().numa != "far") return device_node;
  const int nodes = NumaNodeCount();
  if (nodes < 2) {
    FailUnsupported("--numa far: this host has ", nodes, " NUMA node, so no memory is far from device ",
                    session.device().name(), "; the study needs a host with two or more nodes");
  }
  return device_node <= 0 ? 1 : 0;
}

}  // namespace

void TputRun::Setup() {
  const Options& o = session_.options();
  exposed_ = MakeRegion(session_, plan_.exposed_bytes);
  if (o.validate && plan_.kind == VerbKind::kRead && plan_.passive) {
    for (std::uint32_t tag = 0; tag < plan_.exposed_slots; ++tag) {
      FillPattern(exposed_.data() + std::uint64_t{tag} * plan_.slot_bytes, plan_.slot_bytes, tag);
    }
  }
  if (plan_.keyed && plan_.passive) {
    // Every page written once, so that READs find memory of their own, not the kernel's
    // shared zero page (which any cache would hold whatever the placement).
    std::memset(exposed_.data(), 0xA5, plan_.exposed_bytes);
  }
  session_.Put("region", exposed_.Describe());

  QpCaps caps;
  caps.type = plan_.qp_type;
  caps.send_depth = static_cast<std::uint32_t>(o.tx_depth);
  caps.send_sges = static_cast<std::uint32_t>(o.sge);
  caps.inline_bytes = plan_.max_inline_bytes;
  json endpoints = json::object();
  std::vector<QpLink> links;
  if (plan_.passive) SetupPassive(caps, endpoints, links);
  if (plan_.active) SetupActive(caps, links);
  session_.Put("endpoints", endpoints);
  Connect(links);
}

// One receive QP per (source peer, lane) when connected; per thread x qp for UD.
void TputRun::SetupPassive(const QpCaps& caps, json& endpoints, std::vector<QpLink>& links) {
  const Options& o = session_.options();
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const std::string self = SelfName(session_);
  recv_slot_bytes_ = plan_.slot_bytes + (plan_.qp_type == IBV_QPT_UD ? kUdGrhBytes : 0);
  recv_depth_ = std::min<std::uint32_t>(static_cast<std::uint32_t>(device.attr().max_qp_wr),
                                        std::max<std::uint32_t>(kMinRecvDepth, 2u * o.tx_depth));
  passive_.resize(static_cast<std::size_t>(o.threads));
  const bool receives = plan_.kind == VerbKind::kSend;
  std::size_t qps_total = plan_.qp_type == IBV_QPT_UD ? std::size_t(o.threads * o.qp)
                                                      : peers.size() * plan_.lanes;
  for (auto& thread : passive_) {
    const std::size_t mine = DivideRoundUp(qps_total, passive_.size());
    thread.cq = CreateCq(device, static_cast<int>(std::max<std::size_t>(1, mine) * (receives ? recv_depth_ : 1)));
    if (receives) thread.recv = MakeRegion(session_, mine * recv_depth_ * recv_slot_bytes_);
  }
  QpCaps passive_caps = caps;
  passive_caps.send_depth = 1;
  passive_caps.send_sges = 1;
  passive_caps.inline_bytes = 0;
  passive_caps.recv_depth = receives ? recv_depth_ : 1;
  json passive_endpoints = json::object();
  for (std::size_t q = 0; q < qps_total; ++q) {
    PassiveThread& thread = passive_[q % passive_.size()];
    passive_qps_.push_back(CreateQp(device, session_.pd(), thread.cq.get(), thread.cq.get(), passive_caps));
    thread.qps.push_back(passive_qps_.back().get());
    if (plan_.qp_type == IBV_QPT_UD) {
      passive_endpoints["ud"].push_back(ToJson(Endpoint{passive_qps_.back()->qp_num, 0, session_.address()}));
    } else {
      const std::string& peer = peers[q / plan_.lanes];
      links.push_back({peer, TputLink(peer, self, static_cast<std::uint32_t>(q % plan_.lanes)),
                       passive_qps_.back().get()});
    }
  }
  endpoints["passive"] = passive_endpoints;
}

// Per thread, qp QPs per peer (connected) or qp UD QPs shared by all peers.
void TputRun::SetupActive(const QpCaps& caps, std::vector<QpLink>& links) {
  const Options& o = session_.options();
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const std::string self = SelfName(session_);
  active_.resize(static_cast<std::size_t>(o.threads));
  for (std::size_t t = 0; t < active_.size(); ++t) {
    ActiveThread& thread = active_[t];
    const std::size_t queues = plan_.qp_type == IBV_QPT_UD ? std::size_t(o.qp) : peers.size() * o.qp;
    const std::uint64_t cq_depth = queues * static_cast<std::uint64_t>(o.tx_depth);
    if (cq_depth > static_cast<std::uint64_t>(device.attr().max_cqe)) {
      FailUnsupported(queues, " QPs x --tx-depth ", o.tx_depth, " = ", cq_depth, " CQ entries exceed ",
                      device.name(), "'s max_cqe ", device.attr().max_cqe, ": lower --tx-depth or --qp");
    }
    thread.cq = CreateCq(device, static_cast<int>(cq_depth));
    for (std::size_t q = 0; q < queues; ++q) {
      thread.qps.push_back(CreateQp(device, session_.pd(), thread.cq.get(), thread.cq.get(), caps));
      SendQueue& queue = thread.queues.emplace_back();
      queue.qp = thread.qps.back().get();
      queue.signaled_post_tsc.resize(std::bit_ceil(std::uint64_t(o.tx_depth / o.cq_mod + 2)));
      queue.until_signal = static_cast<std::uint32_t>(o.cq_mod);
      const std::uint32_t lane = static_cast<std::uint32_t>(t * o.qp + q % o.qp);
      if (plan_.qp_type != IBV_QPT_UD) links.push_back({peers[q / o.qp], TputLink(self, peers[q / o.qp], lane), queue.qp});
    }
    const std::uint64_t local_slots = queues * plan_.slots_per_lane;
    thread.local = MakeRegionOnNode(session_, std::max<std::uint64_t>(local_slots * plan_.local_stride, kPageBytes),
                                    o.use_hugepages, SourceBufferNode(session_));
    if (plan_.kind == VerbKind::kCas) thread.cas_guess.assign(static_cast<std::size_t>(o.counters), 0);
  }
  if (plan_.keyed) {
    const KeyAddresses keys({plan_.keys, o.distribution == "zipf", o.zipf_theta, o.placement == "clustered", o.seed});
    for (std::size_t t = 0; t < active_.size(); ++t) {
      active_[t].key_addresses = keys.Stream(std::uint64_t{SourceIndex(session_)} * active_.size() + t);
      active_[t].sampled_slots.assign(kSampledKeyReads, 0);
    }
  }
}

// Connects the QP pairs (or activates the UD QPs), fills the receive queues and learns the
// active threads' targets; returns once every process is connected.
void TputRun::Connect(const std::vector<QpLink>& links) {
  json peer_endpoints = json::object();
  for (const auto& peer : session_.PeerNames()) peer_endpoints[peer] = session_.Get(peer, "endpoints");
  if (plan_.qp_type != IBV_QPT_UD) {
    session_.ConnectQps(links, plan_.max_rd_atomic);
  } else if (plan_.passive) {
    for (std::size_t q = 0; q < passive_qps_.size(); ++q) {
      ActivateUdQp(passive_qps_[q].get(), session_.device(), static_cast<std::uint32_t>(q));
    }
  }
  if (plan_.passive && plan_.kind == VerbKind::kSend) {
    for (auto& thread : passive_) {
      RecvRefill refill;
      for (std::size_t q = 0; q < thread.qps.size(); ++q) {
        for (std::uint32_t slot = 0; slot < recv_depth_; ++slot) refill.Add(*this, thread, q, slot);
      }
      refill.Post(thread);
    }
  }
  if (plan_.active) TargetPeers(peer_endpoints);
  session_.Barrier("connected");
}

void TputRun::TargetPeers(const json& endpoints_of_peers) {
  const Options& o = session_.options();
  const auto peers = session_.PeerNames();
  std::vector<RemoteRegion> regions;
  for (const auto& peer : peers) regions.push_back(RemoteRegion::FromJson(session_.Get(peer, "region")));
  const std::uint32_t source = SourceIndex(session_);
  for (std::size_t t = 0; t < active_.size(); ++t) {
    ActiveThread& thread = active_[t];
    if (plan_.qp_type == IBV_QPT_UD) {
      for (std::size_t q = 0; q < thread.queues.size(); ++q) {
        ActivateUdQp(thread.queues[q].qp, session_.device(), static_cast<std::uint32_t>(q));
      }
    }
    const std::size_t queues = plan_.qp_type == IBV_QPT_UD ? peers.size() * o.qp : thread.queues.size();
    for (std::size_t q = 0; q < queues; ++q) {
      const std::size_t p = q / o.qp;
      Target target;
      target.queue = plan_.qp_type == IBV_QPT_UD ? q % o.qp : q;
      target.peer = static_cast<int>(p);
      target.source = source;
      target.lane = static_cast<std::uint32_t>(t * o.qp + q % o.qp);
      target.local_lane = static_cast<std::uint32_t>(target.queue);
      target.remote = regions[p];
      if (plan_.qp_type == IBV_QPT_UD) {
        // Each lane sends to one of the peer's UD QPs, spread over them.
        const json& theirs = endpoints_of_peers[peers[p]].at("passive").at("ud");
        const Endpoint remote = EndpointFromJson(theirs.at(target.lane % theirs.size()));
        thread.ahs.push_back(CreateAh(session_.pd(), session_.device(), session_.address(), remote.address));
        target.ah = thread.ahs.back().get();
        target.remote_qpn = remote.qpn;
      }
      thread.targets.push_back(target);
    }
  }
}

}  // namespace rdmalab::bench::tput
