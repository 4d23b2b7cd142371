// build/bin/softnic: run programs on softnic and manage fabrics, like `rdma link` and
// `ibv_devinfo` do for real devices.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "softnic/fabric/fabric.h"
#include "softnic/fabric/process.h"
#include "softnic/tool/device_nodes.h"
#include "softnic/tool/netdevs.h"
#include "softnic/tool/private_view.h"
#include "softnic/tool/shared_view.h"

namespace softnic {
namespace {

constexpr const char* kUsage = R"(usage: softnic COMMAND [OPTIONS]

  run [--fabric F] [--devices N] [--link ib|roce] [--device-nodes] [--netdevs] -- PROGRAM [ARGS...]
        run PROGRAM with softnic as its libibverbs (creates the fabric if needed);
        --device-nodes: PROGRAM also sees /dev/infiniband/uverbsN, as UCX requires
        --netdevs: PROGRAM runs in a network namespace of its own where device
        softnicN has interface snicN with its fabric address, linked from
        /sys/class/infiniband/softnicN/device/net (as rdma-core's tests look for it)
        (both in private namespaces; a user other than root gets them in a user
        namespace of its own, where the kernel allows unprivileged ones); every run
        of a fabric shares one view, built by the first and joined while any of its
        programs runs (so they meet over loopback TCP); it holds what its first run
        asked for
  fabric create [--fabric F] [--devices N] [--link ib|roce]
  fabric show   [--fabric F] [--json]      devices, addresses, processes, view, counters
  fabric list                              this user's fabrics, a name a line
  fabric rm     [--fabric F | --prefix P]  P: every fabric whose name starts with P
  faults set    [--fabric F] [--device softnicN] [--drop P] [--delay-us U] [--down|--up]
        P is a probability in [0, 1] for UC/UD messages; without --device: every device
  faults clear  [--fabric F]
  counters      [--fabric F] [--device softnicN] [--json]

The fabric defaults to $SOFTNIC_FABRIC or "default"; devices to 2; link to ib.
)";

struct Options {
  std::map<std::string, std::string> values;
  std::vector<std::string> flags;
  std::vector<std::string> rest;  // after "--"
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "softnic: %s\n", message.c_str());
  std::exit(2);
}

bool Has(const Options& options, const std::string& flag) {
  for (const std::string& f : options.flags) {
    if (f == flag) return true;
  }
  return false;
}

Options Parse(int argc, char** argv, int first, const std::vector<std::string>& with_value,
              const std::vector<std::string>& boolean) {
  Options options;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) options.rest.push_back(argv[i]);
      break;
    }
    std::string value;
    bool inline_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    bool known_value = std::find(with_value.begin(), with_value.end(), arg) != with_value.end();
    bool known_flag = std::find(boolean.begin(), boolean.end(), arg) != boolean.end();
    if (known_value) {
      if (!inline_value) {
        if (i + 1 >= argc) Fail("option " + arg + " needs a value");
        value = argv[++i];
      }
      options.values[arg] = value;
    } else if (known_flag && !inline_value) {
      options.flags.push_back(arg);
    } else {
      std::string valid;
      for (const auto& v : with_value) valid += " " + v;
      for (const auto& b : boolean) valid += " " + b;
      Fail("unknown option '" + arg + "'; valid here:" + valid);
    }
  }
  return options;
}

uint64_t ParseNumber(const std::string& name, const std::string& text, uint64_t min, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < min || value > max) {
    Fail(name + " '" + text + "' is not valid: use an integer in " + std::to_string(min) + ".." +
         std::to_string(max));
  }
  return value;
}

FabricOptions FabricOptionsFrom(const Options& options) {
  FabricOptions fabric;
  std::string error;
  if (!FabricOptionsFromEnvironment(&fabric, &error)) Fail(error);
  if (auto it = options.values.find("--fabric"); it != options.values.end()) fabric.name = it->second;
  if (auto it = options.values.find("--devices"); it != options.values.end()) {
    fabric.device_count = uint32_t(ParseNumber("--devices", it->second, 1, kMaxDevices));
  }
  if (auto it = options.values.find("--link"); it != options.values.end()) {
    if (!ParseLinkLayer(it->second, &fabric.link_layer, &error)) Fail("--link: " + error);
  }
  if (!ValidateFabricName(fabric.name, &error)) Fail("--fabric: " + error);
  return fabric;
}

