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
#include "rdma/result_row.h"

namespace rdmalab::bench {

class Session;

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


}  // namespace rdmalab::bench
