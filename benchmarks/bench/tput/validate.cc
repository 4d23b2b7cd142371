// tput's --validate: the active side's source slots filled with each slot's pattern before a
// size, and afterwards the passive side's memory, RECVs or counters (and the active side's
// READ results) checked against what the active side posted.
#include <cstring>

#include "benchmarks/bench/tput/run.h"

namespace rdmalab::bench::tput {

using nlohmann::json;

// The active side's buffer of `slot` towards `target`, as --validate lays it out.
std::uint8_t* TputRun::SourceSlot(const ActiveThread& thread, const Target& target, std::uint32_t slot) const {
  return thread.local.data() + (std::uint64_t{target.local_lane} * plan_.slots_per_lane + slot) * plan_.slot_bytes;
}

// WRITE and SEND sources carry their slot's pattern; READ targets start zeroed, so a READ
// that did not land shows.
void TputRun::FillSourceSlots(std::uint32_t size) {
  for (auto& thread : active_) {
    for (const auto& target : thread.targets) {
      for (std::uint32_t slot = 0; slot < plan_.slots_per_lane; ++slot) {
        std::uint8_t* local = SourceSlot(thread, target, slot);
        if (plan_.kind == VerbKind::kRead) {
          std::memset(local, 0, plan_.slot_bytes);
        } else if (!IsAtomicKind(plan_.kind)) {
          FillPattern(local, size, plan_.Tag(target.source, target.lane, slot));
        }
      }
    }
  }
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

json TputRun::ValidateActiveReads(std::uint32_t size) {
  // Each local slot holds the last READ of the matching remote slot: that slot's pattern.
  std::uint64_t checked = 0, bad = 0;
  for (const auto& thread : active_) {
    for (const auto& target : thread.targets) {
      const SendQueue& queue = thread.queues[target.queue];
      const std::uint64_t posts = queue.posted - queue.posted_before_size;
      for (std::uint32_t slot = 0; slot < plan_.slots_per_lane && slot < posts; ++slot) {
        const std::uint8_t* local = SourceSlot(thread, target, slot);
        bad += PatternMismatches(local, size, plan_.Tag(target.source, target.lane, slot));
        ++checked;
      }
    }
  }
  return {{"checked_messages", checked}, {"bad_bytes", bad}, {"ok", bad == 0}};
}

}  // namespace rdmalab::bench::tput