void OpenExisting(Fabric* fabric, const FabricOptions& options) {
  std::string error;
  if (!fabric->Attach(options, Fabric::Mode::kOpenExisting, &error)) Fail(error);
}

int32_t DeviceIndex(const FabricHeader& header, const std::string& name) {
  for (uint32_t d = 0; d < header.device_count; ++d) {
    if (name == header.devices[d].name) return int32_t(d);
  }
  std::string valid;
  for (uint32_t d = 0; d < header.device_count; ++d) valid += std::string(" ") + header.devices[d].name;
  Fail("no device '" + name + "' in this fabric; devices:" + valid);
}

std::string GidText(const uint8_t* gid) {
  char text[64];
  std::snprintf(text, sizeof(text), "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                gid[0], gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9],
                gid[10], gid[11], gid[12], gid[13], gid[14], gid[15]);
  return text;
}

// What the modeled counters model (softnic/fabric/accounting.h, ModeledDevice).
constexpr const char* kModeledDeviceText =
    "model/wr_accounting.h default: Connect-IB on PCIe 3.0 x16; wire IB, or RoCEv2 on an Ethernet fabric";

nlohmann::json DeviceJson(const Fabric& fabric, uint32_t d) {
  const FabricHeader& header = *fabric.header();
  const DeviceEntry& device = header.devices[d];
  uint64_t counters[kCounterCount];
  SumDeviceCounters(header, d, counters);
  nlohmann::json json;
  json["name"] = device.name;
  json["link_layer"] = LinkLayerName(header.link_layer);
  json["lid"] = device.lid;
  json["gid"] = GidText(device.gid);
  const uint32_t address = DeviceIpv4(fabric.name(), d);
  json["ipv4"] = std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 0xff) + "." +
                 std::to_string((address >> 8) & 0xff) + "." + std::to_string(address & 0xff);
  char guid[32];
  std::snprintf(guid, sizeof(guid), "%016" PRIx64, device.node_guid);
  json["node_guid"] = guid;
  json["faults"] = {{"drop_probability", device.faults.drop_ppm.load() / 1e6},
                    {"delay_us", device.faults.delay_us.load()},
                    {"down", device.faults.down.load() != 0}};
  // Entries of a process that died stay in the tables until its slot is reused; they
  // are gone for every peer already, so they are not counted.
  uint32_t qps = 0, mrs = 0;
  fabric.ForEachWrittenEntry(device.qps, kMaxQpsPerDevice, [&](const QpEntry& qp) {
    qps += qp.qpn.load() != 0 && qp.type != kXrcSrqEntryType &&  // an XRC SRQ is no QP
           ProcessAlive(header, qp.owner_slot, qp.owner_incarnation);
  });
  fabric.ForEachWrittenEntry(device.mrs, kMaxMrsPerDevice, [&](const MrEntry& mr) {
    mrs += mr.key.load() != 0 && ProcessAlive(header, mr.owner_slot, mr.owner_incarnation);
  });
  json["qps"] = qps;
  json["mrs"] = mrs;
  json["modeled"]["device_model"] = kModeledDeviceText;
  for (uint32_t c = 0; c < kCounterCount; ++c) {
    (IsModeled(c) ? json["modeled"]["counters"] : json["counters"])[kCounterNames[c]] = counters[c];
  }
  return json;
}

// The namespaces `softnic run --device-nodes/--netdevs` of this fabric share, if any
// process of theirs runs: null otherwise.
nlohmann::json ViewJson(const Fabric& fabric) {
  FabricViewRecord record;
  std::string error;
  if (!record.Lock(fabric.directory(), false, &error)) Fail(error);
  const ViewState view = record.Read();
  if (!view.exists) return nullptr;
  return {{"device_nodes", view.contents.device_nodes}, {"netdevs", view.contents.netdevs}, {"members", view.members}};
}

