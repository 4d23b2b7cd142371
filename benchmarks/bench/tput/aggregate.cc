// tput's aggregation: the active threads' counts into this process's row and result, the
// active processes' results into the aggregator's row, the SENDs lost on the way, and the
// modeled PCIe traffic of a row.
#include <algorithm>

#include "benchmarks/bench/modeled_pcie.h"
#include "benchmarks/bench/peer_rates.h"
#include "benchmarks/bench/tput/run.h"

namespace rdmalab::bench::tput {
namespace {

using nlohmann::json;

json ThreadJson(int index, std::uint64_t ops, double duration_s, const LatencyHistogram& latency) {
  json out = {{"thread", index}, {"ops", ops}, {"duration_s", duration_s},
              {"mops", duration_s > 0 ? static_cast<double>(ops) / duration_s / 1e6 : 0.0}};
  if (latency.Count() > 0) {
    out["lat_us_mean"] = latency.Mean() / 1000.0;
    out["lat_us_p50"] = static_cast<double>(latency.Percentile(50)) / 1000.0;
    out["lat_us_p99"] = static_cast<double>(latency.Percentile(99)) / 1000.0;
  }
  return out;
}

}  // namespace

// The active threads' rates and latencies into `row`; returns what this process reports to
// the others as its result of the size.
json TputRun::SumActiveThreads(std::uint32_t size, ResultRow& row) {
  const Options& o = session_.options();
  const auto peers = session_.PeerNames();
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
    row.per_thread.push_back(ThreadJson(static_cast<int>(t), thread.ops, thread.duration_s, thread.latency));
    cas_successes += thread.cas_successes;
    for (const auto& target : thread.targets) {
      const std::string& peer = peers[static_cast<std::size_t>(target.peer)];
      per_peer_ops[peer] = per_peer_ops.value(peer, std::uint64_t{0}) + target.measured_posts;
    }
    for (std::size_t q = 0; q < thread.queues.size(); ++q) {
      const std::uint64_t posted_of_size = thread.queues[q].posted - thread.queues[q].posted_before_size;
      posted += thread.queues[q].posted;
      posted_size += posted_of_size;
      if (plan_.qp_type != IBV_QPT_UD) {
        lane_posts[peers[q / static_cast<std::size_t>(o.qp)]][std::to_string(t * o.qp + q % o.qp)] = posted_of_size;
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
  return {{"ops", row.ops}, {"duration_s", row.duration_s}, {"per_peer_ops", per_peer_ops},
          {"lane_posts", lane_posts}, {"posted_total", posted}, {"posted_size", posted_size},
          {"cas_successes", cas_successes}};
}

// Everyone who posted toward this process (a passive process's peers are all active), as
// they reported it, and this process's own posting.
json TputRun::GatherActiveResults(const std::string& suffix, const json& mine) {
  json active_results = json::object();
  if (plan_.passive) {
    for (const auto& name : session_.PeerNames()) active_results[name] = session_.Get(name, "result" + suffix);
  }
  if (plan_.active) active_results[SelfName(session_)] = mine;
  return active_results;
}

// The aggregator's row is the aggregate of every active process, each one's rate over its
// own window; an active process with several peers lists its rate towards each.
void TputRun::SumActiveProcesses(const json& active_results, const json& mine, ResultRow& row) {
  if (session_.is_aggregator() && session_.options().direction != "outbound") {
    row.ops = 0;
    row.duration_s = 0;
    row.rate_measured = true;
    for (const auto& [name, result] : active_results.items()) {
      const double duration = result.at("duration_s").get<double>();
      const auto ops = result.at("ops").get<std::uint64_t>();
      row.ops += ops;
      row.duration_s = std::max(row.duration_s, duration);
      row.per_peer.push_back(PeerRate(name, ops, duration));
    }
  } else if (plan_.active && session_.PeerNames().size() > 1) {
    for (const auto& [peer, ops] : mine.at("per_peer_ops").items()) {
      row.per_peer.push_back(PeerRate(peer, ops.get<std::uint64_t>(), row.duration_s));
    }
  }
}

// SENDs received against SENDs the peers completed: UD may lose some.
void TputRun::CountLoss(const json& active_results, ResultRow& row) {
  std::uint64_t received = 0, sent = 0;
  for (const auto& thread : passive_) received += thread.received;
  for (const auto& [name, result] : active_results.items()) {
    if (name != SelfName(session_)) sent += result.at("posted_size").get<std::uint64_t>();
  }
  row.extra["received_ops"] = received;
  row.extra["sent_ops"] = sent;
  row.extra["loss_fraction"] = sent > 0 ? 1.0 - static_cast<double>(received) / static_cast<double>(sent) : 0.0;
}

json TputRun::ModeledPcieRow(std::uint32_t size, const ResultRow& row) {
  const Options& o = session_.options();
  const bool inlined = size <= plan_.inline_threshold && !IsAtomicKind(plan_.kind) && plan_.kind != VerbKind::kRead;
  const WorkShape shape{plan_.kind, plan_.qp_type, size, inlined, o.header_only, o.sge, o.post_list, o.cq_mod,
                        session_.device().ethernet(), MtuBytes(session_.address().mtu)};
  json modeled = ModeledPcie(shape, row.ops, plan_.active);
  modeled["size_bytes"] = size;
  return modeled;
}

}  // namespace rdmalab::bench::tput
