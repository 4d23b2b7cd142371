// What a mode measured, kept apart from how it is printed (report.cc): rows of results,
// one per payload size, with per-thread and per-peer breakdowns and a latency histogram.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench/options.h"
#include "rdma/histogram.h"

namespace rdmalab::bench {

class Session;

struct ResultRow {
  std::uint32_t size_bytes = 0;
  std::uint64_t ops = 0;
  double duration_s = 0;
  // Payload bits per op, for gbps (the verb's payload; 0 for header-only SENDs).
  double payload_bytes_per_op = 0;
  std::unique_ptr<LatencyHistogram> latency_ns;  // null: this role measured no latency
  std::string latency_kind;                      // "completion" | "half_rtt" | "one_way" | "queueing"
  nlohmann::json per_thread = nlohmann::json::array();
  nlohmann::json per_peer = nlohmann::json::array();
  nlohmann::json extra = nlohmann::json::object();  // mode-specific fields, units in names
  bool rate_measured = true;                         // false: the row's rate belongs to peers
};

struct Report {
  std::vector<ResultRow> rows;
  nlohmann::json validation = {{"enabled", false}};
  nlohmann::json notes = nlohmann::json::array();
  // Expected PCIe/wire counters per row (modeled_pcie.h), or null when the mode has none.
  nlohmann::json pcie_modeled = nullptr;
};

// The JSON document of the run (schema benchmarks/schema/rdmalab-bench.schema.json).
nlohmann::json ReportJson(const Session& session, const Report& report, double cpu_user_s, double cpu_system_s,
                          double wall_s);
// A perftest-like table for people.
std::string ReportTable(const Session& session, const Report& report);

// Rate of a row in millions of ops per second; 0 when nothing was timed.
double Mops(const ResultRow& row);

}  // namespace rdmalab::bench
