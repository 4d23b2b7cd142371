// One flag table per program (rdmalab-bench, rdmalab-kv): each flag has its perftest
// spelling where one exists, the values it takes (type, range or choices, unit), who reads
// it and who may set it, a help line, and its default (the options struct's). Parsing, help
// text, the JSON of the resolved configuration and --describe come from the table, so a
// flag is declared once.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "rdma/error.h"

namespace rdmalab {

enum class ParamType { kInteger, kNumber, kBoolean, kString };

// The values a flag takes. `list`: a comma-separated list of the type; min and max bound
// integers and numbers (inclusive); `choices`: a string's fixed set.
struct ValueSpec {
  ParamType type;
  bool list;
  double min;
  double max;
  std::vector<std::string> choices;
};
inline ValueSpec Integers(double min, double max, bool list = false) {
  return {ParamType::kInteger, list, min, max, {}};
}
inline ValueSpec Numbers(double min, double max) { return {ParamType::kNumber, false, min, max, {}}; }
inline ValueSpec Switch() { return {ParamType::kBoolean, false, 0, 0, {}}; }
inline ValueSpec Text(std::vector<std::string> choices = {}) {
  return {ParamType::kString, false, 0, 0, std::move(choices)};
}

enum RoleMask : unsigned { kServerRole = 1, kClientRole = 2, kNodeRole = 4, kEveryRole = 7 };
enum class Scope {
  kExperiment,   // an experiment file may set it
  kCoordinator,  // the harness sets it from the inventory and the run; an experiment may not
};

// Who reads a flag and who sets it.
struct Reach {
  bool symmetric;  // every participant of a run must agree (checked when they join)
  unsigned roles;  // RoleMask: the roles whose process reads it (of those the program has)
  Scope scope;
};
inline constexpr Reach kShared{true, kEveryRole, Scope::kExperiment};
inline constexpr Reach kLocal{false, kEveryRole, Scope::kExperiment};
inline constexpr Reach kServerSide{false, kServerRole, Scope::kExperiment};
inline constexpr Reach kSharedServerSide{true, kServerRole, Scope::kExperiment};
inline constexpr Reach kSharedClientSide{true, kClientRole, Scope::kExperiment};
inline constexpr Reach kCoordinator{false, kEveryRole, Scope::kCoordinator};

template <typename Options>
struct Flag {
  const char* name;  // perftest spelling where one exists; '-' and '_' are interchangeable
  char short_name;
  const char* value_hint;  // nullptr: a switch; "[...]": an optional value (--flag=VALUE)
  const char* unit;        // nullptr: unitless
  Reach reach;
  const char* help;
  ValueSpec value;
  // Parses `value` into the options; `flag` is the spelling errors name.
  std::function<void(Options&, const std::string& flag, const std::string& value)> set;
  std::function<nlohmann::json(const Options&)> get;
};

// Value parsers: each fails naming the flag, the value and what is valid.
long long ParseInteger(const std::string& flag, const std::string& value, long long min, long long max);
double ParseNumber(const std::string& flag, const std::string& value, double min, double max);
std::string OneOf(const std::string& flag, const std::string& value, const std::vector<std::string>& valid);
bool ParseSwitch(const std::string& flag, const std::string& value);
std::vector<std::uint32_t> ParseIntegers(const std::string& flag, const std::string& value, long long min,
                                         long long max);
std::string FlagKey(const char* name);  // "ib-dev" -> "ib_dev": the parameter's one name (YAML, JSON)
bool SameFlagName(const std::string& a, const std::string& b);

constexpr double kMaxSeconds = 1e7;

template <typename Options, typename Base, typename T>
std::function<nlohmann::json(const Options&)> FieldGetter(T Base::*field) {
  return [field](const Options& options) { return nlohmann::json(options.*field); };
}

// The value spec, setter and getter of a table row for one field; `Options` is the struct
// type in scope where they are used.
#define RDMALAB_FIELD_FLAG(field, spec, parse)                                           \
  spec, [](Options& o, const std::string& f, const std::string& v) { o.field = parse; }, \
      ::rdmalab::FieldGetter<Options>(&Options::field)
#define RDMALAB_INT_FLAG(field, min, max)                                     \
  RDMALAB_FIELD_FLAG(field, ::rdmalab::Integers(double(min), double(max)), \
                     static_cast<decltype(o.field)>(::rdmalab::ParseInteger(f, v, min, max)))
#define RDMALAB_INT_LIST_FLAG(field, min, max) \
  RDMALAB_FIELD_FLAG(field, ::rdmalab::Integers(double(min), double(max), true), ::rdmalab::ParseIntegers(f, v, min, max))
#define RDMALAB_NUMBER_FLAG(field, min, max) \
  RDMALAB_FIELD_FLAG(field, ::rdmalab::Numbers(min, max), ::rdmalab::ParseNumber(f, v, min, max))
#define RDMALAB_SECONDS_FLAG(field, min) RDMALAB_NUMBER_FLAG(field, min, ::rdmalab::kMaxSeconds)
#define RDMALAB_SWITCH_FLAG(field) RDMALAB_FIELD_FLAG(field, ::rdmalab::Switch(), ::rdmalab::ParseSwitch(f, v))
#define RDMALAB_STRING_FLAG(field) RDMALAB_FIELD_FLAG(field, ::rdmalab::Text(), (static_cast<void>(f), v))
#define RDMALAB_CHOICE_FLAG(field, ...) \
  RDMALAB_FIELD_FLAG(field, ::rdmalab::Text({__VA_ARGS__}), ::rdmalab::OneOf(f, v, {__VA_ARGS__}))

// The options every participant of every program has (rdma/session.h Participant reads
// them), declared once: each program's options struct derives from it.
struct ParticipantOptions {
  // Device and addressing.
  std::string ib_dev;
  int ib_port = 1;
  int gid_index = -1;
  // Who talks to whom.
  std::string server_host;  // standalone client: the server's host; empty on the server
  int port = 18515;
  std::string rendezvous;   // HOST:PORT under the coordinator
  std::string role;         // server | client | node
  int index = 0;
  int peers = 1;
  // Run control and output.
  double timeout_s = 60;
  std::string cpus;
  bool use_hugepages = false;
  bool out_json = false;
  std::string out_json_file;
  std::uint64_t seed = 1;
};

// The flags of ParticipantOptions: where the device is and how a run is joined (first in a
// table), and run control (last). `roles`: the program's roles, the values of --role.
template <typename Options>
std::vector<Flag<Options>> JoinFlags(const std::vector<std::string>& roles) {
  return {
      {"ib-dev", 'd', "NAME", nullptr, kCoordinator, "RDMA device (default: the first one listed)",
       RDMALAB_STRING_FLAG(ib_dev)},
      {"ib-port", 'i', "N", nullptr, kCoordinator, "device port", RDMALAB_INT_FLAG(ib_port, 1, 255)},
      {"gid-index", 'x', "N", nullptr, kCoordinator, "GID index; -1: none on IB, 0 on RoCE",
       RDMALAB_INT_FLAG(gid_index, -1, 1024)},
      {"port", 'p', "N", nullptr, kCoordinator, "TCP port of a standalone server's rendezvous",
       RDMALAB_INT_FLAG(port, 1, 65535)},
      {"rendezvous", 0, "HOST:PORT", nullptr, kCoordinator,
       "coordinator's rendezvous (token in $RDMALAB_RENDEZVOUS_TOKEN)", RDMALAB_STRING_FLAG(rendezvous)},
      {"role", 0, "ROLE", nullptr, kCoordinator, "this process's role (coordinator runs; standalone: implied)",
       Text(roles),
       [roles](Options& o, const std::string& f, const std::string& v) { o.role = OneOf(f, v, roles); },
       FieldGetter<Options>(&Options::role)},
      {"index", 0, "I", nullptr, kCoordinator, "0-based index within the role", RDMALAB_INT_FLAG(index, 0, 1 << 20)},
      {"peers", 0, "N", "processes", kCoordinator,
       "processes of the other role (server: its clients; client: 1; node: all nodes)",
       RDMALAB_INT_FLAG(peers, 1, 4096)},
  };
}

template <typename Options>
std::vector<Flag<Options>> RunControlFlags() {
  return {
      {"timeout", 0, "SEC", "s", kCoordinator, "whole-run deadline", RDMALAB_SECONDS_FLAG(timeout_s, 0.1)},
      {"cpus", 0, "LIST", nullptr, kLocal, "CPUs for the threads (default: the device's NUMA node)",
       RDMALAB_STRING_FLAG(cpus)},
      {"use_hugepages", 0, nullptr, nullptr, kLocal, "2 MiB hugepages for registered memory",
       RDMALAB_SWITCH_FLAG(use_hugepages)},
      {"out_json", 0, "[=FILE]", nullptr, kCoordinator,
       "one JSON document to FILE, or to stdout (table then on stderr)", Text(),
       [](Options& o, const std::string&, const std::string& v) {
         o.out_json = true;
         o.out_json_file = v;
       },
       [](const Options& o) { return nlohmann::json(o.out_json_file); }},
      {"seed", 0, "N", nullptr, kShared, "random seed", RDMALAB_INT_FLAG(seed, 0, 1ll << 62)},
  };
}

// A program's table: the shared join flags, its own, then the shared run control.
template <typename Options>
std::vector<Flag<Options>> FlagTable(const std::vector<std::string>& roles, std::vector<Flag<Options>> own) {
  std::vector<Flag<Options>> table = JoinFlags<Options>(roles);
  table.insert(table.end(), own.begin(), own.end());
  const std::vector<Flag<Options>> control = RunControlFlags<Options>();
  table.insert(table.end(), control.begin(), control.end());
  return table;
}

// The names of ParticipantOptions' flags: every mode and system takes them.
std::vector<std::string> ParticipantParamNames();

// The default a flag shows in --help and --describe: null where the options struct's value
// means "chosen by the mode" (an empty string or list, or a number outside the range).
nlohmann::json ShownDefault(const ValueSpec& value, const nlohmann::json& field);

// One parameter of --describe (schema rdmalab-describe/1).
nlohmann::ordered_json ParamJson(const char* name, char short_name, const char* unit, const Reach& reach, const char* help,
                         const ValueSpec& value, const nlohmann::json& field, const std::vector<std::string>& roles);
// One help line: spelling, help, default when shown, "(both sides)".
std::string HelpLine(const char* name, char short_name, const char* value_hint, bool symmetric, const char* help,
                     const nlohmann::json& shown_default);

// What a program runs (a mode, a system) as --describe lists it: the parameters it takes
// beyond ParticipantOptions', and the name figures give it where a row says one.
struct Described {
  std::string name;
  std::string summary;
  std::vector<std::string> params;
  std::string display;  // empty: the figures use `name`
};

// The Described of each entry of a table whose rows have name, summary, params and maybe display.
template <typename Entry>
std::vector<Described> DescribedList(const std::vector<Entry>& entries) {
  std::vector<Described> list;
  for (const auto& entry : entries) {
    list.push_back({entry.name, entry.summary, entry.params, {}});
    if constexpr (requires { entry.display; }) list.back().display = entry.display;
  }
  return list;
}

// A program's command line: its name, its usage lines, its roles, its flag table, what it
// makes of the positional arguments, and what --describe lists besides the parameters.
template <typename Options>
struct CommandLine {
  const char* program;
  std::string usage;
  std::vector<std::string> roles;
  std::vector<Flag<Options>> flags;
  // Takes the positional arguments (and SERVER_HOST among them) and makes the checks that
  // span flags; `argv` for those that depend on which flags were spelled.
  std::function<void(Options&, const std::vector<std::string>& positional, int argc, char** argv)> finish;
  // The positional arguments' part of the document's config besides server_host (both
  // sides agree on it).
  std::function<nlohmann::json(const Options&)> positional_config;
  std::function<std::vector<Described>()> modes;
  std::function<std::vector<Described>()> systems;  // empty: the program has none
};

template <typename Options>
std::string HelpText(const CommandLine<Options>& line) {
  std::string out = line.usage;
  const Options defaults;
  for (const auto& flag : line.flags) {
    out += HelpLine(flag.name, flag.short_name, flag.value_hint, flag.reach.symmetric, flag.help,
                    ShownDefault(flag.value, flag.get(defaults)));
  }
  return out;
}

// The description of every name `listed` takes (ParticipantOptions' and its own), in table
// order; fails on a listed name the table lacks.
template <typename Options>
nlohmann::ordered_json DescribedJson(const std::vector<Flag<Options>>& flags, const Described& described) {
  std::vector<std::string> names = ParticipantParamNames();
  for (const auto& name : described.params) {
    const bool known = std::any_of(flags.begin(), flags.end(), [&](const auto& f) { return FlagKey(f.name) == name; });
    if (!known) Fail(described.name, " lists parameter '", name, "', which no flag declares");
    names.push_back(name);
  }
  std::vector<std::string> params;
  for (const auto& flag : flags) {
    const std::string key = FlagKey(flag.name);
    if (std::find(names.begin(), names.end(), key) != names.end()) params.push_back(key);
  }
  nlohmann::ordered_json entry = {{"name", described.name}};
  if (!described.display.empty()) entry["display"] = described.display;
  entry["summary"] = described.summary;
  entry["params"] = params;
  return entry;
}

// The program's description (schema rdmalab-describe/1), from its tables.
template <typename Options>
nlohmann::ordered_json DescribeJson(const CommandLine<Options>& line) {
  const Options defaults;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const auto& flag : line.flags) {
    params.push_back(ParamJson(flag.name, flag.short_name, flag.unit, flag.reach, flag.help, flag.value,
                               flag.get(defaults), line.roles));
  }
  nlohmann::ordered_json document = {{"schema_version", "rdmalab-describe/1"},
                             {"program", line.program},
                             {"backends", {"softnic", "verbs"}},
                             {"params", params},
                             {"modes", nlohmann::ordered_json::array()}};
  for (const auto& mode : line.modes()) document["modes"].push_back(DescribedJson(line.flags, mode));
  if (line.systems) {
    document["systems"] = nlohmann::ordered_json::array();
    for (const auto& system : line.systems()) document["systems"].push_back(DescribedJson(line.flags, system));
  }
  return document;
}

