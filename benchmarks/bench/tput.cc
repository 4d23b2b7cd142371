// tput and atomics: windowed throughput. The active side (clients for inbound, the server
// for outbound, every node for all-to-all) keeps up to --tx-depth WRs in flight per QP,
// posting --post_list at a time and signaling one in --cq-mod; the passive side exposes
// memory and, for SENDs, keeps RECVs posted. The hot loops below allocate nothing, take no
// lock and make no syscall beyond the provider's post/poll.
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <functional>
#include <bit>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/key_addresses.h"
#include "benchmarks/bench/modeled_pcie.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/tput_plan.h"
#include "rdma/affinity.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

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

using nlohmann::json;

constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 48) - 1;
constexpr std::uint32_t kMinRecvDepth = 512;
// Keyed READs: each thread records the slots of its first READs of a payload size, for the
// row's key_reads summary (a store into a buffer sized at setup, never a growth).
constexpr std::size_t kSampledKeyReads = std::size_t{1} << 16;

struct SendQueue {
  ibv_qp* qp = nullptr;
  std::uint64_t posted = 0;
  std::uint64_t retired = 0;
  std::uint32_t next_slot = 0;     // posted % slots_per_lane, without a division
  std::uint32_t until_signal = 0;  // WRs left before the next signaled one
  std::uint64_t posted_before_size = 0;  // posted when the current payload size began
  // When each signaled WR was posted, a ring indexed by the WR's count among signaled ones:
  // one completion per signaled WR, in order, so the poller's count finds the same entry.
  std::vector<std::uint64_t> signaled_post_tsc;
  std::uint64_t signals_posted = 0;
  std::uint64_t signals_completed = 0;
};

struct Target {
  std::size_t queue = 0;      // index into the thread's send queues
  int peer = 0;               // index into the session's peer list
  std::uint32_t source = 0;   // our source index in the peer's region
  std::uint32_t lane = 0;     // our lane id at the peer
  std::uint32_t local_lane = 0;
  RemoteRegion remote;
  ibv_ah* ah = nullptr;       // UD only
  std::uint32_t remote_qpn = 0;
  std::uint64_t measured_posts = 0;
};

// What every batch of one (target, payload size, post list) shares, worked out once by
// PrepareBatch so that a post computes none of it.
struct PreparedBatch {
  const Target* target = nullptr;
  std::uint32_t size = 0;
  int count = 0;
  int sge_count = 0;
  unsigned inline_flag = 0;
  std::uint8_t* local_lane = nullptr;  // the target's slot 0 among our source buffers
  std::uint64_t remote_base = 0;       // the target's slot 0 in the peer's region
  std::uint32_t tag_base = 0;          // the target's slot 0's tag (SEND immediates)
};

struct ActiveThread {
  std::array<ibv_send_wr, kMaxPostList> wrs{};
  std::array<ibv_sge, kMaxPostList * kMaxSges> sges{};
  PreparedBatch prepared;
  CqPtr cq;
  std::vector<QpPtr> qps;
  std::vector<AhPtr> ahs;
  std::vector<SendQueue> queues;
  std::vector<Target> targets;
  Region local;
  std::vector<std::uint64_t> cas_guess;
  KeyAddresses key_addresses{KeySpace{}};
  std::vector<std::uint64_t> sampled_slots;
  std::size_t sampled = 0;
  // results of the current size
  std::uint64_t ops = 0;
  double duration_s = 0;
  std::uint64_t cas_successes = 0;
  LatencyHistogram latency;
};

struct PassiveThread {
  CqPtr cq;
  std::vector<ibv_qp*> qps;  // receive queues this thread serves
  Region recv;
  std::uint64_t received = 0;
  std::uint64_t bad_bytes = 0;
  std::uint64_t bad_messages = 0;
};

