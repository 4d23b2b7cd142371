#include "model/report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace rdmalab::model {
namespace {

using nlohmann::json;

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

json PcieJson(const Demand& d, double dllp) {
  return {{"h2d_bytes_per_op", d.h2d_mmio_B + d.h2d_dma_B},
          {"h2d_mmio_bytes_per_op", d.h2d_mmio_B},
          {"h2d_dma_completion_bytes_per_op", d.h2d_dma_B},
          {"d2h_bytes_per_op", d.d2h_B},
          {"h2d_tlps_per_op", d.h2d_tlps},
          {"d2h_tlps_per_op", d.d2h_tlps},
          {"dllp_bytes_per_op", (d.h2d_tlps + d.d2h_tlps) * dllp}};
}

json WireJson(const Demand& d) {
  return {{"tx_bytes_per_op", d.link_tx_B}, {"rx_bytes_per_op", d.link_rx_B},
          {"tx_packets_per_op", d.link_tx_packets}, {"rx_packets_per_op", d.link_rx_packets}};
}

// The PCIe transactions of one WR, as in guide16's Figure 5/6 diagrams.
void DescribeWr(std::ostringstream& o, const std::string& title, const WrShape& wr, uint32_t batch, uint32_t cq_mod,
                const Profile& prof, const WireParams& wire) {
  const PcieParams& p = prof.pcie;
  auto line = [&](const char* dir, const std::string& what, const std::string& why) {
    char buf[220];
    std::snprintf(buf, sizeof buf, "    %-10s %-34s %s\n", dir, what.c_str(), why.c_str());
    o << buf;
  };
  auto n = [](uint64_t v) { return std::to_string(v); };
  o << "  " << title << "\n";
  uint32_t wqe = SendWqeBytes(wr, prof.wqe);
  if (batch <= 1) {
    line("CPU->NIC", n(CeilDiv(wqe, kCacheLineBytes)) + " x MMIO write (64 + " + n(p.req_hdr_B) + ") B",
         "WQE-by-MMIO of a " + n(wqe) + " B WQE");
  } else {
    line("CPU->NIC", "doorbell (8 + " + n(p.req_hdr_B) + ") B / " + n(batch), "one doorbell per batch of " + n(batch));
    line("NIC->host", "read request " + n(p.req_hdr_B) + " B", p.wqes_per_dma ? "per WQE" : "per batch");
    line("host->NIC", n(CeilDiv(PadToLine(wqe), p.rcb_B)) + " x completion (<=" + n(p.rcb_B) + " + " +
         n(p.cpl_hdr_B) + ") B", "the " + n(PadToLine(wqe)) + " B padded WQE");
  }
  bool payload_fetch = (wr.op == Opcode::kSend || wr.op == Opcode::kWrite) && !wr.inline_data && !wr.header_only;
  if (payload_fetch)
    line("host->NIC", n(wr.payload_B) + " B + " + n(CeilDiv(wr.payload_B, p.rcb_B)) + " completion headers",
         "payload DMA read (" + n(wr.sge) + " SGE)");
  if (wr.op == Opcode::kRead) line("NIC->host", n(wr.payload_B) + " + " + n(p.req_hdr_B) + " B", "READ response lands");
  if (wr.signaled) line("NIC->host", "CQE 64 + " + n(p.req_hdr_B) + " B" + (cq_mod > 1 ? " / " + n(cq_mod) : ""), "completion");
  WireBytes w = Wire(wr, wire);
  line("wire", n(w.req_packets) + " packet(s), " + n(w.req_B) + " B", "request incl. headers and framing");
  if (w.resp_packets) line("wire", n(w.resp_packets) + " packet(s), " + n(w.resp_B) + " B", "response / ACKs");
  PcieBytes r = Responder(wr, prof.wqe, p, wire.grh || wire.kind != LinkKind::kIb);
  o << "    responder: " << r.d2h_B << " B NIC->host, " << r.dma_cpl_B << " B host->NIC ("
    << (wr.op == Opcode::kSend ? "RECV WQE, payload, CQE" : wr.op == Opcode::kRead ? "payload read" :
        wr.op == Opcode::kWrite ? "payload write" : "read-modify-write") << ")\n";
}

}  // namespace

