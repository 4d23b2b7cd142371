#include "model/calibrate.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "model/analytic.h"
#include "model/point.h"
#include "model/sim.h"

#ifndef RDMALAB_MODEL_SOURCE_DIR
#define RDMALAB_MODEL_SOURCE_DIR "model"
#endif

namespace rdmalab::model {
namespace {

using nlohmann::json;

// How the model reproduces one published measurement. `eval` returns the predicted value in
// the measurement's unit and the model's bottleneck label; `residual` (for fitting) is zero
// when the fitted field matches the measurement.
struct Evaluated {
  double value;
  std::string bottleneck;
};
using Eval = std::function<Evaluated(const Profile&)>;

Point P(json params, const std::string& mode = "tput", json roles = json::object()) {
  return PointFromJson(json{{"mode", mode}, {"roles", std::move(roles)}, {"params", std::move(params)}});
}

Evaluated Rate(const Profile& prof, const Point& pt) {
  Prediction p = Predict(pt, prof);
  return {p.mops, p.bottleneck_label};
}

double Limit(const Prediction& p, const std::string& name) {
  for (const auto& r : p.resources)
    if (r.name == name) return r.limit_mops;
  return 0;
}

Eval RateOf(json params, const std::string& mode = "tput", json roles = json::object()) {
  Point pt = P(std::move(params), mode, std::move(roles));
  return [pt](const Profile& prof) { return Rate(prof, pt); };
}

Point InboundRead(int64_t size) { return P({{"verb", "read"}, {"connection", "RC"}, {"size", size}, {"direction", "inbound"}}); }

const json kSendUd = {{"verb", "send_inline"}, {"connection", "UD"}, {"size", 32}, {"cq_mod", 16}};
json With(json base, const json& extra) {
  for (const auto& [k, v] : extra.items()) base[k] = v;
  return base;
}
const json kOutboundSendUd = With(kSendUd, {{"direction", "outbound"}});
const json kBatchedSendUd = With(kOutboundSendUd, {{"post_list", 16}});  // a doorbell batch of 16

struct Mapping {
  Mapping() = default;
  Mapping(Eval e, std::string u = "mops") : eval(std::move(e)), unit(std::move(u)) {}
  Eval eval;
  std::string unit = "mops";
  // for fitting: residual(profile) = 0 at the fit; default = predicted/published - 1
  std::function<double(const Profile&, double published)> residual;
};

// Published rows, keyed by (profile, what), each with the model's way to compute it.
using Mappings = std::map<std::pair<std::string, std::string>, Mapping>;

// The verb rates of guide16 (cib, cx3, cx) and herd14 (cx3-pcie2), each the prediction of one point.
void AddRates(Mappings& m) {
  const json& out_send = kOutboundSendUd;
  const json& out_send_b = kBatchedSendUd;
  json out_hdr = With(out_send_b, {{"header_only", true}});
  json in_recv = {{"verb", "send"}, {"connection", "UD"}, {"size", 32}, {"direction", "inbound"}};
  json in_hdr = With(in_recv, {{"header_only", true}});
  auto per_nic = [&](const std::string& prof) {
    m[{prof, "RECV header-only"}] = {RateOf(in_hdr)};
    m[{prof, "RECV regular"}] = {RateOf(in_recv)};
    m[{prof, "SEND header-only"}] = {RateOf(out_hdr)};
    m[{prof, "SEND regular"}] = {RateOf(out_send_b)};
  };
  for (const char* prof : {"cib", "cx3", "cx"}) per_nic(prof);
  m[{"cib", "outbound UD SEND, non-batched (WQE-by-MMIO)"}] = {RateOf(out_send)};
  m[{"cib", "outbound UD SEND, doorbell batch 16"}] = {RateOf(out_send_b)};
  m[{"cib", "outbound UD SEND, batched, header-only"}] = {RateOf(out_hdr)};
  m[{"cib", "inbound UD RECV, batched, regular"}] = {RateOf(in_recv)};
  m[{"cib", "inbound UD RECV, batched, header-only"}] = {RateOf(in_hdr)};
  m[{"cib", "inbound READ <= 64 B"}] = {RateOf({{"verb", "read"}, {"size", 32}, {"direction", "inbound"}})};
  m[{"cib", "inbound READ 128 B"}] = {RateOf({{"verb", "read"}, {"size", 128}, {"direction", "inbound"}})};
  m[{"cib", "atomics, one counter (Z = 1)"}] = {RateOf({{"verb", "faa"}, {"counters", 1}}, "atomics")};
  m[{"cib", "atomics, Z >= 4096 counters"}] = {RateOf({{"verb", "faa"}, {"counters", 4096}}, "atomics")};
  m[{"cib", "outbound READ, non-batched"}] =
      {RateOf({{"verb", "read"}, {"size", 8}, {"direction", "outbound"}, {"cq_mod", 16}})};
  m[{"cib", "outbound UC WRITE > 28 B (WQE > 1 cache line)"}] =
      {RateOf({{"verb", "write_inline"}, {"connection", "UC"}, {"size", 32}, {"direction", "outbound"}, {"cq_mod", 16}})};
  m[{"cib", "inbound 32 B READ over DC transport (DCT), 10 machines x 14 threads, 1 QP per thread, 32 outstanding per machine"}] =
      {RateOf({{"verb", "read"}, {"connection", "DC"}, {"size", 32}, {"direction", "inbound"}})};
  m[{"cx3", "RECV regular with inline-receive"}] = {RateOf(With(in_recv, {{"inline_recv", true}}))};
  m[{"cx3", "atomics, any Z (all serialized)"}] = {RateOf({{"verb", "faa"}, {"counters", 4096}}, "atomics")};
  // cx3-pcie2, herd14 Sec. 3
  json in_write = {{"verb", "write"}, {"connection", "UC"}, {"size", 32}, {"direction", "inbound"}};
  m[{"cx3-pcie2", "inbound UC WRITE <= 32 B"}] = {RateOf(in_write)};
  m[{"cx3-pcie2", "advertised message rate"}] = {RateOf(in_write)};
  m[{"cx3-pcie2", "inbound and outbound READ, max"}] = {RateOf({{"verb", "read"}, {"size", 32}, {"direction", "inbound"}})};
  m[{"cx3-pcie2", "outbound inline WRITE, max"}] =
      {RateOf({{"verb", "write_inline"}, {"connection", "UC"}, {"size", 4}, {"direction", "outbound"}, {"cq_mod", 64}})};
  // herd14 Sec. 3.1: windows of several outstanding WRITEs, tuned per experiment (16 assumed)
  m[{"cx3-pcie2", "inbound UC WRITE, 1600 client processes on 16 machines"}] =
      {RateOf(With(in_write, {{"tx_depth", 16}}), "tput", {{"client", 1600}})};
  // herd14 Sec. 3.3: 16 server processes WRITE to random ones of 16 clients each (256 QPs)
  json out_write = {{"verb", "write_inline"}, {"connection", "UC"}, {"size", 32}, {"direction", "outbound"}, {"cq_mod", 64}};
  Point all_to_all = P(With(out_write, {{"qp", 256}})), peak = P(out_write);
  m[{"cx3-pcie2", "outbound UC WRITE all-to-all, N = 16 (256 QPs), share of the peak outbound WRITE rate"}] = {
      [all_to_all, peak](const Profile& prof) {
        Prediction p = Predict(all_to_all, prof);
        return Evaluated{p.mops / Predict(peak, prof).mops, p.bottleneck_label};
      }, "fraction"};
  json echo = {{"request", "write"}, {"response", "send"}, {"connection", "UC"},
               {"response_connection", "UD"}, {"size", 32}, {"optimizations", "inline,unsignaled,uc"}};
  m[{"cx3-pcie2", "ECHOs (inbound WRITE + outbound SEND) per second"}] = {RateOf(echo, "echo")};
  Point echo_pt = P(echo, "echo");
  m[{"cx3-pcie2", "typical end-to-end (1/2 RTT) latency"}] = {
      [echo_pt](const Profile& prof) { return Evaluated{Predict(echo_pt, prof).lat_us / 2, "latency"}; }, "us"};
}

// The payloads from which inbound READs are link-bound, and the bounds guide16 derives.
void AddBounds(Mappings& m) {
  // link-bound READ payloads (guide16 Sec. 5.3.1)
  for (auto [prof, what] : std::vector<std::pair<std::string, std::string>>{
           {"cx", "inbound READ link-bound from"}, {"cx3", "inbound READ link-bound from"},
           {"cib", "inbound READ link-bound from"}, {"cib", "inbound READs saturate the link (112 Gb/s) from payload"},
           {"cx3", "inbound READs saturate the link (56 Gb/s) from payload"}}) {
    Mapping mp;
    mp.unit = "payload_B";
    mp.eval = [](const Profile&) { return Evaluated{0, "link bw"}; };  // replaced in Calibrate
    mp.residual = [](const Profile& prof, double payload) {
      Prediction p = Predict(InboundRead(static_cast<int64_t>(payload)), prof);
      return Limit(p, "nic_rx") / Limit(p, "link_tx") - 1;
    };
    m[{prof, what}] = mp;
  }
  // bounds the paper derives (guide16 Sec. 5.2.1)
  m[{"cib", "useful DMA read bandwidth (Crc/(Crc+Pc) of the link)"}] = {
      [](const Profile& prof) {
        double useful = prof.pcie.DirectionBytesPerSec() * prof.pcie.rcb_B / (prof.pcie.rcb_B + prof.pcie.cpl_hdr_B);
        return Evaluated{useful / 1e6, "DMA bw"};
      }, "MBps"};
  m[{"cib", "batched UD SEND bound: 2-cache-line WQEs over DMA read bw"}] = {[](const Profile& prof) {
    double useful = prof.pcie.DirectionBytesPerSec() * prof.pcie.rcb_B / (prof.pcie.rcb_B + prof.pcie.cpl_hdr_B);
    return Evaluated{useful / (2 * kCacheLineBytes) / 1e6, "DMA bw"};
  }};
  m[{"cib", "non-batched UD SEND bound: MMIO 175 M lines/s / 2 lines"}] = {[](const Profile& prof) {
    double lines = prof.pcie.DirectionBytesPerSec() / (kCacheLineBytes + prof.pcie.req_hdr_B);
    return Evaluated{lines / 2 / 1e6, "MMIO bw"};
  }};
}

// The window and core counts guide16 reports as best or needed.
void AddCounts(Mappings& m) {
  // WQE cache vs window (guide16 Sec. 5.3.2): the simulator's best outbound 8 B READ
  // window, one QP per thread; ties go to the largest window within 1% of the best rate.
  auto best_window = [](uint32_t threads) {
    return [threads](const Profile& prof) {
      double best_rate = 0;
      uint32_t best = 0;
      std::vector<std::pair<uint32_t, double>> rates;
      for (uint32_t n = 1; n <= 2048; n *= 2) {
        Point pt = P({{"verb", "read"}, {"size", 8}, {"direction", "outbound"}, {"qp", threads},
                      {"tx_depth", n}, {"sim_ops", 100000}}, "tput", {{"client", threads}});
        SimResult r = Simulate(SimConfigFor(pt, prof, Predict(pt, prof)));
        rates.push_back({n, r.mops});
        best_rate = std::max(best_rate, r.mops);
      }
      for (const auto& [n, mops] : rates)
        if (mops >= 0.99 * best_rate) best = n;
      return Evaluated{static_cast<double>(best), "WQE cache"};
    };
  };
  m[{"cx3", "best outbound 8 B RC READ window (all cores)"}] = {best_window(8), "window"};
  m[{"cib", "best outbound 8 B RC READ window, 14 requester threads"}] = {best_window(14), "window"};
  Point batched = P(kBatchedSendUd);
  m[{"cib", "cores needed to saturate PCIe with batched UD SENDs"}] = {
      [batched](const Profile& prof) {
        Prediction p = Predict(batched, prof);
        return Evaluated{std::ceil(p.mops * p.per_op.cpu_ns / 1000), p.bottleneck_label};
      }, "cores"};
}

Mappings BuildMappings() {
  Mappings m;
  AddRates(m);
  AddBounds(m);
  AddCounts(m);
  return m;
}

// Qualitative checks on profile fields (notes in calibration.yaml without a rate).
std::map<std::pair<std::string, std::string>, std::function<std::pair<bool, std::string>(const Profile&)>> BuildChecks() {
  std::map<std::pair<std::string, std::string>, std::function<std::pair<bool, std::string>(const Profile&)>> c;
  c[{"cib", "atomics lock hold time: several hundred ns (PCIe round trips)"}] = [](const Profile& p) {
    double h = p.nic.atomic_lock_hold_ns;
    return std::make_pair(h >= 100 && h < 1000, std::to_string(static_cast<int>(h)) + " ns");
  };
  c[{"all", "PCIe link-layer overhead: 2 DLLPs of 8 B per 4-5 TLPs"}] = [](const Profile& p) {
    double f = p.pcie.dllp_B_per_tlp / (kCacheLineBytes + p.pcie.req_hdr_B);
    return std::make_pair(f < 0.05, "fraction " + std::to_string(f).substr(0, 5) + " of a 64 B MMIO TLP");
  };
  // guide16 Sec. 5.2.1 / Fig. 11b: one core sending 60 B UD SENDs (128 B WQEs). On one QP the
  // core is coupled to one PU, which handles Doorbell batches more slowly than WQE-by-MMIO
  // posts; more QPs engage more PUs until the core itself limits; WQE-by-MMIO is CPU-bound.
  auto one_core = [](const Profile& p, int qps, int batch) {
    return Predict(P({{"verb", "send_inline"}, {"connection", "UD"}, {"size", 60}, {"direction", "outbound"},
                      {"threads", 1}, {"qp", qps}, {"post_list", batch}, {"cq_mod", 16}}), p).mops;
  };
  auto slower_batched = [one_core](const Profile& p) {
    double batched = one_core(p, 1, 16), mmio = one_core(p, 1, 1), mmio4 = one_core(p, 4, 1);
    return std::make_pair(batched < mmio && mmio4 < 1.01 * mmio,
                          "batched " + std::to_string(batched).substr(0, 5) + ", WQE-by-MMIO " +
                              std::to_string(mmio).substr(0, 5) + " (4 QPs " + std::to_string(mmio4).substr(0, 5) + ") Mops");
  };
  auto multi_queue_gain = [one_core](const Profile& p) {
    double one = one_core(p, 1, 16), two = one_core(p, 2, 16) / one, four = one_core(p, 4, 16) / one;
    return std::make_pair(two >= 1.8 && two <= 2.2 && four >= 2 && four <= 3.2,
                          "2 QPs " + std::to_string(two).substr(0, 4) + "x, 4 QPs " + std::to_string(four).substr(0, 4) +
                              "x of " + std::to_string(one).substr(0, 5) + " Mops");
  };
  for (const char* nic : {"cib", "cx3", "cx"}) {
    c[{nic, "single core, 60 B UD SENDs on one QP: Doorbell batches slower than WQE-by-MMIO"}] = slower_batched;
    c[{nic, "single core, batched 60 B UD SENDs: about 2x with 2 QPs, 2-3.2x with 4 QPs"}] = multi_queue_gain;
  }
  c[{"cib", "inline-receive"}] = [](const Profile& p) {
    return std::make_pair(!p.nic.inline_recv_ud, std::string("inline_recv_ud = ") + (p.nic.inline_recv_ud ? "true" : "false"));
  };
  c[{"cx3", "doorbell batch WQE fetch"}] = [](const Profile& p) {
    return std::make_pair(p.pcie.wqes_per_dma != 0, "wqes_per_dma = " + std::to_string(p.pcie.wqes_per_dma));
  };
  c[{"cx3-pcie2", "max inline payload"}] = [](const Profile& p) {
    return std::make_pair(p.wqe.max_inline_B == 256, "max_inline_B = " + std::to_string(p.wqe.max_inline_B));
  };
  c[{"cx3-pcie2", "post_send() CPU time"}] = [](const Profile& p) {
    return std::make_pair(p.cpu.post_mmio_ns == 200, "post_mmio_ns = " + std::to_string(p.cpu.post_mmio_ns).substr(0, 5));
  };
  // the per-request CPU costs (post, poll, prefetched accesses) against a per-core statement
  c[{"cx3-pcie2", "ECHOs with 4 prefetched random memory accesses: 12 cores deliver the peak"}] = [](const Profile& p) {
    auto echo = [&](int threads) {
      return Predict(P({{"request", "write"}, {"response", "send"}, {"connection", "UC"},
                        {"response_connection", "UD"}, {"size", 32}, {"optimizations", "inline,unsignaled,uc"},
                        {"accesses", 4}, {"prefetch", true}, {"threads", threads}}, "echo"), p).mops;
    };
    double twelve = echo(12), all = echo(static_cast<int>(p.cpu.cores));
    return std::make_pair(twelve >= 0.99 * all, std::to_string(twelve).substr(0, 5) + " of " +
                                                    std::to_string(all).substr(0, 5) + " Mops with 12 cores");
  };
  c[{"cx3-pcie2", "random DRAM access"}] = [](const Profile& p) {
    return std::make_pair(p.cpu.dram_ns >= 60 && p.cpu.dram_ns <= 120, "dram_ns = " + std::to_string(p.cpu.dram_ns).substr(0, 5));
  };
  return c;
}

using Residual = std::function<double(const Profile&)>;

constexpr double kPublishedSpan = 20;     // a published row's field: within 20x of its seed
// A measured NIC's field may be orders of magnitude from the seed it extends (rxe under an
// emulator takes ~1 ms a WR where a host engine's seed says 100 ns).
constexpr double kMeasuredSpan = 1e5;

constexpr double kFlatResidual = 1e-9;   // a field whose change moves the residual less has no effect there

// Where a point only bounds `field` (the model's rate is a minimum over resources: below some
// value the field's resource no longer sets the rate), the residual is flat from one end up
// to that value: take the bound, the value nearest the flat end at which the field starts to
// set the rate, the most the measurement allows.
double BoundOfFlatEnd(const std::function<double(double)>& r, double flat_end, double other_end) {
  double r_flat = r(flat_end), in = flat_end, out = other_end;
  for (int i = 0; i < 100; ++i) {
    double mid = std::sqrt(in * out);
    (std::fabs(r(mid) - r_flat) <= kFlatResidual ? in : out) = mid;
  }
  return in;
}

// Solve residual(field = x) = 0 by bisection on log x over [x0 / span, x0 * span], within the
// field's range. Without a sign change the stored value stays, unless `take_bound` and the
// residual is flat towards the end nearer zero error (no worse than at the stored value): then
// the bound that end allows.
double FitField(Profile& prof, const std::string& field, const Residual& residual, double span,
                bool take_bound = false) {
  double x0 = GetField(prof, field);
  double lo = x0 / span, hi = std::min(x0 * span, FindField(field)->max);
  auto r = [&](double x) {
    SetField(prof, field, x);
    return residual(prof);
  };
  double rlo = r(lo), rhi = r(hi);
  if ((rlo > 0) == (rhi > 0)) {  // no sign change
    double near = std::fabs(rlo) < std::fabs(rhi) ? lo : hi, far = near == lo ? hi : lo;
    double x = x0;
    if (take_bound && std::fabs(r(near)) <= std::fabs(r(x0)) + kFlatResidual) {
      double bound = BoundOfFlatEnd(r, near, far);
      if (bound != near) x = bound;  // flat towards that end: the point bounds the field
    }
    SetField(prof, field, x);
    return x;
  }
  for (int i = 0; i < 100; ++i) {
    double mid = std::sqrt(lo * hi);
    double rm = r(mid);
    if ((rm > 0) == (rlo > 0)) lo = mid, rlo = rm;
    else hi = mid;
  }
  double x = std::sqrt(lo * hi);
  SetField(prof, field, x);
  return x;
}

// Gauss-Seidel: `rounds` passes over the fields in order, each solved with the others fixed.
void FitFields(Profile& prof, const std::vector<std::pair<std::string, Residual>>& targets, int rounds, double span,
               bool take_bound = false) {
  for (int round = 0; round < rounds; ++round)
    for (const auto& [field, residual] : targets) FitField(prof, field, residual, span, take_bound);
}

std::string Str(const YAML::Node& n) { return n ? n.as<std::string>() : ""; }

using Checks = decltype(BuildChecks());

// The published row of (profile, what) in the calibration file; an empty node when none.
YAML::Node PublishedOf(const YAML::Node& doc, const std::string& prof, const std::string& what) {
  for (const auto& m : doc["measurements"])
    if (Str(m["profile"]) == prof && Str(m["what"]) == what) return m;
  return YAML::Node();
}

// Fits each profile's fitted fields to the published rows they name (three Gauss-Seidel rounds
// in file order); the fits in `fits`.
std::map<std::string, Profile> FitPublished(const YAML::Node& doc, const Mappings& mappings, const std::string& path,
                                            const std::string& profile_dir, std::vector<FitResult>& fits) {
  std::map<std::string, Profile> fitted;
  for (const auto& name : {"cib", "cx3", "cx", "cx3-pcie2"}) fitted[name] = LoadProfile(name, profile_dir);
  auto residual_for = [&](const std::string& prof, const std::string& what) -> Residual {
    const YAML::Node m = PublishedOf(doc, prof, what);
    auto it = mappings.find({prof, what});
    if (it == mappings.end() || !m)
      throw ModelError("profile " + prof + ": fit target '" + what + "' is not a mapped measurement in " + path);
    Mapping mp = it->second;
    if (mp.residual) {
      double payload = m["payload_B"].as<double>();
      return [mp, payload](const Profile& p) { return mp.residual(p, payload); };
    }
    double published = m["mops"] ? m["mops"].as<double>() : m["fraction"] ? m["fraction"].as<double>() : m["us"].as<double>();
    return [mp, published](const Profile& p) { return mp.eval(p).value / published - 1; };
  };
  for (auto& [name, prof] : fitted) {
    Profile stored = prof;
    std::vector<std::pair<std::string, Residual>> targets;
    for (const auto& field : prof.field_order)
      if (prof.fits.count(field)) targets.push_back({field, residual_for(name, prof.fits.at(field))});
    FitFields(prof, targets, 3, kPublishedSpan);
    for (const auto& field : prof.field_order)
      if (prof.fits.count(field))
        fits.push_back({name, field, prof.fits.at(field), GetField(stored, field), GetField(prof, field)});
  }
  return fitted;
}

// A link-bound payload: the share of the NIC's limit the link's is at the published payload.
void CompareLinkBound(CalibrationRow& row, double payload_B, const Mapping& mp, const Profile& prof, double tolerance) {
  row.unit = mp.unit;
  row.published = payload_B;
  double share = mp.residual(prof, row.published) + 1;  // NIC limit / link limit at P
  row.predicted = row.published;
  row.pass = share >= 1 - tolerance;
  row.predicted_bottleneck = share >= 1 ? "link bw" : "NIC";
  row.note = "link limit is " + std::to_string(static_cast<int>(100 / share)) + "% of the NIC limit at " +
             std::to_string(static_cast<int>(row.published)) + " B (link bound within " +
             std::to_string(static_cast<int>(tolerance * 100)) + "% when >= " +
             std::to_string(static_cast<int>(100 * (1 - tolerance))) + "%)";
  row.error = 0;
}

// A published value (a rate, a bandwidth, a count) and its bottleneck against the prediction.
void CompareValue(CalibrationRow& row, const YAML::Node& m, const Mapping& mp, const Profile& prof, double tolerance) {
  row.unit = mp.unit;
  for (const char* unit : {"mops", "MBps", "cores", "us", "window", "fraction"})
    if (m[unit]) {
      row.published = m[unit].as<double>();
      row.unit = unit;
    }
  Evaluated ev = mp.eval(prof);
  row.predicted = ev.value;
  row.predicted_bottleneck = ev.bottleneck;
  row.error = row.predicted / row.published - 1;
  bool value_ok = row.unit == "cores" || row.unit == "window" ? row.predicted == row.published
                                                               : std::fabs(row.error) <= tolerance + 1e-9;
  bool bottleneck_ok = row.published_bottleneck.empty() || SameBottleneck(row.published_bottleneck, ev.bottleneck);
  row.pass = value_ok && bottleneck_ok;
  if (!bottleneck_ok) row.note = "bottleneck differs";
}

const std::vector<std::string> kVerbLevelModes = {"lat", "tput", "atomics", "sgbatch"};
constexpr int kMeasuredRounds = 12;  // coupled fields (post cost and engine time) need more passes

}  // namespace

std::string DefaultCalibrationPath() { return std::string(RDMALAB_MODEL_SOURCE_DIR) + "/data/calibration.yaml"; }

bool SameBottleneck(const std::string& published, const std::string& label) {
  auto canon = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), ::tolower);
    if (s.rfind("nic", 0) == 0) return std::string("nic");
    if (s == "ib bw" || s == "link bw") return std::string("link");
    return s;
  };
  return canon(published) == canon(label);
}

