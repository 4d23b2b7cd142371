// tput's measured loops: the active side posts windows of WRs and polls their completions,
// the passive side re-posts the RECVs SENDs consume. They allocate nothing, take no lock and
// make no syscall beyond the provider's post/poll.
#include <cstring>

#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/tput/run.h"
#include "rdma/error.h"

namespace rdmalab::bench::tput {

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
  const std::uint64_t counter = o.counters == 1 ? 0 : XorShift(rng) % static_cast<std::uint64_t>(o.counters);
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

// Inline, for PollSends: CAS completions arrive at the rate of the posts.
inline void TputRun::LearnCasResults(ActiveThread& thread, std::size_t queue, std::uint64_t from, std::uint64_t upto) {
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
      const std::size_t pick = random_targets ? XorShift(rng) % targets : next_target;
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

  Drain(thread, size, deadline_ticks, rng);
}

// Every queue ends with a signaled WR, so that every WR is known complete before the peers
// tear their memory down.
void TputRun::Drain(ActiveThread& thread, std::uint32_t size, std::uint64_t deadline_ticks, std::uint64_t& rng) {
  const Options& o = session_.options();
  const std::uint64_t window = static_cast<std::uint64_t>(o.tx_depth);
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

}  // namespace rdmalab::bench::tput