std::string MechanismShares(const Point& pt, const Profile& prof, const Prediction& p) {
  std::ostringstream o;
  o << "\nmechanisms (the point predicted with each one switched off; its share of the operation's cost\n"
       "at the rate-setting resource = 1 - rate / rate without it):\n";
  const MechanismInfo* leader = nullptr;
  double leader_share = 0.005;  // below half a percent a mechanism sets nothing
  for (const auto& m : kMechanisms) {
    Profile without = prof;
    without.disabled |= m.bit;
    Prediction q = Predict(pt, without);
    double share = q.mops > 0 ? std::max(0.0, 1 - p.mops / q.mops) : 0;
    if (share > leader_share) leader = &m, leader_share = share;
    char buf[220];
    std::snprintf(buf, sizeof buf, "    %-14s %-48s %9.2f Mops without  share %5.1f%%  (%s)\n", m.name, m.what, q.mops,
                  100 * share, q.bottleneck.c_str());
    o << buf;
  }
  o << "  sets the rate: ";
  if (leader)
    o << leader->name << " (" << leader->what << "), at " << p.bottleneck << "\n";
  else
    o << "none of these: the verbs' own costs at " << p.bottleneck << " (" << p.bottleneck_label << ")\n";
  return o.str();
}

json ResultRow(const Point& pt, const Prediction& p) {
  json util = json::object();
  json limits = json::object();
  for (const auto& r : p.resources) {
    util[r.name] = r.utilization;
    limits[r.name] = r.limit_mops;
  }
  json row = {{"size_bytes", pt.mode == "kv" ? pt.value_B : pt.size_B},
              {"ops", nullptr},
              {"duration_s", nullptr},
              {"mops", p.mops},
              {"gbps", p.gbps},
              {"lat_us_mean", p.lat_us > 0 ? json(p.lat_us) : json(nullptr)}};
  for (const char* k : {"lat_us_stdev", "lat_us_min", "lat_us_p50", "lat_us_p90", "lat_us_p99", "lat_us_p999",
                        "lat_us_p9999", "lat_us_max"})
    row[k] = nullptr;
  // lat mode has one operation in flight and no queueing: the analytic latency is
  // deterministic, so it is the median too (the simulator gives percentiles under load).
  if (pt.mode == "lat" && p.lat_us > 0) row["lat_us_p50"] = p.lat_us;
  row["per_thread"] = json::array();
  row["per_peer"] = json::array();
  row["uniformity_ratio"] = nullptr;
  row["bottleneck"] = p.bottleneck;
  row["bottleneck_label"] = p.bottleneck_label;
  row["utilization"] = util;
  row["limit_mops"] = limits;
  row["cpu_ns_per_op"] = p.per_op.cpu_ns;
  row["nic_ns_per_op"] = {{"tx", p.per_op.nic_tx_ns}, {"rx", p.per_op.nic_rx_ns}};
  if (p.requests_per_sweep > 0) row["requests_per_sweep"] = p.requests_per_sweep;
  return row;
}

json FormulaRow(const Point& pt, const FormulaValue& f) {
  return {{"size_bytes", pt.formula == "wqe_batch" ? pt.wqe_B : pt.formula == "transfer" ? pt.size_B : 0},
          {f.metric, f.value},
          {"formula", pt.formula},
          {"derivation", f.derivation}};
}

json PredictionDocument(const json& point_doc, const Point& pt, const Profile& prof,
                        const std::vector<Prediction>& rows, const std::vector<Point>& row_points) {
  json results = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    json r = ResultRow(row_points[i], rows[i]);
    r["pcie"] = PcieJson(rows[i].per_op, prof.pcie.dllp_B_per_tlp);
    r["wire"] = WireJson(rows[i].per_op);
    results.push_back(r);
  }
  json config = point_doc.value("params", json::object());
  json doc = {{"schema_version", "rdmalab-bench/1"},
              {"tool", {{"name", "rdmalab-model"}, {"version", kToolVersion}}},
              {"backend", "model"},
              {"prediction", true},
              {"profile", prof.name},
              {"experiment", pt.experiment.empty() ? json(nullptr) : json(pt.experiment)},
              {"mode", pt.mode},
              {"role", "server"},
              {"index", 0},
              {"roles", point_doc.value("roles", json::object())},
              {"config", config},
              {"environment", {{"host", nullptr}, {"device", {{"profile", prof.name}, {"description", prof.description}}},
                               {"provider_library", nullptr}}},
              {"results", results},
              {"cpu", nullptr},
              {"pcie", {{"modeled", rows.empty() ? json(nullptr) : PcieJson(rows[0].per_op, prof.pcie.dllp_B_per_tlp)},
                        {"measured", nullptr}}},
              {"validation", nullptr}};
  return doc;
}

