// tput and atomics: windowed throughput. The active side (clients for inbound, the server
// for outbound, every node for all-to-all) keeps up to --tx-depth WRs in flight per QP,
// posting --post_list at a time and signaling one in --cq-mod; the passive side exposes
// memory and, for SENDs, keeps RECVs posted.
// One class split by concern, as eRPC splits its Rpc across rpc_impl/: setup.cc creates and
// connects the QPs, loop.cc holds the measured loops (no allocation, lock or syscall beyond
// the provider's post/poll), aggregate.cc turns the threads' and peers' counts into a row
// and validates it, run.cc runs the sizes.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/key_addresses.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/tput_plan.h"

namespace rdmalab::bench::tput {

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

class TputRun {
 public:
  explicit TputRun(Session& session) : session_(session), plan_(MakeTputPlan(session)) {}
  Report Run();

 private:
  // setup.cc
  void Setup();
  void SetupPassive(const QpCaps& caps, nlohmann::json& endpoints, std::vector<QpLink>& links);
  void SetupActive(const QpCaps& caps, std::vector<QpLink>& links);
  void Connect(const std::vector<QpLink>& links);
  void TargetPeers(const nlohmann::json& endpoints_of_peers);

  // loop.cc
  void RunActive(ActiveThread& thread, int index, std::uint32_t size);
  void Drain(ActiveThread& thread, std::uint32_t size, std::uint64_t deadline_ticks, std::uint64_t& rng);
  void PrepareBatch(ActiveThread& thread, const Target& target, std::uint32_t size, int count);
  inline void PostBatch(ActiveThread& thread, Target& target, SendQueue& queue, std::uint32_t size, int count,
                        bool force_signal, bool measuring, std::uint64_t& rng);
  void PostSinglesUntilFull(ActiveThread& thread, Target& target, SendQueue& queue, std::uint32_t size,
                            std::uint64_t window, bool measuring);
  void AddressKeyedRead(ActiveThread& thread, const Target& target, std::uint32_t size, ibv_send_wr& wr);
  void AddressAtomic(ActiveThread& thread, const Target& target, std::uint8_t* local, ibv_send_wr& wr,
                     std::uint64_t& rng);
  std::uint64_t PollSends(ActiveThread& thread, bool measuring);
  inline void LearnCasResults(ActiveThread& thread, std::size_t queue, std::uint64_t from, std::uint64_t upto);
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

  // run.cc
  ResultRow Measure(std::size_t size_index, std::uint32_t size);

  // aggregate.cc
  nlohmann::json SumActiveThreads(std::uint32_t size, ResultRow& row);
  nlohmann::json GatherActiveResults(const std::string& suffix, const nlohmann::json& mine);
  void SumActiveProcesses(const nlohmann::json& active_results, const nlohmann::json& mine, ResultRow& row);
  void CountLoss(const nlohmann::json& active_results, ResultRow& row);
  nlohmann::json ModeledPcieRow(std::uint32_t size, const ResultRow& row);

  // validate.cc
  void FillSourceSlots(std::uint32_t size);
  nlohmann::json ValidatePassive(std::uint32_t size, const nlohmann::json& active_results);
  nlohmann::json ValidateActiveReads(std::uint32_t size);
  std::uint8_t* SourceSlot(const ActiveThread& thread, const Target& target, std::uint32_t slot) const;

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

}  // namespace rdmalab::bench::tput
