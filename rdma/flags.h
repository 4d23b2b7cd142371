// One flag table per program (rdmalab-bench, rdmalab-kv): each flag has its perftest
// spelling where one exists, a default (the options struct's), a help line, and whether
// both sides of a run must agree on it. Parsing, help text and the JSON of the resolved
// configuration come from the table, so a flag is declared once.
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
#include <vector>

#include "rdma/error.h"

namespace rdmalab {

template <typename Options>
struct Flag {
  const char* name;  // perftest spelling where one exists; '-' and '_' are interchangeable
  char short_name;
  const char* value_hint;  // nullptr: a switch; "[...]": an optional value (--flag=VALUE)
  bool symmetric;
  const char* help;
  std::function<void(Options&, const std::string&)> set;
  std::function<nlohmann::json(const Options&)> get;
};

// Value parsers: each fails naming the flag, the value and what is valid.
long long ParseInteger(const std::string& flag, const std::string& value, long long min, long long max);
double ParseNumber(const std::string& flag, const std::string& value, double min, double max);
double ParseSeconds(const std::string& flag, const std::string& value, double min);
std::string OneOf(const std::string& flag, const std::string& value, std::initializer_list<const char*> valid);
bool ParseSwitch(const std::string& flag, const std::string& value);
std::vector<std::uint32_t> ParseSizes(const std::string& flag, const std::string& value);
std::string FlagKey(const char* name);  // "ib-dev" -> "ib_dev", as the JSON config names it
bool SameFlagName(const std::string& a, const std::string& b);

template <typename Options, typename T>
std::function<nlohmann::json(const Options&)> FieldGetter(T Options::*field) {
  return [field](const Options& options) { return nlohmann::json(options.*field); };
}

// Field setters for the table; `Options` is the struct type in scope where they are used.
#define RDMALAB_INT_FLAG(field, min, max)                                                         \
  [](Options& o, const std::string& v) {                                                          \
    o.field = static_cast<decltype(o.field)>(::rdmalab::ParseInteger(#field, v, min, max));       \
  },                                                                                              \
      ::rdmalab::FieldGetter(&Options::field)
#define RDMALAB_NUMBER_FLAG(field, min, max) \
  [](Options& o, const std::string& v) { o.field = ::rdmalab::ParseNumber(#field, v, min, max); }, \
      ::rdmalab::FieldGetter(&Options::field)
#define RDMALAB_SWITCH_FLAG(field) \
  [](Options& o, const std::string& v) { o.field = ::rdmalab::ParseSwitch(#field, v); }, \
      ::rdmalab::FieldGetter(&Options::field)
#define RDMALAB_STRING_FLAG(field) \
  [](Options& o, const std::string& v) { o.field = v; }, ::rdmalab::FieldGetter(&Options::field)
#define RDMALAB_CHOICE_FLAG(field, ...) \
  [](Options& o, const std::string& v) { o.field = ::rdmalab::OneOf(#field, v, {__VA_ARGS__}); }, \
      ::rdmalab::FieldGetter(&Options::field)
#define RDMALAB_SECONDS_FLAG(field, min) \
  [](Options& o, const std::string& v) { o.field = ::rdmalab::ParseSeconds(#field, v, min); }, \
      ::rdmalab::FieldGetter(&Options::field)

// The flags every program's table shares, for the fields ParticipantConfigFrom (rdma/session.h)
// and WriteDocument (rdma/program.h) read: where the device is and how a standalone run
// meets its server (first in a table), and run control (last).
template <typename Options>
std::vector<Flag<Options>> ConnectionFlags() {
  return {
      {"ib-dev", 'd', "NAME", false, "RDMA device (default: the first one listed)", RDMALAB_STRING_FLAG(ib_dev)},
      {"ib-port", 'i', "N", false, "device port", RDMALAB_INT_FLAG(ib_port, 1, 255)},
      {"gid-index", 'x', "N", false, "GID index; -1: none on IB, 0 on RoCE", RDMALAB_INT_FLAG(gid_index, -1, 1024)},
      {"port", 'p', "N", false, "TCP port of a standalone server's rendezvous", RDMALAB_INT_FLAG(port, 1, 65535)},
      {"rendezvous", 0, "HOST:PORT", false, "coordinator's rendezvous (token in $RDMALAB_RENDEZVOUS_TOKEN)",
       RDMALAB_STRING_FLAG(rendezvous)},
  };
}

template <typename Options>
std::vector<Flag<Options>> RunControlFlags() {
  return {
      {"timeout", 0, "SEC", false, "whole-run deadline", RDMALAB_SECONDS_FLAG(timeout_s, 0.1)},
      {"cpus", 0, "LIST", false, "CPUs for the threads (default: the device's NUMA node)", RDMALAB_STRING_FLAG(cpus)},
      {"use_hugepages", 0, nullptr, false, "2 MiB hugepages for registered memory",
       RDMALAB_SWITCH_FLAG(use_hugepages)},
      {"out_json", 0, "[=FILE]", false, "one JSON document to FILE, or to stdout (table then on stderr)",
       [](Options& o, const std::string& v) {
         o.out_json = true;
         o.out_json_file = v;
       },
       [](const Options& o) { return nlohmann::json(o.out_json_file); }},
  };
}

// A program's table: the shared connection flags, its own, then the shared run control.
template <typename Options>
std::vector<Flag<Options>> FlagTable(std::vector<Flag<Options>> own) {
  std::vector<Flag<Options>> table = ConnectionFlags<Options>();
  table.insert(table.end(), own.begin(), own.end());
  const std::vector<Flag<Options>> control = RunControlFlags<Options>();
  table.insert(table.end(), control.begin(), control.end());
  return table;
}

// Applies argv[1..] to `options`; returns the positional arguments. `program` names the
// binary in errors; -h/--help prints `help` and exits 0.
template <typename Options>
std::vector<std::string> ParseFlags(const std::vector<Flag<Options>>& flags, const char* program,
                                    const std::string& help, int argc, char** argv, Options& options) {
  const auto find = [&](auto matches, const std::string& spelled) -> const Flag<Options>& {
    for (const auto& flag : flags) {
      if (matches(flag)) return flag;
    }
    Fail("unknown flag ", spelled, ": see ", program, " --help");
  };
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(help.c_str(), stdout);
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
    flag->set(options, value);
  }
  return positional;
}

// One line per flag: spelling, help, default (unless `hide_default` says so), "(both sides)".
template <typename Options>
std::string FlagHelp(const std::vector<Flag<Options>>& flags, const std::function<bool(const char*)>& hide_default) {
  std::ostringstream out;
  const Options defaults;
  for (const auto& flag : flags) {
    std::string spelling = flag.short_name ? std::string("-") + flag.short_name + ", " : "    ";
    spelling += std::string("--") + flag.name;
    if (flag.value_hint) spelling += std::string(flag.value_hint[0] == '[' ? "" : " ") + flag.value_hint;
    char line[160];
    std::snprintf(line, sizeof(line), "  %-34s ", spelling.c_str());
    out << line << flag.help;
    const nlohmann::json value = flag.get(defaults);
    const bool shown = !(value.is_string() && value.get<std::string>().empty()) && !value.is_array() &&
                       !hide_default(flag.name);
    if (shown) out << " [default " << (value.is_string() ? value.get<std::string>() : value.dump()) << "]";
    out << (flag.symmetric ? " (both sides)" : "") << "\n";
  }
  return out.str();
}

// Every flag's resolved value (or only the symmetric ones), keyed as FlagKey names them.
template <typename Options>
nlohmann::json FlagsJson(const std::vector<Flag<Options>>& flags, const Options& options, bool symmetric_only) {
  nlohmann::json config = nlohmann::json::object();
  for (const auto& flag : flags) {
    if (!symmetric_only || flag.symmetric) config[FlagKey(flag.name)] = flag.get(options);
  }
  return config;
}

}  // namespace rdmalab