std::string FormatFormula(const Point& pt, const Profile& prof, const FormulaValue& f) {
  return "profile " + prof.name + ", formula " + pt.formula + ": " + f.metric + " = " + Fmt("%.0f", f.value) + "  (" +
         f.derivation + ")\n";
}

std::string FormatPrediction(const Point& pt, const Profile& prof, const Prediction& p) {
  std::ostringstream o;
  o << "profile " << prof.name << ", mode " << pt.mode << ": " << Fmt("%.2f", p.mops) << " Mops";
  if (p.gbps > 0) o << ", " << Fmt("%.2f", p.gbps) << " Gb/s";
  if (p.lat_us > 0) o << ", latency " << Fmt("%.2f", p.lat_us) << " us";
  o << "; bottleneck " << p.bottleneck << " (" << p.bottleneck_label << ")\n";
  return o.str();
}

std::string Explain(const Point& pt, const Profile& prof, const Prediction& p) {
  std::ostringstream o;
  o << FormatPrediction(pt, prof, p);
  const WireParams& wire = WireFor(pt, prof);
  if (pt.mode == "tput" || pt.mode == "lat" || pt.mode == "atomics") {
    o << "\nPCIe transactions of one WR:\n";
    DescribeWr(o, VerbName(pt.verb) + " " + std::to_string(pt.size_B) + " B",
               Shape(pt.verb, pt.mode == "atomics" ? 8 : pt.size_B, pt.sge, pt.inline_recv), pt.post_list, pt.cq_mod,
               prof, wire);
  } else if (pt.mode == "echo") {
    o << "\nPCIe transactions (request at the client, response at the server):\n";
    DescribeWr(o, "request " + VerbName(pt.request), Shape(pt.request, pt.size_B), 1, pt.cq_mod, prof, wire);
    DescribeWr(o, "response " + VerbName(pt.response), Shape(pt.response, pt.size_B), 1, pt.cq_mod, prof, wire);
  }
  o << "\nper-operation breakdown (one operation = the sum of these parts, weighted):\n";
  // A host engine's peers do work beside the WRs they post (completions, SENDs they receive,
  // a client's own work per request or answer): its own column, absent on a device NIC.
  const bool peers = prof.nic.host_engine;
  o << "  part                                                   h2d MMIO  h2d DMA    d2h   link tx  link rx  NIC tx  NIC rx   CPU"
    << (peers ? "  peers" : "") << "\n";
  o << "                                                              B        B       B        B        B      ns      ns     ns"
    << (peers ? "     ns" : "") << "\n";
  auto line = [&](const std::string& name, const Demand& d) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-52s %8.1f %8.1f %7.1f %8.1f %8.1f %7.2f %7.2f %6.1f", name.substr(0, 52).c_str(),
                  d.h2d_mmio_B, d.h2d_dma_B, d.d2h_B, d.link_tx_B, d.link_rx_B, d.nic_tx_ns, d.nic_rx_ns, d.cpu_ns);
    o << buf;
    if (peers) o << Fmt(" %6.1f", d.peer_ns);
    o << "\n";
  };
  for (const auto& [name, d] : p.parts) line(name, d);
  line("= per operation", p.per_op);
  o << "\nresources (capacity -> the rate each allows; * = bottleneck):\n";
  const double pcie_GBps = prof.pcie.DirectionBytesPerSec() / 1e9;
  for (const auto& r : p.resources) {
    std::string cap;
    if (r.name == "pcie_h2d" || r.name == "pcie_d2h") cap = Fmt("%.2f GB/s per direction", pcie_GBps);
    else if (r.name == "link_tx" || r.name == "link_rx") cap = Fmt("%.2f GB/s", WireFor(pt, prof).BytesPerSec() / 1e9);
    else if (r.name == "cpu") cap = std::to_string(pt.threads ? std::min(pt.threads, prof.cpu.cores) : prof.cpu.cores) + " cores";
    else if (r.name == "atomic_lock") cap = Fmt("%.0f ns hold", prof.nic.atomic_lock_hold_ns);
    else if (r.name == "pio") cap = Fmt("%.1f M posts/s", prof.nic.pio_mops);
    else if (r.name == "host_cpu")
      cap = Fmt("%.2f cores", prof.cpu.available_cores > 0 ? prof.cpu.available_cores : prof.cpu.cores);
    else if (r.name.rfind("nic", 0) == 0)
      cap = prof.nic.host_engine ? "the peers' threads" : std::to_string(prof.nic.pus) + " PUs";
    char buf[200];
    std::snprintf(buf, sizeof buf, "  %c %-15s %-22s %-30s %9.2f Mops  utilization %5.1f%%\n",
                  r.name == p.bottleneck ? '*' : ' ', r.name.c_str(), r.label.c_str(), cap.c_str(), r.limit_mops,
                  100 * r.utilization);
    o << buf;
  }
  o << MechanismShares(pt, prof, p);
  double lines_per_s = prof.pcie.DirectionBytesPerSec() / (kCacheLineBytes + prof.pcie.req_hdr_B);
  o << "\nPCIe: " << Fmt("%.1f", prof.pcie.lane_MBps) << " MB/s x " << prof.pcie.lanes << " lanes, Pr "
    << prof.pcie.req_hdr_B << " B, Pc " << prof.pcie.cpl_hdr_B << " B, Crc " << prof.pcie.rcb_B
    << " B; MMIO limit " << Fmt("%.1f", lines_per_s / 1e6) << " M lines/s; DLLP " << prof.pcie.dllp_B_per_tlp
    << " B per TLP\n";
  return o.str();
}

