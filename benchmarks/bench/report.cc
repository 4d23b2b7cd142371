#include "benchmarks/bench/report.h"

#include <cstdio>

#include "benchmarks/bench/session.h"
#include "rdma/connect.h"
#include "rdma/program.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr const char* kSchemaVersion = "rdmalab-bench/1";
#ifndef RDMALAB_VERSION
#define RDMALAB_VERSION "unknown"
#endif

}  // namespace

json ReportJson(const Session& session, const Report& report, double cpu_user_s, double cpu_system_s,
                double wall_s) {
  json rows = json::array();
  for (const auto& row : report.rows) rows.push_back(RowJson(row));
  return {{"schema_version", kSchemaVersion},
          {"tool", {{"name", "rdmalab-bench"}, {"version", RDMALAB_VERSION}}},
          {"backend", "measured"},
          {"mode", session.options().mode},
          {"role", session.role()},
          {"index", session.index()},
          {"config", ConfigJson(session.options())},
          {"environment", EnvironmentJson(session, session.options().use_hugepages)},
          {"results", rows},
          {"cpu", CpuJson(cpu_user_s, cpu_system_s, wall_s)},
          {"pcie", {{"modeled", report.pcie_modeled}, {"measured", nullptr}}},
          {"validation", report.validation},
          {"notes", report.notes}};
}

std::string ReportTable(const Session& session, const Report& report) {
  std::string out;
  char line[256];
  const Options& o = session.options();
  const std::string what = o.mode == "echo"        ? o.request + " " + o.connection + " / " + o.response + " " +
                                                      o.response_connection
                           : o.mode == "sequencer" ? o.design
                           : o.mode == "sgbatch"   ? std::to_string(o.sge) + " packets per SEND " + o.connection
                                                   : o.verb + " " + o.connection;
  std::snprintf(line, sizeof(line), "# rdmalab-bench %s  %s/%d  device %s  %s\n", o.mode.c_str(),
                session.role().c_str(), session.index(), session.device().name().c_str(), what.c_str());
  out += line;
  out += RowTableHeader();
  for (const auto& row : report.rows) out += RowTableLine(row);
  for (const auto& row : report.rows) out += PerPeerLine(row, std::to_string(row.size_bytes) + " B");
  if (report.validation.value("enabled", false)) {
    out += std::string("# validation: ") + (report.validation.value("ok", false) ? "ok" : "FAILED") + "\n";
  }
  for (const auto& note : report.notes) out += "# " + note.get<std::string>() + "\n";
  return out;
}

}  // namespace rdmalab::bench