std::uint64_t NextRandom(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

class TputRun {
 public:
  explicit TputRun(Session& session) : session_(session), plan_(MakeTputPlan(session)) {}
  Report Run();

 private:
  void Setup();
  void TargetPeers(const json& endpoints_of_peers);
  void RunActive(ActiveThread& thread, int index, std::uint32_t size);
  void PrepareBatch(ActiveThread& thread, const Target& target, std::uint32_t size, int count);
  void PostBatch(ActiveThread& thread, Target& target, SendQueue& queue, std::uint32_t size, int count,
                 bool force_signal, bool measuring, std::uint64_t& rng);
  void PostSinglesUntilFull(ActiveThread& thread, Target& target, SendQueue& queue, std::uint32_t size,
                            std::uint64_t window, bool measuring);
  void AddressKeyedRead(ActiveThread& thread, const Target& target, std::uint32_t size, ibv_send_wr& wr);
  void AddressAtomic(ActiveThread& thread, const Target& target, std::uint8_t* local, ibv_send_wr& wr,
                     std::uint64_t& rng);
  std::uint64_t PollSends(ActiveThread& thread, bool measuring);
  void LearnCasResults(ActiveThread& thread, std::size_t queue, std::uint64_t from, std::uint64_t upto);
  void RunPassive(PassiveThread& thread, std::uint32_t size);
  // Consumed RECVs re-posted as one list per run of completions of a queue: a receiver
  // that is behind refills a poll's worth with one post, as NIC drivers do.
  class RecvRefill {
   public:
    void Add(const TputRun& run, PassiveThread& thread, std::size_t queue, std::uint32_t slot);
    void Post(PassiveThread& thread);

   private:
    ibv_recv_wr wrs_[kPollBatch];
    ibv_sge sges_[kPollBatch];
    std::size_t queue_ = 0;
    int count_ = 0;
  };
  ResultRow Measure(std::size_t size_index, std::uint32_t size);
  json ValidatePassive(std::uint32_t size, const json& posts_by_source);

  Session& session_;
  TputPlan plan_;
  std::vector<ActiveThread> active_;
  std::vector<PassiveThread> passive_;
  std::vector<QpPtr> passive_qps_;
  Region exposed_;                    // what peers READ, WRITE, SEND into, or hit with atomics
  std::atomic<bool> passive_stop_{false};
  std::uint32_t recv_slot_bytes_ = 0;
  std::uint32_t recv_depth_ = 0;
};

void TputRun::Setup() {
  const Options& o = session_.options();
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
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
  const std::string self = SelfName(session_);

  // Passive receive side: one QP per (source peer, lane) when connected; per thread x qp for UD.
  if (plan_.passive) {
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

  // Active send side: per thread, qp QPs per peer (connected) or qp UD QPs shared by all peers.
  if (plan_.active) {
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
  session_.Put("endpoints", endpoints);

  json peer_endpoints = json::object();
  for (const auto& peer : peers) peer_endpoints[peer] = session_.Get(peer, "endpoints");
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
      for (std::size_t p = 0; p < peers.size(); ++p) {
        const json& theirs = endpoints_of_peers[peers[p]].at("passive").at("ud");
        for (int q = 0; q < o.qp; ++q) {
          const std::uint32_t lane = static_cast<std::uint32_t>(t * o.qp + q);
          const Endpoint remote = EndpointFromJson(theirs.at(lane % theirs.size()));
          thread.ahs.push_back(CreateAh(session_.pd(), session_.device(), session_.address(), remote.address));
          Target target;
          target.queue = static_cast<std::size_t>(q);
          target.peer = static_cast<int>(p);
          target.source = source;
          target.lane = lane;
          target.local_lane = static_cast<std::uint32_t>(q);
          target.remote = regions[p];
          target.ah = thread.ahs.back().get();
          target.remote_qpn = remote.qpn;
          thread.targets.push_back(target);
        }
      }
      continue;
    }
    for (std::size_t q = 0; q < thread.queues.size(); ++q) {
      const std::size_t p = q / o.qp;
      const std::uint32_t lane = static_cast<std::uint32_t>(t * o.qp + q % o.qp);
      Target target;
      target.queue = q;
      target.peer = static_cast<int>(p);
      target.source = source;
      target.lane = lane;
      target.local_lane = static_cast<std::uint32_t>(q);
      target.remote = regions[p];
      thread.targets.push_back(target);
    }
  }
}

void TputRun::RecvRefill::Add(const TputRun& run, PassiveThread& thread, std::size_t queue, std::uint32_t slot) {
  if (count_ != 0 && (queue != queue_ || count_ == kPollBatch)) Post(thread);
  queue_ = queue;
  const std::uint64_t offset = (queue * run.recv_depth_ + slot) * std::uint64_t{run.recv_slot_bytes_};
  sges_[count_] = {reinterpret_cast<std::uintptr_t>(thread.recv.data() + offset), run.recv_slot_bytes_,
                   thread.recv.mr->lkey};
  ibv_recv_wr& wr = wrs_[count_];
  wr.wr_id = (std::uint64_t{queue} << 32) | slot;
  wr.sg_list = &sges_[count_];
  wr.num_sge = 1;
  wr.next = nullptr;
  if (count_ != 0) wrs_[count_ - 1].next = &wr;
  ++count_;
}

void TputRun::RecvRefill::Post(PassiveThread& thread) {
  if (count_ == 0) return;
  ibv_recv_wr* bad = nullptr;
  const int error_number = ibv_post_recv(thread.qps[queue_], wrs_, &bad);
  if (error_number != 0) FailErrno("ibv_post_recv (re-posting consumed RECVs)", error_number);
  count_ = 0;
}

void TputRun::PrepareBatch(ActiveThread& thread, const Target& target, std::uint32_t size, int count) {
  // Everything that stays the same from batch to batch of one target is written once;
  // PostBatch then fills in only ids, flags, slot addresses and immediates.
  const Options& o = session_.options();
  const std::uint32_t sge_count = plan_.kind == VerbKind::kSend && size == 0 ? 0 : static_cast<std::uint32_t>(o.sge);
  for (int i = 0; i < count; ++i) {
    ibv_send_wr& wr = thread.wrs[static_cast<std::size_t>(i)];
    wr = {};
    wr.next = i + 1 < count ? &thread.wrs[static_cast<std::size_t>(i) + 1] : nullptr;
    ibv_sge* sges = &thread.sges[static_cast<std::size_t>(i) * kMaxSges];
    wr.sg_list = sges;
    wr.num_sge = static_cast<int>(sge_count);
    for (std::uint32_t s = 0; s < sge_count; ++s) {
      sges[s].length = s + 1 == sge_count ? size - (sge_count - 1) * (size / sge_count) : size / sge_count;
      sges[s].lkey = thread.local.mr->lkey;
    }
    switch (plan_.kind) {
      case VerbKind::kWrite:
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.rkey = target.remote.rkey;
        break;
      case VerbKind::kRead:
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.rkey = target.remote.rkey;
        break;
      case VerbKind::kSend:
        wr.opcode = plan_.send_with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        if (plan_.qp_type == IBV_QPT_UD) wr.wr.ud = {target.ah, target.remote_qpn, kUdQkey};
        break;
      case VerbKind::kCas:
      case VerbKind::kFaa:
        wr.num_sge = 1;
        sges[0] = {0, 8, thread.local.mr->lkey};
        wr.opcode = plan_.kind == VerbKind::kCas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.rkey = target.remote.rkey;
        wr.wr.atomic.compare_add = 1;
        break;
    }
  }
  PreparedBatch& batch = thread.prepared;
  batch.target = &target;
  batch.size = size;
  batch.count = count;
  // Atomics address their one 8-byte SGE themselves (AddressAtomic).
  batch.sge_count = plan_.kind == VerbKind::kCas || plan_.kind == VerbKind::kFaa ? 0 : static_cast<int>(sge_count);
  batch.inline_flag = size <= plan_.inline_threshold && (plan_.kind == VerbKind::kWrite || plan_.kind == VerbKind::kSend)
                          ? unsigned{IBV_SEND_INLINE}
                          : 0u;
  batch.local_lane = thread.local.data() + plan_.local_offset +
                     std::uint64_t{target.local_lane} * plan_.slots_per_lane * plan_.local_stride;
  batch.tag_base = plan_.Tag(target.source, target.lane, 0);
  batch.remote_base = target.remote.address + std::uint64_t{batch.tag_base} * plan_.slot_bytes;
}

void TputRun::AddressKeyedRead(ActiveThread& thread, const Target& target, std::uint32_t size, ibv_send_wr& wr) {
  const std::uint64_t key_slot = thread.key_addresses.NextSlot();
  if (thread.sampled < kSampledKeyReads) thread.sampled_slots[thread.sampled++] = key_slot;
  wr.wr.rdma.remote_addr = target.remote.address + key_slot * size;
}

void TputRun::AddressAtomic(ActiveThread& thread, const Target& target, std::uint8_t* local, ibv_send_wr& wr,
                            std::uint64_t& rng) {
  const Options& o = session_.options();
  const std::uint64_t counter = o.counters == 1 ? 0 : NextRandom(rng) % static_cast<std::uint64_t>(o.counters);
  wr.sg_list[0].addr = reinterpret_cast<std::uintptr_t>(local);
  wr.wr.atomic.remote_addr = target.remote.address + counter * static_cast<std::uint64_t>(o.counter_stride);
  if (plan_.kind == VerbKind::kCas) {
    // The slot remembers which counter it asked about, so the completion can learn the value.
    wr.wr.atomic.compare_add = thread.cas_guess[counter];
    wr.wr.atomic.swap = thread.cas_guess[counter] + 1;
    std::memcpy(local + 8, &counter, sizeof(counter));
    std::memcpy(local + 16, &wr.wr.atomic.compare_add, sizeof(std::uint64_t));
  }
}

// Inline in the rate loop: a call per post would add its own prologue to every WR's cost.
[[gnu::always_inline]] inline void TputRun::PostBatch(ActiveThread& thread, Target& target, SendQueue& queue,
                                                      std::uint32_t size, int count, bool force_signal,
                                                      bool measuring, std::uint64_t& rng) {
  if (thread.prepared.target != &target || thread.prepared.size != size || thread.prepared.count != count) {
    PrepareBatch(thread, target, size, count);
  }
  // The benchmark's own cost per WR, paid in front of the provider's: on a NIC whose post is
  // cheap it would set the rate. Each field is read where it is used, so a post of one WR
  // (the usual doorbell) reads only what its verb needs, and no loop hoists the rest into spills.
  const PreparedBatch& prepared = thread.prepared;
  const std::uint32_t cq_mod = static_cast<std::uint32_t>(session_.options().cq_mod);
  // wr_ids are (queue << 48) | (seq + 1); seq + 1 stays below 2^48, so adding i carries nothing.
  const std::uint64_t first_wr_id = (std::uint64_t{target.queue} << 48) | (queue.posted + 1);
  std::uint32_t slot = queue.next_slot;
  std::uint32_t until_signal = queue.until_signal;
  auto fill = [&](int i) __attribute__((always_inline)) {
    const bool signaled = force_signal || --until_signal == 0;
    if (until_signal == 0) until_signal = cq_mod;
    ibv_send_wr& wr = thread.wrs[static_cast<std::size_t>(i)];
    wr.wr_id = first_wr_id + static_cast<std::uint64_t>(i);
    wr.send_flags = (signaled ? unsigned{IBV_SEND_SIGNALED} : 0u) | prepared.inline_flag;
    std::uint8_t* const local = prepared.local_lane + std::uint64_t{slot} * plan_.local_stride;
    ibv_sge* const sges = wr.sg_list;
    std::uint64_t offset = 0;
    for (int s = 0; s < prepared.sge_count; ++s) {
      sges[s].addr = reinterpret_cast<std::uintptr_t>(local) + offset;
      offset += sges[s].length;
    }
    switch (plan_.kind) {
      case VerbKind::kWrite:
        wr.wr.rdma.remote_addr = prepared.remote_base + std::uint64_t{slot} * plan_.slot_bytes;
        break;
      case VerbKind::kRead:
        if (plan_.keyed) {
          AddressKeyedRead(thread, target, size, wr);
        } else {
          wr.wr.rdma.remote_addr = prepared.remote_base + std::uint64_t{slot} * plan_.slot_bytes;
        }
        break;
      case VerbKind::kSend:
        wr.imm_data = prepared.tag_base + slot;
        break;
      case VerbKind::kCas:
      case VerbKind::kFaa:
        AddressAtomic(thread, target, local, wr, rng);
        break;
    }
    if (signaled) {
      queue.signaled_post_tsc[queue.signals_posted++ & (queue.signaled_post_tsc.size() - 1)] =
          measuring ? session_.clock().Now() : 0;
    }
    slot = slot + 1 == plan_.slots_per_lane ? 0 : slot + 1;
  };
  if (count == 1) {
    fill(0);
  } else {
    for (int i = 0; i < count; ++i) fill(i);
  }
  // A forced signal (the drain) resets the countdown so the next WR is not signaled early.
  queue.until_signal = force_signal ? cq_mod : until_signal;
  queue.next_slot = slot;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(queue.qp, thread.wrs.data(), &bad);
  if (error_number != 0) {
    Fail("ibv_post_send of ", count, " WRs on QP ", queue.qp->qp_num, ": ", std::strerror(error_number));
  }
  queue.posted += static_cast<std::uint64_t>(count);
  if (measuring) target.measured_posts += static_cast<std::uint64_t>(count);
}

// The usual rate test, one WRITE or SEND per post, as a loop of its own that fills the
// window: what changes from WR to WR (slot, countdown to the next signal, id, addresses)
// lives in registers across the provider's call, where PostBatch reloads it from the run's
// structures after every post. The same WRs as PostBatch with a list of one, at about half
// its instructions per WR, so that the benchmark's share does not set the rate.
[[gnu::noinline]] void TputRun::PostSinglesUntilFull(ActiveThread& thread, Target& target, SendQueue& queue,
                                                     std::uint32_t size, std::uint64_t window, bool measuring) {
  if (queue.posted - queue.retired >= window) return;
  if (thread.prepared.target != &target || thread.prepared.size != size || thread.prepared.count != 1) {
    PrepareBatch(thread, target, size, 1);
  }
  const PreparedBatch& prepared = thread.prepared;
  const TscClock& clock = session_.clock();
  const std::uint32_t cq_mod = static_cast<std::uint32_t>(session_.options().cq_mod);
  const std::uint32_t slots = plan_.slots_per_lane;
  const std::uint64_t local_stride = plan_.local_stride;
  const std::uint64_t remote_stride = plan_.slot_bytes;
  const std::uint64_t local_base = reinterpret_cast<std::uintptr_t>(prepared.local_lane);
  const std::uint64_t remote_base = prepared.remote_base;
  const std::uint32_t tag_base = prepared.tag_base;
  const unsigned inline_flag = prepared.inline_flag;
  const bool write = plan_.kind == VerbKind::kWrite;
  const bool has_sge = prepared.sge_count == 1;
  const std::uint64_t tsc_mask = queue.signaled_post_tsc.size() - 1;
  std::uint64_t* const signaled_post_tsc = queue.signaled_post_tsc.data();
  ibv_send_wr& wr = thread.wrs[0];
  ibv_sge* const sge = wr.sg_list;
  ibv_qp* const qp = queue.qp;
  const std::uint64_t first_posted = queue.posted;
  const std::uint64_t end = queue.retired + window;
  const std::uint64_t id_of_queue = std::uint64_t{target.queue} << 48;
  std::uint64_t posted = first_posted;
  std::uint64_t signals_posted = queue.signals_posted;
  std::uint32_t slot = queue.next_slot;
  std::uint32_t until_signal = queue.until_signal;
  do {
    wr.wr_id = id_of_queue | (posted + 1);
    wr.send_flags = inline_flag;
    if (--until_signal == 0) {
      until_signal = cq_mod;
      wr.send_flags = inline_flag | IBV_SEND_SIGNALED;
      signaled_post_tsc[signals_posted++ & tsc_mask] = measuring ? clock.Now() : 0;
    }
    if (has_sge) sge->addr = local_base + std::uint64_t{slot} * local_stride;
    if (write) {
      wr.wr.rdma.remote_addr = remote_base + std::uint64_t{slot} * remote_stride;
    } else {
      wr.imm_data = tag_base + slot;
    }
    slot = slot + 1 == slots ? 0 : slot + 1;
    ibv_send_wr* bad = nullptr;
    const int error_number = ibv_post_send(qp, &wr, &bad);
    if (error_number != 0) Fail("ibv_post_send of 1 WR on QP ", qp->qp_num, ": ", std::strerror(error_number));
    ++posted;
  } while (posted != end);
  queue.posted = posted;
  queue.signals_posted = signals_posted;
  queue.next_slot = slot;
  queue.until_signal = until_signal;
  if (measuring) target.measured_posts += posted - first_posted;
}

void TputRun::LearnCasResults(ActiveThread& thread, std::size_t queue, std::uint64_t from, std::uint64_t upto) {
  // WRs of one QP complete in order, so every CAS up to `upto` has written its result.
  // Slots restart at 0 with each payload size (PostBatch's next_slot).
  const std::uint8_t* lane = thread.local.data() + std::uint64_t{queue} * plan_.slots_per_lane * plan_.slot_bytes;
  const std::uint64_t first_of_size = thread.queues[queue].posted_before_size;
  for (std::uint64_t seq = from; seq < upto; ++seq) {
    const std::uint8_t* slot = lane + ((seq - first_of_size) % plan_.slots_per_lane) * plan_.slot_bytes;
    std::uint64_t old_value, counter, compare;
    std::memcpy(&old_value, slot, 8);
    std::memcpy(&counter, slot + 8, 8);
    std::memcpy(&compare, slot + 16, 8);
    const bool swapped = old_value == compare;
    thread.cas_successes += swapped;
    thread.cas_guess[counter] = swapped ? compare + 1 : old_value;
  }
}

std::uint64_t TputRun::PollSends(ActiveThread& thread, bool measuring) {
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(thread.cq.get(), kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on the send CQ");
  std::uint64_t retired = 0;
  const std::uint64_t now = measuring ? session_.clock().Now() : 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "measuring throughput");
    SendQueue& queue = thread.queues[wc.wr_id >> 48];
    const std::uint64_t upto = wc.wr_id & kSeqMask;
    if (plan_.kind == VerbKind::kCas) LearnCasResults(thread, wc.wr_id >> 48, queue.retired, upto);
    retired += upto - queue.retired;
    queue.retired = upto;
    const std::uint64_t posted_at =
        queue.signaled_post_tsc[queue.signals_completed++ & (queue.signaled_post_tsc.size() - 1)];
    if (measuring && posted_at != 0) thread.latency.Record(session_.clock().TicksToNs(now - posted_at));
  }
  return retired;
}