CalibrationResult Calibrate(const std::string& calibration_path, const std::string& profile_dir, double tolerance) {
  CalibrationResult res;
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(calibration_path);
  } catch (const YAML::Exception& e) {
    throw ModelError("cannot read calibration file " + calibration_path + ": " + e.what());
  }
  const Mappings mappings = BuildMappings();
  const Checks checks = BuildChecks();
  const std::map<std::string, Profile> fitted = FitPublished(doc, mappings, calibration_path, profile_dir, res.fits);
  std::map<std::string, std::vector<std::string>> fitted_targets;
  for (const auto& f : res.fits) fitted_targets[f.profile].push_back(f.target);

  for (const auto& m : doc["measurements"]) {
    CalibrationRow row;
    row.profile = Str(m["profile"]);
    row.what = Str(m["what"]);
    row.source = Str(m["source"]);
    row.published_bottleneck = Str(m["bottleneck"]);
    auto& targets = fitted_targets[row.profile];
    row.fitted = std::find(targets.begin(), targets.end(), row.what) != targets.end();
    auto mapping = mappings.find({row.profile, row.what});
    if (auto c = checks.find({row.profile, row.what}); c != checks.end()) {
      const Profile& prof = fitted.count(row.profile) ? fitted.at(row.profile) : fitted.at("cib");
      auto [ok, note] = c->second(prof);
      row.unit = "check";
      row.pass = ok;
      row.note = note;
    } else if (mapping == mappings.end() || !fitted.count(row.profile)) {
      res.unmapped.push_back(row.profile + ": " + row.what);
      continue;
    } else if (m["payload_B"]) {
      CompareLinkBound(row, m["payload_B"].as<double>(), mapping->second, fitted.at(row.profile), tolerance);
    } else {
      CompareValue(row, m, mapping->second, fitted.at(row.profile), tolerance);
    }
    res.rows.push_back(row);
  }
  for (const auto& row : res.rows)
    if (!row.pass) res.ok = false;
  for (const auto& f : res.fits)
    if (std::fabs(f.fitted / f.stored - 1) > 0.01) res.ok = false;
  return res;
}