std::string FormatCalibration(const CalibrationResult& r) {
  std::ostringstream o;
  o << "profile    published    predicted   error  bottleneck (paper -> model)      ok  what\n";
  for (const auto& row : r.rows) {
    char buf[512];
    std::string bn = row.published_bottleneck.empty() ? "-" : row.published_bottleneck;
    bn += " -> " + (row.predicted_bottleneck.empty() ? std::string("-") : row.predicted_bottleneck);
    std::string pub = row.unit == "check" ? "check" : Fmt("%.4g", row.published) + " " + row.unit;
    std::string pred = row.unit == "check" ? "(see ->)" : Fmt("%.4g", row.predicted);
    std::string err = row.unit == "check" || row.unit == "payload_B" ? "" : Fmt("%+.1f%%", 100 * row.error);
    std::snprintf(buf, sizeof buf, "%-10s %-14s %-10s %7s  %-31s %-3s %s%s%s\n", row.profile.c_str(), pub.c_str(),
                  pred.c_str(), err.c_str(), bn.c_str(), row.pass ? "ok" : "NO", row.fitted ? "[fit] " : "",
                  row.what.substr(0, 90).c_str(), row.unit == "payload_B" || row.unit == "check" ? ("  (" + row.note + ")").c_str() : "");
    o << buf;
  }
  o << "\nfitted fields (stored in the profile -> fitted now):\n";
  for (const auto& f : r.fits) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %-10s %-28s %10.4g -> %10.4g  (%+.2f%%)  target: %s\n", f.profile.c_str(),
                  f.field.c_str(), f.stored, f.fitted, 100 * (f.fitted / f.stored - 1), f.target.substr(0, 70).c_str());
    o << buf;
  }
  if (!r.unmapped.empty()) {
    o << "\nnot predicted by the analytic model (see the simulator):\n";
    for (const auto& u : r.unmapped) o << "  " << u << "\n";
  }
  int pass = 0;
  for (const auto& row : r.rows) pass += row.pass;
  o << "\n" << pass << "/" << r.rows.size() << " measurements within tolerance; calibration "
    << (r.ok ? "OK" : "FAILED") << "\n";
  return o.str();
}

}  // namespace rdmalab::model
