#include "rdma/result_row.h"

#include <algorithm>
#include <cstdio>

namespace rdmalab {
namespace {

using nlohmann::json;

json Nullable(bool present, double value) { return present ? json(value) : json(nullptr); }

double Us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

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

ResultRow LatencyRow(std::uint32_t size_bytes, double payload_bytes_per_op, const char* kind) {
  ResultRow row;
  row.size_bytes = size_bytes;
  row.payload_bytes_per_op = payload_bytes_per_op;
  row.latency_ns = std::make_unique<LatencyHistogram>();
  row.latency_kind = kind;
  return row;
}

double Mops(const ResultRow& row) {
  return row.duration_s > 0 ? static_cast<double>(row.ops) / row.duration_s / 1e6 : 0.0;
}

std::string RowTableHeader() {
  char line[160];
  std::snprintf(line, sizeof(line), " %10s %12s %10s %10s %10s %10s %10s %10s %10s\n", "#bytes", "#ops", "Mops",
                "Gb/s", "avg[us]", "p50[us]", "p99[us]", "p99.9[us]", "max[us]");
  return line;
}

std::string RowTableLine(const ResultRow& row) {
  const json r = RowJson(row);
  auto cell = [&](const char* key) -> std::string {
    if (r[key].is_null()) return "-";
    char value[32];
    std::snprintf(value, sizeof(value), "%.3f", r[key].get<double>());
    return value;
  };
  char line[256];
  std::snprintf(line, sizeof(line), " %10u %12llu %10s %10s %10s %10s %10s %10s %10s\n", row.size_bytes,
                static_cast<unsigned long long>(row.ops), cell("mops").c_str(), cell("gbps").c_str(),
                cell("lat_us_mean").c_str(), cell("lat_us_p50").c_str(), cell("lat_us_p99").c_str(),
                cell("lat_us_p999").c_str(), cell("lat_us_max").c_str());
  return line;
}

std::string PerPeerLine(const ResultRow& row, const std::string& label) {
  if (row.per_peer.size() < 2) return "";
  std::string out = "# " + label + " per peer (Mops):";
  char item[160];
  for (const auto& peer : row.per_peer) {
    std::snprintf(item, sizeof(item), " %s %.3f", peer.at("peer").get<std::string>().c_str(), peer.value("mops", 0.0));
    out += item;
  }
  const json r = RowJson(row);
  if (!r["uniformity_ratio"].is_null()) {
    std::snprintf(item, sizeof(item), "; uniformity max/min %.3f", r["uniformity_ratio"].get<double>());
    out += item;
  }
  return out + "\n";
}

}  // namespace rdmalab
