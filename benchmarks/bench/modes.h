// The mode table: a mode is a run function over a Session, the parameters it takes beyond
// the participant's (--describe lists them; the harness rejects any other), plus the facts
// the core needs before joining (does it use the `node` role). Adding a mode is its code
// (one file, in CMakeLists.txt) plus its entry points' declarations and one row in modes.cc.
#pragma once

#include <string>
#include <vector>

#include "benchmarks/bench/options.h"
#include "benchmarks/bench/report.h"
#include "benchmarks/bench/session.h"

namespace rdmalab::bench {

struct Mode {
  const char* name;
  const char* summary;
  std::vector<std::string> params;  // names in the flag table (options.cc), '_' spelling
  // Checks the options before any resource is touched; fails naming the conflict.
  void (*check)(Options& options);
  bool (*node_roles)(const Options& options);
  Report (*run)(Session& session);
};

const std::vector<Mode>& Modes();
const Mode& FindMode(const std::string& name);
std::string ModeNames();  // "lat, tput, ..."
// The mode a run uses: the named one over verbs, or its kernel-socket stand-in (--stack udp|tcp).
const Mode& ModeFor(const Options& options);

// Shared checks.
std::uint64_t IterationsOrDefault(const Options& options, std::uint64_t mode_default);
void DefaultSizes(Options& options, std::uint32_t size);
bool IsAtomic(const std::string& verb);

}  // namespace rdmalab::bench
