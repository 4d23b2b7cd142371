#include "model/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#ifndef RDMALAB_MODEL_SOURCE_DIR
#define RDMALAB_MODEL_SOURCE_DIR "model"
#endif

namespace rdmalab::model {
namespace {

WireParams& Roce(Profile& p) {
  if (!p.roce) p.roce = p.link;
  return *p.roce;
}
const WireParams& RoceC(const Profile& p) { return p.roce ? *p.roce : p.link; }

// A time field's bound: 10 ms, as a software NIC under an emulator takes (rxe in TCG: ~1 ms a WR).
constexpr double kMaxNs = 1e7;

// Field table. Link kinds are stored as numbers (0 ib, 1 roce_v1, 2 roce_v2) and written
// in YAML by name; booleans as 0/1.
#define F(path, unit, lo, hi, expr)                                              \
  FieldInfo {                                                                    \
    path, unit, lo, hi, [](const Profile& p) { return static_cast<double>(p.expr); }, \
        [](Profile& p, double v) { p.expr = static_cast<decltype(p.expr)>(v); }  \
  }
#define L(prefix, name, unit, lo, hi, member)                                                   \
  FieldInfo{"link." name, unit, lo, hi, [](const Profile& p) { return static_cast<double>(p.link.member); }, \
            [](Profile& p, double v) { p.link.member = static_cast<decltype(p.link.member)>(v); }},          \
      FieldInfo {                                                                               \
    "roce." name, unit, lo, hi, [](const Profile& p) { return static_cast<double>(RoceC(p).member); },      \
        [](Profile& p, double v) { Roce(p).member = static_cast<decltype(p.link.member)>(v); }              \
  }

const std::vector<FieldInfo> kFields = {
    F("pcie.lane_MBps", "MB/s", 1, 1e5, pcie.lane_MBps),
    F("pcie.lanes", "lanes", 1, 32, pcie.lanes),
    F("pcie.req_hdr_B", "B", 0, 64, pcie.req_hdr_B),
    F("pcie.cpl_hdr_B", "B", 0, 64, pcie.cpl_hdr_B),
    F("pcie.rcb_B", "B", 64, 4096, pcie.rcb_B),
    F("pcie.mps_B", "B", 0, 4096, pcie.mps_B),
    F("pcie.mrrs_B", "B", 0, 4096, pcie.mrrs_B),
    F("pcie.dllp_B_per_tlp", "B", 0, 64, pcie.dllp_B_per_tlp),
    F("pcie.wqes_per_dma", "WQEs", 0, 1024, pcie.wqes_per_dma),
    F("wqe.rc_uc_header_B", "B", 4, 512, wqe.rc_uc_header_B),
    F("wqe.ud_header_B", "B", 4, 512, wqe.ud_header_B),
    F("wqe.recv_B", "B", 4, 512, wqe.recv_B),
    F("wqe.max_inline_B", "B", 0, 4096, wqe.max_inline_B),
    L(link, "kind", "0 ib, 1 roce_v1, 2 roce_v2", 0, 2, kind),
    L(link, "data_Gbps", "Gb/s", 0.1, 1e4, data_Gbps),
    L(link, "ports", "ports", 1, 8, ports),
    L(link, "mtu_B", "B", 256, 9000, mtu_B),
    L(link, "grh", "bool", 0, 1, grh),
    L(link, "phy_B_per_packet", "B", 0, 64, phy_B_per_packet),
    L(link, "min_frame_B", "B", 0, 128, min_frame_B),
    L(link, "ack_every", "packets", 1, 1024, ack_every),
    F("nic.send_ns", "ns", 0, kMaxNs, nic.t.send_ns),
    F("nic.send_header_only_ns", "ns", 0, kMaxNs, nic.t.send_header_only_ns),
    F("nic.write_ns", "ns", 0, kMaxNs, nic.t.write_ns),
    F("nic.read_ns", "ns", 0, kMaxNs, nic.t.read_ns),
    F("nic.atomic_ns", "ns", 0, kMaxNs, nic.t.atomic_ns),
    F("nic.recv_ns", "ns", 0, kMaxNs, nic.t.recv_ns),
    F("nic.recv_header_only_ns", "ns", 0, kMaxNs, nic.t.recv_header_only_ns),
    F("nic.recv_inline_ns", "ns", 0, kMaxNs, nic.t.recv_inline_ns),
    F("nic.write_in_ns", "ns", 0, kMaxNs, nic.t.write_in_ns),
    F("nic.read_in_ns", "ns", 0, kMaxNs, nic.t.read_in_ns),
    F("nic.atomic_in_ns", "ns", 0, kMaxNs, nic.t.atomic_in_ns),
    F("nic.dct_extra_ns", "ns", 0, kMaxNs, nic.t.dct_extra_ns),
    F("nic.pus", "PUs", 1, 1024, nic.pus),
    F("nic.atomic_lock_hold_ns", "ns", 1, 1e6, nic.atomic_lock_hold_ns),
    F("nic.atomic_lock_buckets", "buckets", 1, 1 << 20, nic.atomic_lock_buckets),
    F("nic.qp_cache_entries", "QPs", 1, 1 << 24, nic.qp_cache_entries),
    F("nic.qp_miss_ns", "ns", 0, kMaxNs, nic.qp_miss_ns),
    F("nic.qp_miss_tx_ns", "ns", 0, kMaxNs, nic.qp_miss_tx_ns),
    F("nic.qp_context_B", "B", 0, 4096, nic.qp_context_B),
    F("nic.wqe_cache_entries", "WQEs", 1, 1 << 24, nic.wqe_cache_entries),
    F("nic.mtt_cache_entries", "entries", 1, 1 << 24, nic.mtt_cache_entries),
    F("nic.page_B", "B", 512, 1 << 30, nic.page_B),
    F("nic.mtt_entry_B", "B", 1, 4096, nic.mtt_entry_B),
    F("nic.inline_recv_ud", "bool", 0, 1, nic.inline_recv_ud),
    F("nic.max_sge", "SGEs", 1, 1024, nic.max_sge),
    F("nic.pio_mops", "M posts/s", 0, 1e5, nic.pio_mops),
    F("nic.host_engine", "bool", 0, 1, nic.host_engine),
    F("nic.line_ns", "ns", 0, kMaxNs, nic.line_ns),
    F("nic.gather_ns", "ns", 0, kMaxNs, nic.gather_ns),
    F("nic.sge_ns", "ns", 0, kMaxNs, nic.sge_ns),
    F("nic.cold_access_ns", "ns", 0, kMaxNs, nic.cold_access_ns),
    F("nic.cold_line_ns", "ns", 0, kMaxNs, nic.cold_line_ns),
    F("nic.fast_write_max_B", "B", 0, 1 << 30, nic.fast_write_max_B),
    F("cpu.cores", "cores", 1, 4096, cpu.cores),
    F("cpu.post_mmio_ns", "ns", 0, kMaxNs, cpu.post_mmio_ns),
    F("cpu.post_doorbell_ns", "ns", 0, kMaxNs, cpu.post_doorbell_ns),
    F("cpu.post_per_wr_ns", "ns", 0, kMaxNs, cpu.post_per_wr_ns),
    F("cpu.poll_cq_ns", "ns", 0, kMaxNs, cpu.poll_cq_ns),
    F("cpu.poll_request_ns", "ns", 0, kMaxNs, cpu.poll_request_ns),
    F("cpu.dram_ns", "ns", 0, kMaxNs, cpu.dram_ns),
    F("cpu.prefetched_access_ns", "ns", 0, kMaxNs, cpu.prefetched_access_ns),
    F("cpu.shared_atomic_ns", "ns", 0, kMaxNs, cpu.shared_atomic_ns),
    F("cpu.kv_request_ns", "ns", 0, kMaxNs, cpu.kv_request_ns),
    F("cpu.pipeline_flush_ns", "ns", 0, kMaxNs, cpu.pipeline_flush_ns),
    F("cpu.available_cores", "cores", 0, 4096, cpu.available_cores),
    F("cpu.client_request_ns", "ns", 0, kMaxNs, cpu.client_request_ns),
    F("cpu.sequencer_client_answer_ns", "ns", 0, kMaxNs, cpu.sequencer_client_answer_ns),
    F("cpu.echo_client_answer_ns", "ns", 0, kMaxNs, cpu.echo_client_answer_ns),
    F("cpu.line_transfer_ns", "ns", 0, kMaxNs, cpu.line_transfer_ns),
    F("cpu.cache_B", "B", 0, 1e12, cpu.cache_B),
    F("latency.pcie_rtt_ns", "ns", 0, kMaxNs, lat.pcie_rtt_ns),
    F("latency.nic_pipeline_ns", "ns", 0, kMaxNs, lat.nic_pipeline_ns),
    F("latency.wire_ns", "ns", 0, kMaxNs, lat.wire_ns),
    F("latency.poll_ns", "ns", 0, kMaxNs, lat.poll_ns),
};
#undef F
#undef L

const std::vector<std::string> kLinkKinds = {"ib", "roce_v1", "roce_v2"};

std::vector<std::string> FieldsUnder(const std::string& section) {
  std::vector<std::string> out;
  for (const auto& f : kFields) {
    std::string path = f.path;
    if (path.rfind(section + ".", 0) == 0) out.push_back(path.substr(section.size() + 1));
  }
  return out;
}

std::string Where(const std::string& origin, const YAML::Node& n) {
  return origin + ":" + std::to_string(n.Mark().line + 1);
}

void ApplyLeaf(Profile& p, const std::string& path, const YAML::Node& leaf, const std::string& origin) {
  const FieldInfo* f = FindField(path);
  if (!leaf.IsMap() || !leaf["value"] || !leaf["source"])
    throw ModelError(Where(origin, leaf) + ": field '" + path +
                     "' must be {value: ..., source: \"where the value comes from\"} (optionally fit: \"<calibration what>\")");
  for (const auto& kv : leaf) {
    std::string k = kv.first.as<std::string>();
    if (k != "value" && k != "source" && k != "fit" && k != "note" && k != "points")
      throw ModelError(Where(origin, kv.first) + ": unknown key '" + k + "' in field '" + path +
                       "' (valid: value, source, fit, note, points)");
  }
  if (leaf["points"] && !leaf["points"].IsSequence())
    throw ModelError(Where(origin, leaf["points"]) + ": field '" + path +
                     "' has points that are not a list (valid: a list of the stored point files it was fitted to)");
  double v = 0;
  std::string raw = leaf["value"].as<std::string>();
  if (std::string(f->unit).rfind("0 ib", 0) == 0) {
    auto it = std::find(kLinkKinds.begin(), kLinkKinds.end(), raw);
    if (it == kLinkKinds.end())
      throw ModelError(Where(origin, leaf) + ": field '" + path + "' has value '" + raw +
                       "' (valid: " + Join(kLinkKinds) + ")");
    v = static_cast<double>(it - kLinkKinds.begin());
  } else if (std::string(f->unit) == "bool") {
    if (raw != "true" && raw != "false")
      throw ModelError(Where(origin, leaf) + ": field '" + path + "' has value '" + raw + "' (valid: true, false)");
    v = raw == "true" ? 1 : 0;
  } else {
    try {
      v = leaf["value"].as<double>();
    } catch (const YAML::Exception&) {
      throw ModelError(Where(origin, leaf) + ": field '" + path + "' has value '" + raw + "' (valid: a number in " +
                       f->unit + ")");
    }
    if (!(v >= f->min && v <= f->max))
      throw ModelError(Where(origin, leaf) + ": field '" + path + "' = " + raw + " is out of range (valid: " +
                       std::to_string(f->min) + " .. " + std::to_string(f->max) + " " + f->unit + ")");
  }
  f->set(p, v);
  p.sources[path] = leaf["source"].as<std::string>();
  if (leaf["fit"]) p.fits[path] = leaf["fit"].as<std::string>();
  p.points.erase(path);
  if (leaf["points"])
    for (const auto& f : leaf["points"]) p.points[path].push_back(f.as<std::string>());
  if (std::find(p.field_order.begin(), p.field_order.end(), path) == p.field_order.end())
    p.field_order.push_back(path);
}

const std::vector<std::string> kSections = {"pcie", "wqe", "link", "roce", "nic", "cpu", "latency"};
const std::vector<std::string> kTopKeys = {"name", "description", "extends", "provenance", "pcie", "wqe",
                                           "link", "roce", "nic", "cpu", "latency"};

void Apply(Profile& p, const YAML::Node& root, const std::string& origin, const std::string& dir, int depth) {
  if (!root.IsMap()) throw ModelError(origin + ": a profile is a YAML mapping (keys: " + Join(kTopKeys) + ")");
  if (root["extends"]) {
    if (depth > 4) throw ModelError(origin + ": 'extends' nests too deep");
    std::string base = root["extends"].as<std::string>();
    std::filesystem::path file = std::filesystem::path(dir) / (base + ".yaml");
    std::ifstream in(file);
    if (!in)
      throw ModelError(Where(origin, root["extends"]) + ": field 'extends' names unknown profile '" + base +
                       "' (valid: " + Join(ListProfiles(dir)) + ")");
    Apply(p, YAML::LoadFile(file.string()), file.string(), dir, depth + 1);
    p.fits.clear();  // a derived profile fits only what it states itself, and was measured where it says
    p.points.clear();
    p.provenance.clear();
  }
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end())
      throw ModelError(Where(origin, kv.first) + ": unknown profile field '" + key + "' (valid: " + Join(kTopKeys) +
                       ")");
    if (key == "name") p.name = kv.second.as<std::string>();
    if (key == "description") p.description = kv.second.as<std::string>();
    if (key == "provenance") {
      if (!kv.second.IsMap())
        throw ModelError(Where(origin, kv.second) + ": 'provenance' must map names (host, device, commit, ...) to text");
      p.provenance.clear();
      for (const auto& item : kv.second) {
        if (!item.second.IsScalar())
          throw ModelError(Where(origin, item.second) + ": provenance." + item.first.as<std::string>() +
                           " must be text");
        p.provenance[item.first.as<std::string>()] = item.second.as<std::string>();
      }
    }
    if (std::find(kSections.begin(), kSections.end(), key) == kSections.end()) continue;
    if (!kv.second.IsMap())
      throw ModelError(Where(origin, kv.second) + ": section '" + key + "' must be a mapping of fields");
    std::string section = key == "roce" ? "link" : key;
    if (key == "roce") Roce(p);
    for (const auto& field : kv.second) {
      std::string name = field.first.as<std::string>();
      std::string path = key + "." + name;
      if (!FindField(path))
        throw ModelError(Where(origin, field.first) + ": unknown profile field '" + path + "' (valid under " + key +
                         ": " + Join(FieldsUnder(section)) + ")");
      ApplyLeaf(p, path, field.second, origin);
    }
  }
}

}  // namespace