nlohmann::json FabricJson(const Fabric& fabric, int32_t only_device) {
  const FabricHeader& header = *fabric.header();
  nlohmann::json json;
  json["schema_version"] = 1;
  json["fabric"] = fabric.name();
  json["directory"] = fabric.directory();
  json["link_layer"] = LinkLayerName(header.link_layer);
  json["devices"] = nlohmann::json::array();
  for (uint32_t d = 0; d < header.device_count; ++d) {
    if (only_device < 0 || only_device == int32_t(d)) json["devices"].push_back(DeviceJson(fabric, d));
  }
  json["view"] = ViewJson(fabric);
  json["processes"] = nlohmann::json::array();
  for (uint32_t s = 0; s < kMaxProcesses; ++s) {
    const ProcessSlot& slot = header.processes[s];
    uint32_t incarnation = slot.incarnation.load();
    if (incarnation != 0 && ProcessAlive(header, s, incarnation)) {
      json["processes"].push_back({{"slot", s}, {"pid", slot.pid.load()}});
    }
  }
  return json;
}

void PrintHuman(const nlohmann::json& json, bool counters_only) {
  if (!counters_only) {
    std::printf("fabric %s (%s link, %s)\n", json["fabric"].get<std::string>().c_str(),
                json["link_layer"].get<std::string>().c_str(), json["directory"].get<std::string>().c_str());
    std::printf("processes attached: %zu\n", json["processes"].size());
    if (const auto& view = json["view"]; !view.is_null()) {
      const ViewContents contents{view["device_nodes"].get<bool>(), view["netdevs"].get<bool>()};
      std::printf("view of softnic run:%s, members:", ViewFlags(contents).c_str());
      for (const auto& pid : view["members"]) std::printf(" %d", pid.get<int>());
      std::printf("\n");
    }
  }
  for (const auto& device : json["devices"]) {
    std::printf("%s", device["name"].get<std::string>().c_str());
    if (!counters_only) {
      std::printf("  ipv4 %s  lid %u  gid %s  guid %s  qps %u  mrs %u  faults: drop %.6g delay %uus%s",
                  device["ipv4"].get<std::string>().c_str(), device["lid"].get<unsigned>(),
                  device["gid"].get<std::string>().c_str(),
                  device["node_guid"].get<std::string>().c_str(), device["qps"].get<unsigned>(),
                  device["mrs"].get<unsigned>(), device["faults"]["drop_probability"].get<double>(),
                  device["faults"]["delay_us"].get<unsigned>(),
                  device["faults"]["down"].get<bool>() ? " DOWN" : "");
    }
    std::printf("\n");
    for (const auto& [name, value] : device["counters"].items()) {
      std::printf("    %-24s %" PRIu64 "\n", name.c_str(), value.get<uint64_t>());
    }
    std::printf("  modeled (%s)\n", device["modeled"]["device_model"].get<std::string>().c_str());
    for (const auto& [name, value] : device["modeled"]["counters"].items()) {
      std::printf("    %-24s %" PRIu64 "\n", name.c_str(), value.get<uint64_t>());
    }
  }
}

std::string LibraryDirectory() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) Fail("cannot find my own path in /proc/self/exe");
  exe[n] = '\0';
  std::string path(exe);
  std::string dir = path.substr(0, path.rfind('/'));
  return dir + "/../lib/softnic";
}

// Builds what --device-nodes and --netdevs show the program, in namespaces that end with
// the last process in them.
void BuildPrivateView(const FabricHeader& header, const std::string& fabric, const ViewContents& contents) {
  const std::string flags = ViewFlags(contents);
  PrivateView view;
  std::string error;
  if (!view.Begin(&error)) Fail("run" + flags + ": " + error);
  if (contents.device_nodes && !ShowUverbsDeviceNodes(view, header.device_count, &error)) {
    Fail("run --device-nodes: " + error);
  }
  if (contents.netdevs) {
    std::vector<NetdevSpec> specs;
    for (uint32_t d = 0; d < header.device_count; ++d) {
      specs.push_back({header.devices[d].name, NetdevName(d), DeviceIpv4(fabric, d)});
    }
    if (!ShowNetdevs(view, specs, &error)) {
      Fail("run --netdevs: " + error);
    }
  }
  if (!view.End(&error)) Fail("run" + flags + ": " + error);
}