void TputRun::RunActive(ActiveThread& thread, int index, std::uint32_t size) {
  const Options& o = session_.options();
  const TscClock& clock = session_.clock();
  const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o.duration_s * 1e9));
  const std::uint64_t iterations = o.duration_s > 0 ? 0 : IterationsOrDefault(o, 100'000);
  const std::uint64_t deadline_ticks = session_.clock().Now() + clock.NsToTicks(session_.deadline_ns() - MonotonicNs());
  const int post_list = o.post_list;
  const std::uint64_t window = static_cast<std::uint64_t>(o.tx_depth);
  std::uint64_t rng = o.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(index) + 1;
  // CAS slots carry (result, counter, compare): each CAS needs its own slot until it completes.
  thread.latency.Clear();
  thread.sampled = 0;
  for (auto& queue : thread.queues) {
    queue.next_slot = 0;
    queue.posted_before_size = queue.posted;
  }
  for (auto& target : thread.targets) target.measured_posts = 0;

  const std::uint64_t start = session_.clock().Now();
  std::uint64_t measure_start = start + warmup_ticks;
  bool measuring = warmup_ticks == 0;
  std::uint64_t measured_ops = 0;
  std::uint64_t now = start;
  std::size_t next_target = 0;
  const std::size_t targets = thread.targets.size();
  const bool random_targets = o.direction == "alltoall";
  const bool single_posts = post_list == 1 && o.sge == 1 && !random_targets &&
                            (plan_.kind == VerbKind::kWrite || plan_.kind == VerbKind::kSend);
  for (;;) {
    // Fill windows before polling (as perftest does): one poll per many posts when
    // signaling is selective. Random targets (all-to-all) change with every batch.
    for (std::size_t k = 0; k < targets; ++k) {
      const std::size_t pick = random_targets ? NextRandom(rng) % targets : next_target;
      next_target = next_target + 1 == targets ? 0 : next_target + 1;
      Target& target = thread.targets[pick];
      SendQueue& queue = thread.queues[target.queue];
      if (single_posts) {
        PostSinglesUntilFull(thread, target, queue, size, window, measuring);
        continue;
      }
      do {
        if (queue.posted - queue.retired + static_cast<std::uint64_t>(post_list) > window) break;
        PostBatch(thread, target, queue, size, post_list, false, measuring, rng);
      } while (!random_targets);
    }
    const std::uint64_t retired = PollSends(thread, measuring);
    now = session_.clock().Now();
    if (measuring) {
      measured_ops += retired;
      if (iterations != 0 ? measured_ops >= iterations : now - measure_start >= duration_ticks) break;
    } else if (now >= measure_start) {
      measuring = true;
      measure_start = now;
    }
    if (now >= deadline_ticks) Fail("--timeout ", o.timeout_s, " s passed while measuring (", measured_ops, " ops done)");
    if (g_abort.load(std::memory_order_relaxed)) return;
  }
  thread.ops = measured_ops;
  thread.duration_s = static_cast<double>(clock.TicksToNs(now - measure_start)) / 1e9;

  // Drain: every queue ends with a signaled WR, so that every WR is known complete before
  // the peers tear their memory down.
  for (auto& target : thread.targets) {
    SendQueue& queue = thread.queues[target.queue];
    if (queue.until_signal != static_cast<std::uint32_t>(o.cq_mod) && queue.posted != queue.retired) {
      while (queue.posted - queue.retired + 1 > window) {
        PollSends(thread, false);
        if (session_.clock().Now() >= deadline_ticks) Fail("--timeout passed while draining the send queues");
      }
      PostBatch(thread, target, queue, size, 1, true, false, rng);
    }
  }
  for (auto& queue : thread.queues) {
    while (queue.retired != queue.posted) {
      PollSends(thread, false);
      if (session_.clock().Now() >= deadline_ticks) {
        Fail("--timeout passed while waiting for ", queue.posted - queue.retired,
             " outstanding WRs (is the peer alive?)");
      }
    }
  }
}