// Applies argv[1..] to `options`; returns the positional arguments. -h/--help prints the
// help and --describe the description, each exiting 0.
template <typename Options>
std::vector<std::string> ParseFlags(const CommandLine<Options>& line, int argc, char** argv, Options& options) {
  const auto find = [&](auto matches, const std::string& spelled) -> const Flag<Options>& {
    for (const auto& flag : line.flags) {
      if (matches(flag)) return flag;
    }
    Fail("unknown flag ", spelled, ": see ", line.program, " --help");
  };
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--describe") {
      std::fputs(arg == "--describe" ? (DescribeJson(line).dump(2) + "\n").c_str() : HelpText(line).c_str(), stdout);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) {
      positional.push_back(arg);
      continue;
    }
    const Flag<Options>* flag;
    std::string value;
    bool has_value = false;
    if (arg[1] == '-') {
      std::string name = arg.substr(2);
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      flag = &find([&](const Flag<Options>& f) { return SameFlagName(f.name, name); }, "--" + name);
    } else {
      flag = &find([&](const Flag<Options>& f) { return f.short_name == arg[1]; }, arg.substr(0, 2));
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
    flag->set(options, FlagKey(flag->name), value);
  }
  return positional;
}

// Parses argv: fails with one line naming the flag or value and what is valid; prints the
// help (-h/--help) or the description (--describe) and exits 0.
template <typename Options>
Options ParseCommandLine(const CommandLine<Options>& line, int argc, char** argv) {
  Options options;
  const std::vector<std::string> positional = ParseFlags(line, argc, argv, options);
  line.finish(options, positional, argc, argv);
  return options;
}

// The document's config: every flag's resolved value keyed by its name, the positional
// arguments' part and server_host.
template <typename Options>
nlohmann::json ConfigJson(const CommandLine<Options>& line, const Options& options) {
  nlohmann::json config = line.positional_config(options);
  for (const auto& flag : line.flags) config[FlagKey(flag.name)] = flag.get(options);
  config["server_host"] = options.server_host;
  return config;
}

// What every participant of a run must agree on: the symmetric flags and the positional part.
template <typename Options>
nlohmann::json SymmetricConfigJson(const CommandLine<Options>& line, const Options& options) {
  nlohmann::json config = line.positional_config(options);
  for (const auto& flag : line.flags) {
    if (flag.reach.symmetric) config[FlagKey(flag.name)] = flag.get(options);
  }
  return config;
}

}  // namespace rdmalab
