// The system table: a key-value system is a server and a client over one Session, the
// parameters it takes beyond every system's (--describe lists them; the harness rejects any
// other), and the checks it makes of the options before anything is touched. The program
// core (program.h) looks systems up here by name, as rdmalab-bench looks up its modes;
// kv/remote takes a READ-based system's design from its row. Adding a system is its code
// (in kv/CMakeLists.txt) plus its entry points' declarations and one row in systems.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/core/options.h"
#include "kv/core/report.h"
#include "kv/core/session.h"

namespace rdmalab::kv {

// The data layout and verbs a READ-based system's server and client build (kv/remote).
enum class RemoteDesign : std::uint8_t { kPilaf, kFarm, kFarmVar, kDrtm, kDrtmWrite, kHydraDb };

struct System {
  const char* name;
  const char* display;  // what figures call it
  const char* summary;
  std::vector<std::string> params;  // beyond kEverySystemParams; names in the flag table (options.cc)
  void (*check)(Options& options);  // fails naming the conflict
  Report (*server)(Session& session);
  Report (*client)(Session& session);
  std::optional<RemoteDesign> remote = std::nullopt;  // the READ-based systems' design
};

const std::vector<System>& Systems();
const System& FindSystem(const std::string& name);
std::vector<std::string> SystemNames();
// The parameters every system takes: the workload and the client core's (client_core.h).
const std::vector<std::string>& EverySystemParams();
// One line per system for --help, and each system as --describe lists it.
std::string SystemList();
std::vector<Described> DescribedSystems();

}  // namespace rdmalab::kv
