#include "benchmarks/bench/report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "benchmarks/bench/session.h"
#include "rdma/connect.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr const char* kSchemaVersion = "rdmalab-bench/1";
#ifndef RDMALAB_VERSION
#define RDMALAB_VERSION "unknown"
#endif

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

const char* LinkLayerName(std::uint8_t link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
}

json DeviceJson(const Session& session) {
  const auto& device = session.device();
  const auto& attr = device.attr();
  const auto& port = device.port_attr();
  return {{"name", device.name()},
          {"firmware", device.firmware()},
          {"vendor_id", attr.vendor_id},
          {"vendor_part_id", attr.vendor_part_id},
          {"hw_ver", attr.hw_ver},
          {"node_guid", attr.node_guid},
          {"max_qp", attr.max_qp},
          {"max_qp_wr", attr.max_qp_wr},
          {"max_sge", attr.max_sge},
          {"max_cqe", attr.max_cqe},
          {"max_qp_rd_atom", attr.max_qp_rd_atom},
          {"atomic_cap", static_cast<int>(attr.atomic_cap)},
          {"port", int{device.port()}},
          {"link_layer", LinkLayerName(port.link_layer)},
          {"active_mtu_bytes", MtuBytes(port.active_mtu)},
          {"active_speed", port.active_speed},
          {"active_width", port.active_width},
          {"lid", port.lid},
          {"gid_index", session.address().gid_index}};
}

json EnvironmentJson(const Session& session) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  utsname uts{};
  uname(&uts);
  return {{"host", host},
          {"cpu_model", CpuModel()},
          {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
          {"kernel", std::string(uts.sysname) + " " + uts.release},
          {"device", DeviceJson(session)},
          {"provider_library", Device::ProviderLibrary()},
          {"clock_source", session.clock().Source()},
          {"tsc_ghz", std::string(session.clock().Source()) != "clock_monotonic" ? json(session.clock().GHz()) : json(nullptr)},
          {"hugepages", session.options().use_hugepages}};
}

json Nullable(bool present, double value) { return present ? json(value) : json(nullptr); }

double Us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

json RowJson(const ResultRow& row) {
  const LatencyHistogram* h = row.latency_ns.get();
  const bool lat = h != nullptr && h->Count() > 0;
  const double mops = Mops(row);
  json out = {
      {"size_bytes", row.size_bytes},
      {"ops", row.ops},
      {"duration_s", row.duration_s},
      {"mops", Nullable(row.rate_measured, mops)},
      {"gbps", Nullable(row.rate_measured, mops * row.payload_bytes_per_op * 8 / 1000.0)},
      {"latency_kind", lat ? json(row.latency_kind) : json(nullptr)},
      {"latency_samples", lat ? h->Count() : 0},
      {"lat_us_mean", Nullable(lat, lat ? h->Mean() / 1000.0 : 0)},
      {"lat_us_stdev", Nullable(lat, lat ? h->Stdev() / 1000.0 : 0)},
      {"lat_us_min", Nullable(lat, lat ? Us(h->Min()) : 0)},
      {"lat_us_p50", Nullable(lat, lat ? Us(h->Percentile(50)) : 0)},
      {"lat_us_p90", Nullable(lat, lat ? Us(h->Percentile(90)) : 0)},
      {"lat_us_p99", Nullable(lat, lat ? Us(h->Percentile(99)) : 0)},
      {"lat_us_p999", Nullable(lat, lat ? Us(h->Percentile(99.9)) : 0)},
      {"lat_us_p9999", Nullable(lat, lat ? Us(h->Percentile(99.99)) : 0)},
      {"lat_us_max", Nullable(lat, lat ? Us(h->Max()) : 0)},
      {"per_thread", row.per_thread},
      {"per_peer", row.per_peer},
      {"uniformity_ratio", nullptr},
  };
  double most = 0, least = 0;
  for (const auto& peer : row.per_peer) {
    const double ops = peer.value("ops", 0.0);
    if (least == 0 || ops < least) least = ops;
    most = std::max(most, ops);
  }
  if (row.per_peer.size() > 1 && least > 0) out["uniformity_ratio"] = most / least;
  out.update(row.extra);
  return out;
}

}  // namespace

double Mops(const ResultRow& row) {
  return row.duration_s > 0 ? static_cast<double>(row.ops) / row.duration_s / 1e6 : 0.0;
}

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
          {"environment", EnvironmentJson(session)},
          {"results", rows},
          {"cpu",
           {{"user_s", cpu_user_s},
            {"system_s", cpu_system_s},
            {"wall_s", wall_s},
            {"utilization", wall_s > 0 ? (cpu_user_s + cpu_system_s) / wall_s : 0.0}}},
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
  std::snprintf(line, sizeof(line), " %10s %12s %10s %10s %10s %10s %10s %10s %10s\n", "#bytes", "#ops", "Mops",
                "Gb/s", "avg[us]", "p50[us]", "p99[us]", "p99.9[us]", "max[us]");
  out += line;
  for (const auto& row : report.rows) {
    const json r = RowJson(row);
    auto cell = [&](const char* key) -> std::string {
      if (r[key].is_null()) return "-";
      char value[32];
      std::snprintf(value, sizeof(value), "%.3f", r[key].get<double>());
      return value;
    };
    std::snprintf(line, sizeof(line), " %10u %12llu %10s %10s %10s %10s %10s %10s %10s\n", row.size_bytes,
                  static_cast<unsigned long long>(row.ops), cell("mops").c_str(), cell("gbps").c_str(),
                  cell("lat_us_mean").c_str(), cell("lat_us_p50").c_str(), cell("lat_us_p99").c_str(),
                  cell("lat_us_p999").c_str(), cell("lat_us_max").c_str());
    out += line;
  }
  for (const auto& row : report.rows) {
    if (row.per_peer.size() < 2) continue;
    out += "# " + std::to_string(row.size_bytes) + " B per peer (Mops):";
    for (const auto& peer : row.per_peer) {
      std::snprintf(line, sizeof(line), " %s %.3f", peer.at("peer").get<std::string>().c_str(),
                    peer.value("mops", 0.0));
      out += line;
    }
    const json r = RowJson(row);
    if (!r["uniformity_ratio"].is_null()) {
      std::snprintf(line, sizeof(line), "; uniformity max/min %.3f", r["uniformity_ratio"].get<double>());
      out += line;
    }
    out += "\n";
  }
  if (report.validation.value("enabled", false)) {
    out += std::string("# validation: ") + (report.validation.value("ok", false) ? "ok" : "FAILED") + "\n";
  }
  for (const auto& note : report.notes) out += "# " + note.get<std::string>() + "\n";
  return out;
}

}  // namespace rdmalab::bench