void TputRun::RunPassive(PassiveThread& thread, std::uint32_t size) {
  if (plan_.kind != VerbKind::kSend) return;
  const bool validate = session_.options().validate;
  const std::uint32_t payload_offset = plan_.qp_type == IBV_QPT_UD ? kUdGrhBytes : 0;
  ibv_wc completions[kPollBatch];
  RecvRefill refill;
  thread.received = thread.bad_bytes = thread.bad_messages = 0;
  // Stops only once the CQ is empty after the stop flag: every sender finished before the
  // flag was raised, so what is still queued belongs to this payload size.
  while (!g_abort.load(std::memory_order_relaxed)) {
    const bool stopping = passive_stop_.load(std::memory_order_acquire);
    const int n = ibv_poll_cq(thread.cq.get(), kPollBatch, completions);
    if (n == 0 && stopping) break;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving SENDs");
      const std::size_t queue = wc.wr_id >> 32;
      const std::uint32_t slot = static_cast<std::uint32_t>(wc.wr_id);
      if (validate) {
        const std::uint8_t* data = thread.recv.data() + (queue * recv_depth_ + slot) * std::uint64_t{recv_slot_bytes_};
        if (wc.byte_len != size + payload_offset) {
          ++thread.bad_messages;
        } else if (plan_.send_with_imm) {
          thread.bad_bytes += PatternMismatches(data + payload_offset, size, wc.imm_data);
        }
      }
      ++thread.received;
      refill.Add(*this, thread, queue, slot);
    }
    refill.Post(thread);
  }
}

