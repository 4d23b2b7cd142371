#include "kv/core/report.h"

#include "rdma/program.h"

namespace rdmalab::kv {
namespace {

using nlohmann::json;

constexpr const char* kSchemaVersion = "rdmalab-kv/1";
#ifndef RDMALAB_VERSION
#define RDMALAB_VERSION "unknown"
#endif

}  // namespace

json ReportJson(const Session& session, const Report& report, double cpu_user_s, double cpu_system_s,
                double wall_s) {
  json rows = json::array();
  for (const auto& row : report.rows) rows.push_back(RowJson(row));
  return {{"schema_version", kSchemaVersion},
          {"tool", {{"name", "rdmalab-kv"}, {"version", RDMALAB_VERSION}}},
          {"backend", "measured"},
          {"mode", "kv"},
          {"system", session.options().system},
          {"role", session.role()},
          {"index", session.index()},
          {"config", ConfigJson(session.options())},
          {"environment", EnvironmentJson(session, session.options().use_hugepages)},
          {"results", rows},
          {"server", report.server},
          {"cpu", CpuJson(cpu_user_s, cpu_system_s, wall_s)},
          {"validation", report.validation},
          {"notes", report.notes}};
}

std::string ReportTable(const Session& session, const Report& report) {
  const Options& o = session.options();
  std::string out = "# rdmalab-kv " + o.system + "  " + session.role() + "/" + std::to_string(session.index()) +
                    "  device " + session.device().name() + "  " + std::to_string(o.value_size) + " B values, PUT " +
                    std::to_string(static_cast<int>(o.put_fraction * 100 + 0.5)) + "%, " + o.distribution + ", W " +
                    std::to_string(o.window) + "\n";
  out += RowTableHeader();
  for (const auto& row : report.rows) out += RowTableLine(row);
  for (const auto& row : report.rows) out += PerPeerLine(row, "clients");
  if (report.validation.value("enabled", false)) {
    out += "# values checked: " + std::to_string(report.validation.value("checked", 0)) +
           (report.validation.value("ok", false) ? ", all right" : ", WRONG VALUES: " + report.validation.dump()) + "\n";
  }
  for (const auto& note : report.notes) out += "# " + note.get<std::string>() + "\n";
  return out;
}

}  // namespace rdmalab::kv