// Puts this process in the fabric's view (shared_view.h): the one its runs still hold, or
// a new one. The record's lock is held until the program is executed.
void EnterFabricView(const Fabric& fabric, const ViewContents& wanted, FabricViewRecord* record) {
  if (!wanted.device_nodes && !wanted.netdevs) return;
  std::string error;
  bool joined = false;
  if (!record->Lock(fabric.directory(), true, &error) || !record->Join(wanted, &joined, &error)) {
    Fail("run" + ViewFlags(wanted) + ": " + error);
  }
  if (!joined) BuildPrivateView(*fabric.header(), fabric.name(), wanted);
  if (!record->AddSelf(wanted, &error)) Fail("run" + ViewFlags(wanted) + ": " + error);
}

int Run(int argc, char** argv) {
  Options options = Parse(argc, argv, 2, {"--fabric", "--devices", "--link"}, {"--device-nodes", "--netdevs"});
  if (options.rest.empty()) Fail("run: give the program after '--', e.g. softnic run -- ibv_devinfo");
  FabricOptions fabric_options = FabricOptionsFrom(options);
  Fabric fabric;
  std::string error;
  if (!fabric.Attach(fabric_options, Fabric::Mode::kOpenOrCreate, &error)) Fail(error);
  const FabricHeader& header = *fabric.header();
  bool explicit_shape = options.values.count("--devices") || options.values.count("--link");
  if (explicit_shape && (header.device_count != fabric_options.device_count ||
                         header.link_layer != fabric_options.link_layer)) {
    Fail("fabric '" + fabric_options.name + "' already exists with " +
         std::to_string(header.device_count) + " devices and link " + LinkLayerName(header.link_layer) +
         "; remove it first (softnic fabric rm --fabric " + fabric_options.name + ")");
  }
  std::string library = LibraryDirectory();
  if (access((library + "/libibverbs.so.1").c_str(), R_OK) != 0) {
    Fail("softnic's libibverbs.so.1 is not in " + library + " (build the softnic_ibverbs target)");
  }
  const char* old_path = std::getenv("LD_LIBRARY_PATH");
  std::string path = library + (old_path && *old_path ? ":" + std::string(old_path) : "");
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  setenv("SOFTNIC_FABRIC", fabric_options.name.c_str(), 1);
  setenv("SOFTNIC_DEVICES", std::to_string(header.device_count).c_str(), 1);
  setenv("SOFTNIC_LINK", LinkLayerName(header.link_layer), 1);
  FabricViewRecord view_record;
  EnterFabricView(fabric, {Has(options, "--device-nodes"), Has(options, "--netdevs")}, &view_record);
  std::vector<char*> args;
  for (std::string& arg : options.rest) args.push_back(arg.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  Fail("cannot run '" + options.rest[0] + "': " + std::strerror(errno));
}

int FabricCommand(int argc, char** argv) {
  if (argc < 3) Fail("fabric: give create, show, list or rm");
  std::string action = argv[2];
  if (action == "create") {
    FabricOptions fabric_options = FabricOptionsFrom(Parse(argc, argv, 3, {"--fabric", "--devices", "--link"}, {}));
    Fabric fabric;
    std::string error;
    if (!fabric.Attach(fabric_options, Fabric::Mode::kCreateNew, &error)) {
      Fail(error.empty() ? "fabric '" + fabric_options.name + "' already exists" : error);
    }
    std::printf("created fabric %s: %u devices, %s link, in %s\n", fabric_options.name.c_str(),
                fabric_options.device_count, LinkLayerName(fabric_options.link_layer),
                fabric.directory().c_str());
    return 0;
  }
  if (action == "show") {
    Options options = Parse(argc, argv, 3, {"--fabric"}, {"--json"});
    Fabric fabric;
    OpenExisting(&fabric, FabricOptionsFrom(options));
    nlohmann::json json = FabricJson(fabric, -1);
    if (Has(options, "--json")) {
      std::printf("%s\n", json.dump(2).c_str());
    } else {
      PrintHuman(json, false);
    }
    return 0;
  }
  if (action == "list") {
    Parse(argc, argv, 3, {}, {});
    for (const std::string& name : ListFabrics()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (action == "rm") {
    Options options = Parse(argc, argv, 3, {"--fabric", "--prefix"}, {});
    std::vector<std::string> names;
    if (auto prefix = options.values.find("--prefix"); prefix != options.values.end()) {
      if (options.values.count("--fabric")) Fail("fabric rm: give --fabric or --prefix, not both");
      if (prefix->second.empty()) Fail("fabric rm: --prefix '' would remove every fabric; name a prefix");
      for (const std::string& name : ListFabrics()) {
        if (name.starts_with(prefix->second)) names.push_back(name);
      }
    } else {
      names.push_back(FabricOptionsFrom(options).name);
    }
    for (const std::string& name : names) {
      std::string error;
      if (!RemoveFabric(name, &error)) Fail(error);
      std::printf("removed fabric %s\n", name.c_str());
    }
    return 0;
  }
  Fail("fabric: unknown action '" + action + "'; valid: create, show, list, rm");
}

int FaultsCommand(int argc, char** argv) {
  if (argc < 3) Fail("faults: give set or clear");
  std::string action = argv[2];
  if (action != "set" && action != "clear") Fail("faults: unknown action '" + action + "'; valid: set, clear");
  Options options = action == "set"
                        ? Parse(argc, argv, 3, {"--fabric", "--device", "--drop", "--delay-us"}, {"--down", "--up"})
                        : Parse(argc, argv, 3, {"--fabric"}, {});
  Fabric fabric;
  OpenExisting(&fabric, FabricOptionsFrom(options));
  FabricHeader& header = *fabric.header();
  int32_t only = -1;
  if (auto it = options.values.find("--device"); it != options.values.end()) only = DeviceIndex(header, it->second);
  int64_t drop_ppm = -1;
  if (auto it = options.values.find("--drop"); it != options.values.end()) {
    char* end = nullptr;
    double p = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !(p >= 0.0 && p <= 1.0)) {
      Fail("--drop '" + it->second + "' is not valid: use a probability in [0, 1]");
    }
    drop_ppm = int64_t(p * 1e6 + 0.5);
  }
  int64_t delay_us = -1;
  if (auto it = options.values.find("--delay-us"); it != options.values.end()) {
    delay_us = int64_t(ParseNumber("--delay-us", it->second, 0, 10000000));
  }
  if (Has(options, "--down") && Has(options, "--up")) Fail("faults set: give --down or --up, not both");
  for (uint32_t d = 0; d < header.device_count; ++d) {
    if (only >= 0 && only != int32_t(d)) continue;
    FaultSettings& faults = header.devices[d].faults;
    if (action == "clear") {
      faults.drop_ppm.store(0);
      faults.delay_us.store(0);
      faults.down.store(0);
      continue;
    }
    if (drop_ppm >= 0) faults.drop_ppm.store(uint32_t(drop_ppm));
    if (delay_us >= 0) faults.delay_us.store(uint32_t(delay_us));
    if (Has(options, "--down")) faults.down.store(1);
    if (Has(options, "--up")) faults.down.store(0);
  }
  uint32_t active = 0;
  for (uint32_t d = 0; d < header.device_count; ++d) {
    const FaultSettings& faults = header.devices[d].faults;
    active |= faults.drop_ppm.load() | faults.delay_us.load() | faults.down.load();
  }
  ChangeBetweenControlEpochs(header, [&] { header.faults_active.store(active != 0 ? 1 : 0); });
  PrintHuman(FabricJson(fabric, only), false);
  return 0;
}

int CountersCommand(int argc, char** argv) {
  Options options = Parse(argc, argv, 2, {"--fabric", "--device"}, {"--json"});
  Fabric fabric;
  OpenExisting(&fabric, FabricOptionsFrom(options));
  int32_t only = -1;
  if (auto it = options.values.find("--device"); it != options.values.end()) {
    only = DeviceIndex(*fabric.header(), it->second);
  }
  nlohmann::json json = FabricJson(fabric, only);
  if (Has(options, "--json")) {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    PrintHuman(json, true);
  }
  return 0;
}

}  // namespace
}  // namespace softnic

int main(int argc, char** argv) {
  using namespace softnic;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "run") return Run(argc, argv);
  if (command == "fabric") return FabricCommand(argc, argv);
  if (command == "faults") return FaultsCommand(argc, argv);
  if (command == "counters") return CountersCommand(argc, argv);
  Fail("unknown command '" + command + "'; valid: run, fabric, faults, counters (softnic --help)");
}