json ThreadJson(int index, std::uint64_t ops, double duration_s, const LatencyHistogram* latency) {
  json out = {{"thread", index}, {"ops", ops}, {"duration_s", duration_s},
              {"mops", duration_s > 0 ? static_cast<double>(ops) / duration_s / 1e6 : 0.0}};
  if (latency != nullptr && latency->Count() > 0) {
    out["lat_us_mean"] = latency->Mean() / 1000.0;
    out["lat_us_p50"] = static_cast<double>(latency->Percentile(50)) / 1000.0;
    out["lat_us_p99"] = static_cast<double>(latency->Percentile(99)) / 1000.0;
  }
  return out;
}

ResultRow TputRun::Measure(std::size_t size_index, std::uint32_t size) {
  const Options& o = session_.options();
  const std::string suffix = "/" + std::to_string(size_index);
  const auto peers = session_.PeerNames();
  passive_stop_.store(false);
  std::exception_ptr passive_error;
  std::thread passive_runner;
  const bool receiving = plan_.passive && plan_.kind == VerbKind::kSend;
  if (receiving) {
    passive_runner = std::thread([&] {
      try {
        RunPinnedThreads(session_, o.threads, [&](int t) { RunPassive(passive_[static_cast<std::size_t>(t)], size); });
      } catch (...) {
        passive_error = std::current_exception();
      }
    });
  }
  const auto stop_receivers = [&] {
    passive_stop_.store(true);
    if (passive_runner.joinable()) passive_runner.join();
  };
  struct StopOnExit {
    const std::function<void()> stop;
    ~StopOnExit() { stop(); }
  } stop_on_exit{stop_receivers};

  session_.Barrier("start" + suffix);
  ResultRow row;
  row.size_bytes = size;
  row.payload_bytes_per_op = IsAtomicKind(plan_.kind) ? 8 : size;
  json mine = json::object();
  if (plan_.active) {
    RunPinnedThreads(session_, o.threads, [&](int t) { RunActive(active_[static_cast<std::size_t>(t)], t, size); });
    row.latency_ns = std::make_unique<LatencyHistogram>();
    row.latency_kind = "queueing";
    std::uint64_t posted = 0, posted_size = 0, cas_successes = 0;
    json per_peer_ops = json::object();
    json lane_posts = json::object();
    for (std::size_t t = 0; t < active_.size(); ++t) {
      const ActiveThread& thread = active_[t];
      row.ops += thread.ops;
      row.duration_s = std::max(row.duration_s, thread.duration_s);
      row.latency_ns->Merge(thread.latency);
      row.per_thread.push_back(ThreadJson(static_cast<int>(t), thread.ops, thread.duration_s, &thread.latency));
      cas_successes += thread.cas_successes;
      for (const auto& target : thread.targets) {
        const std::string& peer = peers[static_cast<std::size_t>(target.peer)];
        per_peer_ops[peer] = per_peer_ops.value(peer, std::uint64_t{0}) + target.measured_posts;
      }
      for (std::size_t q = 0; q < thread.queues.size(); ++q) {
        posted += thread.queues[q].posted;
        posted_size += thread.queues[q].posted - thread.queues[q].posted_before_size;
        if (plan_.qp_type != IBV_QPT_UD) {
          lane_posts[peers[q / static_cast<std::size_t>(o.qp)]][std::to_string(t * o.qp + q % o.qp)] =
              thread.queues[q].posted - thread.queues[q].posted_before_size;
        }
      }
    }
    if (plan_.keyed) {
      std::vector<std::uint64_t> sampled;
      for (const auto& thread : active_) {
        sampled.insert(sampled.end(), thread.sampled_slots.begin(), thread.sampled_slots.begin() + thread.sampled);
      }
      row.extra["key_reads"] = SummarizeKeyReads(active_.front().key_addresses, sampled, size);
    }
    mine = {{"ops", row.ops}, {"duration_s", row.duration_s}, {"per_peer_ops", per_peer_ops},
            {"lane_posts", lane_posts}, {"posted_total", posted}, {"posted_size", posted_size},
            {"cas_successes", cas_successes}};
    session_.Put("result" + suffix, mine);
  } else {
    row.rate_measured = false;
  }
  session_.Barrier("done" + suffix);
  stop_receivers();
  if (passive_error) std::rethrow_exception(passive_error);

  // Everyone who posted toward this process (a passive process's peers are all active),
  // as they reported it, and this process's own posting.
  json active_results = json::object();
  if (plan_.passive) {
    for (const auto& name : peers) active_results[name] = session_.Get(name, "result" + suffix);
  }
  if (plan_.active) active_results[SelfName(session_)] = mine;
  if (session_.is_aggregator() && o.direction != "outbound") {
    // The aggregate of every active process: each one's rate over its own window.
    row.ops = 0;
    row.duration_s = 0;
    row.rate_measured = true;
    for (const auto& [name, result] : active_results.items()) {
      const double duration = result.at("duration_s").get<double>();
      const auto ops = result.at("ops").get<std::uint64_t>();
      row.ops += ops;
      row.duration_s = std::max(row.duration_s, duration);
      row.per_peer.push_back({{"peer", name}, {"ops", ops}, {"mops", duration > 0 ? ops / duration / 1e6 : 0.0}});
    }
  } else if (plan_.active && peers.size() > 1) {
    for (const auto& [peer, ops] : mine.at("per_peer_ops").items()) {
      const auto count = ops.get<std::uint64_t>();
      row.per_peer.push_back({{"peer", peer}, {"ops", count},
                              {"mops", row.duration_s > 0 ? count / row.duration_s / 1e6 : 0.0}});
    }
  }
  if (receiving) {
    std::uint64_t received = 0, sent = 0;
    for (const auto& thread : passive_) received += thread.received;
    for (const auto& [name, result] : active_results.items()) {
      if (name != SelfName(session_)) sent += result.at("posted_size").get<std::uint64_t>();
    }
    row.extra["received_ops"] = received;
    row.extra["sent_ops"] = sent;
    row.extra["loss_fraction"] = sent > 0 ? 1.0 - static_cast<double>(received) / static_cast<double>(sent) : 0.0;
  }
  if (o.validate && plan_.passive) row.extra["validation"] = ValidatePassive(size, active_results);
  return row;
}

