// One row of measured results as every rdmalab program reports it (rdmalab-bench/1 and
// rdmalab-kv/1 share these fields): ops, duration, rate, latency percentiles from a
// histogram, per-thread and per-peer breakdowns and the uniformity ratio.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "rdma/histogram.h"

namespace rdmalab {

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

// An empty row of ops of `size_bytes` that each carry `payload_bytes_per_op`, with a
// histogram for latencies of `kind`.
ResultRow LatencyRow(std::uint32_t size_bytes, double payload_bytes_per_op, const char* kind);

// Rate of a row in millions of ops per second; 0 when nothing was timed.
double Mops(const ResultRow& row);
nlohmann::json RowJson(const ResultRow& row);
// The row as one line of the people's table (same columns for every program).
std::string RowTableHeader();
std::string RowTableLine(const ResultRow& row);
// "# <label> per peer (Mops): ... ; uniformity max/min R", or empty with fewer than 2 peers.
std::string PerPeerLine(const ResultRow& row, const std::string& label);

}  // namespace rdmalab