void RequireVerbLevel(const json& point, const std::string& id) {
  std::string mode = point.is_object() && point.contains("mode") && point["mode"].is_string() ? point["mode"].get<std::string>() : "";
  if (std::find(kVerbLevelModes.begin(), kVerbLevelModes.end(), mode) == kVerbLevelModes.end())
    throw ModelError("calibration point '" + id + "' has mode '" + mode +
                     "': the fit reads only verb-level points (modes " + Join(kVerbLevelModes) +
                     "); application-level results (key-value systems, sequencers, ECHO) are what a fitted "
                     "profile must predict, never its input");
}

namespace {

// The host facts a run measured directly (cores): set as they are, not fitted.
void ApplyFacts(Profile& prof, const json& facts) {
  for (const auto& [path, fact] : facts.items()) {
    if (!FindField(path)) throw ModelError("measured calibration: facts." + path + " is not a profile field");
    SetField(prof, path, fact.at("value").get<double>());
    prof.sources[path] = fact.at("source").get<std::string>();
  }
}

// A measured point and the profile field it determines.
struct MeasuredTarget {
  MeasuredRow row;
  Point pt;
};

std::vector<MeasuredTarget> ReadTargets(const json& points) {
  std::vector<MeasuredTarget> targets;
  for (const auto& m : points) {
    MeasuredTarget t;
    t.row.id = m.at("id").get<std::string>();
    RequireVerbLevel(m.at("point"), t.row.id);
    t.pt = PointFromJson(m.at("point"));
    t.row.field = m.value("field", "");
    if (!t.row.field.empty() && !FindField(t.row.field))
      throw ModelError("calibration point '" + t.row.id + "': field '" + t.row.field + "' is not a profile field");
    t.row.metric = m.at("metric").get<std::string>();
    if (t.row.metric != "mops" && t.row.metric != "lat_us")
      throw ModelError("calibration point '" + t.row.id + "': metric '" + t.row.metric + "' (valid: mops, lat_us)");
    t.row.measured = m.at("measured").get<double>();
    if (!(t.row.measured > 0))
      throw ModelError("calibration point '" + t.row.id + "': measured value must be positive");
    t.row.spread = m.value("spread", 0.0);
    t.row.files = m.value("files", std::vector<std::string>{});
    targets.push_back(std::move(t));
  }
  return targets;
}

}  // namespace

