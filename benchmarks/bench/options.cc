#include "benchmarks/bench/options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

struct Flag {
  const char* name;  // perftest spelling where one exists; '-' and '_' are interchangeable
  char short_name;
  const char* value_hint;  // nullptr: a switch
  bool symmetric;
  const char* help;
  std::function<void(Options&, const std::string&)> set;
  std::function<json(const Options&)> get;
};

std::string Normalize(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::string Key(const char* name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

long long ParseInteger(const std::string& flag, const std::string& value, long long min, long long max) {
  try {
    std::size_t used = 0;
    const long long parsed = std::stoll(value, &used, 0);
    if (used == value.size() && parsed >= min && parsed <= max) return parsed;
  } catch (const std::logic_error&) {
  }
  Fail("bad value '", value, "' for --", flag, ": expected an integer in [", min, ", ", max, "]");
}

double ParseSeconds(const std::string& flag, const std::string& value, double min) {
  try {
    std::size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used == value.size() && parsed >= min && parsed < 1e7) return parsed;
  } catch (const std::logic_error&) {
  }
  Fail("bad value '", value, "' for --", flag, ": expected seconds >= ", min);
}

std::string OneOf(const std::string& flag, const std::string& value, std::initializer_list<const char*> valid) {
  std::string list;
  for (const char* choice : valid) {
    if (value == choice) return value;
    list += (list.empty() ? "" : ", ") + std::string(choice);
  }
  Fail("bad value '", value, "' for --", flag, ": valid values are ", list);
}

bool ParseSwitch(const std::string& flag, const std::string& value) {
  if (value.empty() || value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  Fail("bad value '", value, "' for --", flag, ": a switch takes no value, or true/false");
}

std::vector<std::uint32_t> ParseSizes(const std::string& value) {
  std::vector<std::uint32_t> sizes;
  std::stringstream stream(value);
  std::string token;
  while (std::getline(stream, token, ',')) {
    sizes.push_back(static_cast<std::uint32_t>(ParseInteger("size", token, 0, 1ll << 30)));
  }
  if (sizes.empty()) Fail("bad value '", value, "' for --size: expected bytes, or a comma-separated list");
  return sizes;
}

template <typename T>
std::function<json(const Options&)> Get(T Options::*field) {
  return [field](const Options& options) { return json(options.*field); };
}

#define INT_FLAG(field, min, max) \
  [](Options& o, const std::string& v) { o.field = static_cast<decltype(o.field)>(ParseInteger(#field, v, min, max)); }, \
      Get(&Options::field)
#define SWITCH_FLAG(field) \
  [](Options& o, const std::string& v) { o.field = ParseSwitch(#field, v); }, Get(&Options::field)
#define STRING_FLAG(field) [](Options& o, const std::string& v) { o.field = v; }, Get(&Options::field)
#define CHOICE_FLAG(field, ...) \
  [](Options& o, const std::string& v) { o.field = OneOf(#field, v, {__VA_ARGS__}); }, Get(&Options::field)
#define SECONDS_FLAG(field, min) \
  [](Options& o, const std::string& v) { o.field = ParseSeconds(#field, v, min); }, Get(&Options::field)

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"ib-dev", 'd', "NAME", false, "RDMA device (default: the first one listed)", STRING_FLAG(ib_dev)},
      {"ib-port", 'i', "N", false, "device port", INT_FLAG(ib_port, 1, 255)},
      {"gid-index", 'x', "N", false, "GID index; -1: none on IB, 0 on RoCE", INT_FLAG(gid_index, -1, 1024)},
      {"port", 'p', "N", false, "TCP port of a standalone server", INT_FLAG(port, 1, 65535)},
      {"rendezvous", 0, "HOST:PORT", false, "coordinator's rendezvous (token in $RDMALAB_RENDEZVOUS_TOKEN)",
       STRING_FLAG(rendezvous)},
      {"role", 0, "ROLE", false, "server | client | node (coordinator runs; standalone: implied)",
       CHOICE_FLAG(role, "server", "client", "node")},
      {"index", 0, "I", false, "0-based index within the role", INT_FLAG(index, 0, 1 << 20)},
      {"peers", 0, "N", false, "processes of the other role (server: clients; node: all nodes)",
       INT_FLAG(peers, 1, 4096)},
      {"verb", 0, "VERB", true, "read | write | write_inline | send | cas | faa [default write; atomics faa]",
       CHOICE_FLAG(verb, "read", "write", "write_inline", "send", "cas", "faa")},
      {"connection", 'c', "RC|UC|UD", true, "transport", CHOICE_FLAG(connection, "RC", "UC", "UD")},
      {"size", 's', "BYTES[,BYTES...]", true, "payload bytes per message (a list sweeps)",
       [](Options& o, const std::string& v) { o.sizes = ParseSizes(v); }, Get(&Options::sizes)},
      {"all", 'a', nullptr, true, "sweep sizes 2..2^23 by powers of two", SWITCH_FLAG(all)},
      {"iters", 'n', "N", true, "operations per thread (default: lat 1000, others 100000; excludes -D)",
       INT_FLAG(iters, 1, 1ll << 50)},
      {"duration", 'D', "SEC", true, "measure for SEC seconds instead of -n", SECONDS_FLAG(duration_s, 0)},
      {"warmup", 0, "SEC", true, "warm-up before measuring", SECONDS_FLAG(warmup_s, 0)},
      {"tx-depth", 't', "N", true, "window: outstanding WRs per QP", INT_FLAG(tx_depth, 1, 1 << 16)},
      {"cq-mod", 'Q', "N", true, "signal one WR in N (selective signaling)", INT_FLAG(cq_mod, 1, 1 << 16)},
      {"post_list", 'l', "N", true, "WRs per ibv_post_send (doorbell batch)", INT_FLAG(post_list, 1, 1 << 12)},
      {"qp", 'q', "N", true, "QPs per thread per peer (multi-queue)", INT_FLAG(qp, 1, 1 << 12)},
      {"threads", 0, "N", true, "threads per process, one CPU each", INT_FLAG(threads, 1, 256)},
      {"inline_size", 'I', "BYTES", true, "inline payloads up to BYTES", INT_FLAG(inline_size, 0, 1 << 16)},
      {"sge", 0, "K", true, "SGEs per WR (payload split evenly)", INT_FLAG(sge, 1, 64)},
      {"header-only", 0, nullptr, true, "SENDs carry no payload, only a 4-byte immediate", SWITCH_FLAG(header_only)},
      {"direction", 0, "DIR", true, "inbound (clients -> server) | outbound | alltoall",
       CHOICE_FLAG(direction, "inbound", "outbound", "alltoall")},
      {"lat-method", 0, "METHOD", true, "completion (signaled op until its CQE) | pingpong (half round trip)",
       CHOICE_FLAG(lat_method, "completion", "pingpong")},
      {"request", 0, "VERB", true, "echo request verb: write | send", CHOICE_FLAG(request, "write", "send")},
      {"response", 0, "VERB", true, "echo response verb: write | send", CHOICE_FLAG(response, "write", "send")},
      {"response-connection", 0, "RC|UC|UD", true, "echo response transport",
       CHOICE_FLAG(response_connection, "RC", "UC", "UD")},
      {"accesses", 0, "N", true, "echo server: random memory accesses per request", INT_FLAG(accesses, 0, 64)},
      {"prefetch", 0, nullptr, true, "echo server: prefetch the accesses of the next requests", SWITCH_FLAG(prefetch)},
      {"table-mb", 0, "MB", true, "echo server: size of the randomly accessed table", INT_FLAG(table_mb, 1, 1 << 16)},
      {"counters", 0, "Z", true, "atomics: number of counters hit at random", INT_FLAG(counters, 1, 1 << 24)},
      {"counter-stride", 0, "BYTES", true, "atomics: bytes between counters (multiple of 8)",
       INT_FLAG(counter_stride, 8, 1 << 20)},
      {"design", 0, "NAME", true, "sequencer: herd-rpc | herd-rpc-batch | herd-rpc-mq | spec-s0 | atomics",
       CHOICE_FLAG(design, "herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics")},
      {"count", 0, "N", true, "sequencer: integers handed out in total", INT_FLAG(count, 1, 1ll << 40)},
      {"batch", 0, "N", true, "sequencer: most requests answered per doorbell", INT_FLAG(batch, 1, 1024)},
      {"validate", 0, nullptr, true, "check every byte moved (slower; a fast number from a broken transfer fails)",
       SWITCH_FLAG(validate)},
      {"timeout", 0, "SEC", false, "whole-run deadline", SECONDS_FLAG(timeout_s, 0.1)},
      {"cpus", 0, "LIST", false, "CPUs for the threads (default: the device's NUMA node)", STRING_FLAG(cpus)},
      {"use_hugepages", 0, nullptr, false, "2 MiB hugepages for registered memory", SWITCH_FLAG(use_hugepages)},
      {"seed", 0, "N", true, "random seed (targets, keys)", INT_FLAG(seed, 0, 1ll << 62)},
      {"out_json", 0, "[=FILE]", false, "one JSON document to FILE, or to stdout (table then on stderr)",
       [](Options& o, const std::string& v) {
         o.out_json = true;
         o.out_json_file = v;
       },
       [](const Options& o) { return json(o.out_json_file); }},
  };
  return flags;
}

const Flag& FindLong(const std::string& name) {
  for (const auto& flag : Flags()) {
    if (Normalize(flag.name) == Normalize(name)) return flag;
  }
  Fail("unknown flag --", name, ": see rdmalab-bench --help");
}

const Flag& FindShort(char name) {
  for (const auto& flag : Flags()) {
    if (flag.short_name == name) return flag;
  }
  Fail("unknown flag -", name, ": see rdmalab-bench --help");
}

}  // namespace

std::string HelpText() {
  std::ostringstream out;
  const Options defaults;
  out << "usage: rdmalab-bench MODE [flags] [SERVER_HOST]\n"
         "       rdmalab-bench MODE --rendezvous HOST:PORT --role ROLE --index I --peers N [flags]\n"
         "modes: lat, tput, echo, atomics, sgbatch, sequencer (README: benchmarks/README.md)\n"
         "A standalone server is started without SERVER_HOST; clients name it. Flags accept '-' or '_'.\n\n";
  for (const auto& flag : Flags()) {
    std::string spelling = flag.short_name ? std::string("-") + flag.short_name + ", " : "    ";
    spelling += std::string("--") + flag.name;
    if (flag.value_hint) spelling += std::string(flag.value_hint[0] == '[' ? "" : " ") + flag.value_hint;
    char line[160];
    std::snprintf(line, sizeof(line), "  %-34s ", spelling.c_str());
    out << line << flag.help;
    const json value = flag.get(defaults);
    const bool shown = !(value.is_string() && value.get<std::string>().empty()) && !value.is_array() &&
                       std::string(flag.name) != "iters" && std::string(flag.name) != "out_json";
    if (shown) out << " [default " << (value.is_string() ? value.get<std::string>() : value.dump()) << "]";
    out << (flag.symmetric ? " (both sides)" : "") << "\n";
  }
  return out.str();
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(HelpText().c_str(), stdout);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) {
      positional.push_back(arg);
      continue;
    }
    const Flag* flag;
    std::string value;
    bool has_value = false;
    if (arg[1] == '-') {
      std::string name = arg.substr(2);
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      flag = &FindLong(name);
    } else {
      flag = &FindShort(arg[1]);
      if (arg.size() > 2) {
        value = arg.substr(2);
        has_value = true;
      }
    }
    const bool optional_value = flag->value_hint != nullptr && flag->value_hint[0] == '[';
    if (flag->value_hint != nullptr && !optional_value && !has_value) {
      if (i + 1 >= argc) Fail("flag --", flag->name, " needs a value (", flag->value_hint, ")");
      value = argv[++i];
    }
    flag->set(options, value);
  }
  if (positional.empty()) Fail("no mode given: expected one of lat, tput, echo, atomics, sgbatch, sequencer");
  options.mode = positional[0];
  if (positional.size() > 2) Fail("unexpected argument '", positional[2], "': expected MODE [SERVER_HOST]");
  if (positional.size() == 2) options.server_host = positional[1];
  return options;
}

json ConfigJson(const Options& options) {
  json config = {{"mode", options.mode}};
  for (const auto& flag : Flags()) config[Key(flag.name)] = flag.get(options);
  config["server_host"] = options.server_host;
  return config;
}

json SymmetricConfigJson(const Options& options) {
  json config = {{"mode", options.mode}};
  for (const auto& flag : Flags()) {
    if (flag.symmetric) config[Key(flag.name)] = flag.get(options);
  }
  return config;
}

}  // namespace rdmalab::bench
