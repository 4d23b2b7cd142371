// What a key-value role measured (one row: the run's rate, latency, per-client counts) and
// its JSON document, schema rdmalab-kv/1 (kv/schema/rdmalab-kv.schema.json), with the same
// environment block as rdmalab-bench's.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kv/core/session.h"
#include "rdma/result_row.h"

namespace rdmalab::kv {

struct Report {
  std::vector<ResultRow> rows;
  // Value checking: {"enabled", "ok", "checked", "wrong_key", "corrupt"}; ok false fails the run.
  nlohmann::json validation = {{"enabled", false}};
  // The system's own side: server workers' counts, a TCP server's statistics, ...
  nlohmann::json server = nullptr;
  nlohmann::json notes = nlohmann::json::array();
};

nlohmann::json ReportJson(const Session& session, const Report& report, double cpu_user_s, double cpu_system_s,
                          double wall_s);
std::string ReportTable(const Session& session, const Report& report);

}  // namespace rdmalab::kv