MeasuredFit FitMeasured(const json& doc, const std::string& profile_dir, double tolerance) {
  if (!doc.is_object() || doc.value("schema_version", "") != "rdmalab-calibration-points/1")
    throw ModelError("measured calibration: schema_version must be 'rdmalab-calibration-points/1'");
  for (const char* key : {"extends", "points"})
    if (!doc.contains(key)) throw ModelError(std::string("measured calibration: field '") + key + "' is missing");
  MeasuredFit out;
  out.profile = LoadProfile(doc["extends"].get<std::string>(), profile_dir);
  Profile& prof = out.profile;
  ApplyFacts(prof, doc.value("facts", json::object()));
  std::vector<MeasuredTarget> targets = ReadTargets(doc["points"]);
  auto value = [](const MeasuredTarget& t, const Profile& p) {
    Prediction pr = Predict(t.pt, p);
    return std::make_pair(t.row.metric == "mops" ? pr.mops : pr.lat_us, pr.bottleneck_label);
  };
  // one residual per field: the mean relative error of the points that determine it
  std::vector<std::pair<std::string, Residual>> residuals;
  std::map<std::string, std::vector<const MeasuredTarget*>> by_field;
  for (const auto& t : targets)
    if (!t.row.field.empty()) {
      if (!by_field.count(t.row.field)) residuals.push_back({t.row.field, nullptr});
      by_field[t.row.field].push_back(&t);
    }
  Profile stored = prof;
  for (auto& [field, residual] : residuals) {
    std::vector<const MeasuredTarget*> mine = by_field[field];
    residual = [mine, value](const Profile& p) {
      double sum = 0;
      for (const MeasuredTarget* t : mine) sum += value(*t, p).first / t->row.measured - 1;
      return sum / mine.size();
    };
  }
  // a measured point may only bound its field (a SEND's receiver that never sets the rate, one
  // counter no slower than many): the fit then takes the bound
  FitFields(prof, residuals, kMeasuredRounds, kMeasuredSpan, true);
  for (const auto& [field, residual] : residuals) {
    std::string ids;
    std::vector<std::string> files;
    for (const MeasuredTarget* t : by_field[field]) {
      ids += (ids.empty() ? "" : ", ") + t->row.id;
      files.insert(files.end(), t->row.files.begin(), t->row.files.end());
    }
    out.fits.push_back({prof.name, field, ids, GetField(stored, field), GetField(prof, field)});
    prof.fits[field] = ids;
    prof.points[field] = files;
  }
  for (auto& t : targets) {
    auto [v, bottleneck] = value(t, prof);
    t.row.predicted = v;
    t.row.bottleneck = bottleneck;
    t.row.error = v / t.row.measured - 1;
    t.row.pass = std::fabs(t.row.error) <= tolerance + 1e-9;
    out.ok = out.ok && t.row.pass;
    out.rows.push_back(t.row);
  }
  return out;
}

}  // namespace rdmalab::model
