#include "kv/core/client_core.h"

#include <algorithm>
#include <string>
#include <utility>

namespace rdmalab::kv {

using nlohmann::json;

// Every count a client reports, as its JSON names it: Add, CountsJson and CountsFromJson
// walk this one list ("completed" is derived: the measured GETs and PUTs).
constexpr std::pair<const char*, std::uint64_t ClientCounts::*> kCountFields[] = {
    {"gets", &ClientCounts::gets},           {"puts", &ClientCounts::puts},
    {"get_hits", &ClientCounts::get_hits},   {"get_misses", &ClientCounts::get_misses},
    {"puts_refused", &ClientCounts::puts_refused}, {"checked", &ClientCounts::checked},
    {"wrong_key", &ClientCounts::wrong_key}, {"corrupt", &ClientCounts::corrupt},
    {"retries", &ClientCounts::retries},     {"stale_answers", &ClientCounts::stale_answers},
    {"unanswered", &ClientCounts::unanswered}, {"completed_all", &ClientCounts::all_completed}};

void ClientCounts::Add(const ClientCounts& o) {
  completed += o.completed;
  for (const auto& [name, field] : kCountFields) this->*field += o.*field;
}

void RunCut::Cut(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (cut_.load(std::memory_order_relaxed)) return;
  reason_ = reason;
  cut_.store(true, std::memory_order_release);
}

std::string RunCut::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

std::string SilenceReason(const std::vector<ClientState>& clients, const ClientPlan& plan) {
  std::uint64_t in_flight = 0, retries = 0;
  for (const auto& client : clients) {
    in_flight += client.in_flight;
    retries += client.counts.retries;
  }
  return "the server stopped answering: no answer for " + std::to_string(plan.dead_after_ns / 1'000'000) +
         " ms to any of " + std::to_string(in_flight) + " requests in flight (" + std::to_string(retries) +
         " retries in all)";
}

ClientState::ClientState(const WorkloadConfig& workload_config, std::uint32_t id, const ClientPlan& plan)
    : workload(workload_config, id), global_id(id), slots(plan.window), values(plan.window * plan.value_bytes) {}

void CountValueCheck(ClientCounts& counts, ValueCheck check) {
  ++counts.checked;
  switch (check) {
    case ValueCheck::kOk:
      break;
    case ValueCheck::kWrongKey:
      ++counts.wrong_key;
      break;
    case ValueCheck::kCorrupt:
      ++counts.corrupt;
      break;
  }
}

ResultRow ClientRow(const std::vector<ClientState>& clients, const std::vector<ThreadOutcome>& threads,
                    std::uint32_t value_bytes, int process_index, const TscClock& clock) {
  ResultRow row = LatencyRow(value_bytes, value_bytes, "rtt");
  std::uint64_t start = ~std::uint64_t{0}, end = 0;
  for (const auto& thread : threads) {
    row.latency_ns->Merge(thread.latency);
    start = std::min(start, thread.start);
    end = std::max(end, thread.end);
  }
  const double duration_s = end > start ? static_cast<double>(clock.TicksToNs(end - start)) / 1e9 : 0.0;
  ClientCounts total;
  for (const auto& client : clients) {
    total.Add(client.counts);
    const double client_s = client.last_measured > client.first_measured
                                ? static_cast<double>(clock.TicksToNs(client.last_measured - start)) / 1e9
                                : 0.0;
    row.per_peer.push_back({{"peer", "client/" + std::to_string(process_index) + "." + std::to_string(client.global_id)},
                            {"ops", client.counts.completed},
                            {"mops", client_s > 0 ? static_cast<double>(client.counts.completed) / client_s / 1e6 : 0.0},
                            {"retries", client.counts.retries},
                            {"unanswered", client.counts.unanswered}});
  }
  row.ops = total.completed;
  row.duration_s = duration_s;
  row.extra = CountsJson(total);
  return row;
}

json CountsJson(const ClientCounts& c) {
  json out = json::object();
  for (const auto& [name, field] : kCountFields) out[name] = c.*field;
  return out;
}

ClientCounts CountsFromJson(const json& j) {
  ClientCounts c;
  for (const auto& [name, field] : kCountFields) c.*field = j.at(name);
  c.completed = c.gets + c.puts;
  return c;
}

json ValidationJson(bool enabled, const ClientCounts& total) {
  if (!enabled) return {{"enabled", false}};
  return {{"enabled", true},
          {"ok", total.wrong_key == 0 && total.corrupt == 0},
          {"checked", total.checked},
          {"wrong_key", total.wrong_key},
          {"corrupt", total.corrupt}};
}

}  // namespace rdmalab::kv
