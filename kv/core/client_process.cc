#include "kv/core/client_process.h"

#include <algorithm>
#include <cstdio>

namespace rdmalab::kv {

using nlohmann::json;

WorkloadConfig WorkloadOf(const Options& o) {
  WorkloadConfig config;
  config.keys = o.keys;
  config.get_fraction = 1.0 - o.put_fraction;
  config.zipf = o.distribution == "zipf";
  config.zipf_theta = o.zipf_theta;
  config.value_bytes = static_cast<std::uint32_t>(o.value_size);
  config.key_bytes = static_cast<std::uint32_t>(o.key_size);
  config.seed = o.seed;
  Check(config);
  return config;
}

ClientPlan PlanOf(const Options& o) {
  ClientPlan plan;
  plan.window = static_cast<std::uint32_t>(o.window);
  plan.value_bytes = static_cast<std::uint32_t>(o.value_size);
  plan.validate = o.validate;
  plan.ops_per_client = o.iters;
  plan.warmup_ns = static_cast<std::uint64_t>(o.warmup_s * 1e9);
  plan.measure_ns = static_cast<std::uint64_t>(o.duration_s * 1e9);
  plan.retry_ns = static_cast<std::uint64_t>(o.retry_ms * 1e6);
  plan.drain_ns = std::max<std::uint64_t>(plan.retry_ns * 20, 2'000'000'000);
  plan.dead_after_ns = o.dead_after_ms == 0 ? 0
                                            : std::max<std::uint64_t>(static_cast<std::uint64_t>(o.dead_after_ms * 1e6),
                                                                      plan.retry_ns * kRetriesBeforeDead);
  return plan;
}

std::uint32_t GlobalClientId(const Session& session, int j) {
  return static_cast<std::uint32_t>(session.index() * session.options().clients + j);
}

Report FinishClientProcess(Session& session, const std::vector<ClientState>& clients,
                           const std::vector<ThreadOutcome>& outcomes, const std::string& cut_short) {
  const Options& o = session.options();
  Report report;
  report.rows.push_back(ClientRow(clients, outcomes, static_cast<std::uint32_t>(o.value_size), session.index(),
                                  session.clock()));
  ClientCounts total;
  for (const auto& client : clients) total.Add(client.counts);
  report.validation = ValidationJson(o.validate, total);
  const ResultRow& row = report.rows.front();
  report.cut_short = cut_short;
  if (cut_short.empty()) {
    session.Put("result", {{"ops", row.ops}, {"duration_s", row.duration_s}, {"per_peer", row.per_peer},
                           {"counts", CountsJson(total)}});
  }
  if (total.unanswered != 0) {
    report.notes.push_back(std::to_string(total.unanswered) + " requests still unanswered when the run ended");
  }
  return report;
}

std::string CutShortLine(const Session& session, const std::string& reason, double after_s) {
  const Options& o = session.options();
  const std::string at = o.server_host.empty() ? "" : " at " + o.server_host + ":" + std::to_string(o.port);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.2f", after_s);
  return "server/0" + at + " lost after " + seconds + " s: " + reason +
         "; the run was cut short, what it measured until then is written (cut_short)";
}

Report CollectClientResults(Session& session) {
  const Options& o = session.options();
  Report report;
  ResultRow row;
  row.size_bytes = static_cast<std::uint32_t>(o.value_size);
  row.payload_bytes_per_op = o.value_size;
  ClientCounts total;
  double longest_s = 0;
  for (int p = 0; p < session.clients(); ++p) {
    const json result = session.Get("client/" + std::to_string(p), "result");
    row.ops += result.at("ops").get<std::uint64_t>();
    longest_s = std::max(longest_s, result.at("duration_s").get<double>());
    for (const auto& peer : result.at("per_peer")) row.per_peer.push_back(peer);
    total.Add(CountsFromJson(result.at("counts")));
  }
  row.duration_s = longest_s;
  row.extra = CountsJson(total);
  report.rows.push_back(std::move(row));
  report.validation = ValidationJson(o.validate, total);
  return report;
}

}  // namespace rdmalab::kv