const std::vector<FieldInfo>& ProfileFields() { return kFields; }

const FieldInfo* FindField(const std::string& path) {
  for (const auto& f : kFields)
    if (path == f.path) return &f;
  return nullptr;
}

double GetField(const Profile& p, const std::string& path) {
  const FieldInfo* f = FindField(path);
  if (!f) throw ModelError("unknown profile field '" + path + "'");
  return f->get(p);
}

void SetField(Profile& p, const std::string& path, double value) {
  const FieldInfo* f = FindField(path);
  if (!f) throw ModelError("unknown profile field '" + path + "'");
  f->set(p, value);
}

std::string DefaultProfileDir() {
  if (const char* env = std::getenv("RDMALAB_MODEL_PROFILES")) return env;
  return std::string(RDMALAB_MODEL_SOURCE_DIR) + "/profiles";
}

std::vector<std::string> ListProfiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Profile LoadProfileFromString(const std::string& yaml_text, const std::string& origin, const std::string& dir) {
  Profile p;
  try {
    Apply(p, YAML::Load(yaml_text), origin, dir, 0);
  } catch (const YAML::Exception& e) {
    throw ModelError(origin + ": YAML error: " + e.what());
  }
  if (p.name.empty()) p.name = std::filesystem::path(origin).stem().string();
  return p;
}

Profile LoadProfile(const std::string& name_or_path, const std::string& dir) {
  std::filesystem::path file = name_or_path;
  if (file.extension() != ".yaml") file = std::filesystem::path(dir) / (name_or_path + ".yaml");
  std::ifstream in(file);
  if (!in && ListProfiles(dir).empty())
    throw ModelError("unknown profile '" + name_or_path + "': no profiles in '" + dir +
                     "' (set --profile_dir or RDMALAB_MODEL_PROFILES, or give a path to a .yaml file)");
  if (!in)
    throw ModelError("unknown profile '" + name_or_path + "' (valid: " + Join(ListProfiles(dir)) +
                     ", or a path to a .yaml file)");
  std::stringstream text;
  text << in.rdbuf();
  return LoadProfileFromString(text.str(), file.string(), file.parent_path().string());
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace rdmalab::model