json TputRun::ValidatePassive(std::uint32_t size, const json& active_results) {
  const Options& o = session_.options();
  std::uint64_t checked = 0, bad = 0, bad_messages = 0;
  if (plan_.kind == VerbKind::kWrite) {
    // Every slot a source wrote holds that source's pattern for the slot.
    for (const auto& [name, result] : active_results.items()) {
      if (name == SelfName(session_)) continue;
      const auto slash = name.find('/');
      const std::uint32_t source = name.rfind("server", 0) == 0 ? 0u : std::stoul(name.substr(slash + 1));
      for (const auto& [lane_text, posts_json] : result.at("lane_posts").at(SelfName(session_)).items()) {
        const std::uint32_t lane = std::stoul(lane_text);
        const auto posts = posts_json.get<std::uint64_t>();
        for (std::uint32_t slot = 0; slot < plan_.slots_per_lane && slot < posts; ++slot) {
          const std::uint32_t tag = plan_.Tag(source, lane, slot);
          bad += PatternMismatches(exposed_.data() + plan_.RemoteOffset(source, lane, slot), size, tag);
          ++checked;
        }
      }
    }
  } else if (plan_.kind == VerbKind::kSend) {
    for (const auto& thread : passive_) {
      checked += thread.received;
      bad += thread.bad_bytes;
      bad_messages += thread.bad_messages;
    }
  } else if (IsAtomicKind(plan_.kind)) {
    // FAA: the counters sum to the number of FAAs; CAS: to the number of successful swaps.
    std::uint64_t sum = 0, expected = 0;
    for (int c = 0; c < o.counters; ++c) {
      std::uint64_t value;
      std::memcpy(&value, exposed_.data() + std::uint64_t(c) * std::uint64_t(o.counter_stride), 8);
      sum += value;
    }
    for (const auto& [name, result] : active_results.items()) {
      expected += result.at(plan_.kind == VerbKind::kFaa ? "posted_total" : "cas_successes").get<std::uint64_t>();
    }
    checked = expected;
    bad = sum > expected ? sum - expected : expected - sum;
    return {{"checked_ops", checked}, {"counter_sum", sum}, {"expected_sum", expected}, {"ok", bad == 0}};
  }
  return {{"checked_messages", checked}, {"bad_bytes", bad}, {"bad_messages", bad_messages},
          {"ok", bad == 0 && bad_messages == 0}};
}

json ValidateActiveReads(const TputPlan& plan, const std::vector<ActiveThread>& threads, std::uint32_t size) {
  // Each local slot holds the last READ of the matching remote slot: that slot's pattern.
  std::uint64_t checked = 0, bad = 0;
  for (const auto& thread : threads) {
    for (const auto& target : thread.targets) {
      const SendQueue& queue = thread.queues[target.queue];
      const std::uint64_t posts = queue.posted - queue.posted_before_size;
      for (std::uint32_t slot = 0; slot < plan.slots_per_lane && slot < posts; ++slot) {
        const std::uint8_t* local = thread.local.data() +
                                    (std::uint64_t{target.local_lane} * plan.slots_per_lane + slot) * plan.slot_bytes;
        bad += PatternMismatches(local, size, plan.Tag(target.source, target.lane, slot));
        ++checked;
      }
    }
  }
  return {{"checked_messages", checked}, {"bad_bytes", bad}, {"ok", bad == 0}};
}

Report TputRun::Run() {
  const Options& o = session_.options();
  Setup();
  Report report;
  bool valid = true;
  json checks = json::array();
  for (std::size_t i = 0; i < o.sizes.size(); ++i) {
    const std::uint32_t size = o.sizes[i];
    if (o.validate && plan_.active) {
      for (auto& thread : active_) {
        for (const auto& target : thread.targets) {
          for (std::uint32_t slot = 0; slot < plan_.slots_per_lane; ++slot) {
            std::uint8_t* local = thread.local.data() +
                                  (std::uint64_t{target.local_lane} * plan_.slots_per_lane + slot) * plan_.slot_bytes;
            if (plan_.kind == VerbKind::kRead) {
              std::memset(local, 0, plan_.slot_bytes);
            } else if (!IsAtomicKind(plan_.kind)) {
              FillPattern(local, size, plan_.Tag(target.source, target.lane, slot));
            }
          }
        }
      }
    }
    report.rows.push_back(Measure(i, size));
    ResultRow& row = report.rows.back();
    if (plan_.active || session_.is_aggregator()) {
      if (report.pcie_modeled.is_null()) report.pcie_modeled = {{"rows", json::array()}};
      WorkShape shape{plan_.kind, plan_.qp_type, size, size <= plan_.inline_threshold && !IsAtomicKind(plan_.kind) &&
                                                           plan_.kind != VerbKind::kRead,
                      o.header_only, o.sge, o.post_list, o.cq_mod, session_.device().ethernet(),
                      MtuBytes(session_.address().mtu)};
      json modeled = ModeledPcie(shape, row.ops, plan_.active);
      modeled["size_bytes"] = size;
      report.pcie_modeled["rows"].push_back(modeled);
    }
    if (o.validate && plan_.active && plan_.kind == VerbKind::kRead) {
      row.extra["validation"] = ValidateActiveReads(plan_, active_, size);
    }
    if (row.extra.contains("validation")) {
      checks.push_back(row.extra["validation"]);
      valid = valid && row.extra["validation"].at("ok").get<bool>();
    }
  }
  session_.Barrier("finished");
  report.validation = {{"enabled", o.validate}, {"checks", checks}, {"ok", valid}};
  if (plan_.kind == VerbKind::kSend && plan_.qp_type == IBV_QPT_UD) {
    report.notes.push_back("UD is unreliable: rates count SENDs completed by the sender; see loss_fraction");
  }
  return report;
}

}  // namespace

void CheckTput(Options& options) {
  if (options.verb.empty()) options.verb = "write";
  CheckThroughputOptions(options);
  DefaultSizes(options, 64);
}

void CheckAtomics(Options& options) {
  if (options.verb.empty()) options.verb = "faa";
  if (!IsAtomic(options.verb)) Fail("mode atomics with --verb ", options.verb, ": valid verbs are cas, faa");
  if (options.direction != "inbound") Fail("mode atomics with --direction ", options.direction, ": atomics run inbound");
  CheckThroughputOptions(options);
  DefaultSizes(options, 8);
}

Report RunTput(Session& session) { return TputRun(session).Run(); }

}  // namespace rdmalab::bench
