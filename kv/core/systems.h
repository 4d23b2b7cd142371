// The system table: a key-value system is a server and a client over one Session, the
// parameters it takes beyond every system's (--describe lists them; the harness rejects any
// other), and the checks it makes of the options before anything is touched. The program
// core (program.h) looks systems up here by name, as rdmalab-bench looks up its modes;
// kv/remote takes a READ-based system's design from its row. Adding a system is one row
// here plus its code.
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

// System entry points (one folder each).
void CheckHerd(Options& options);
Report RunHerdServer(Session& session);
Report RunHerdClient(Session& session);
// The READ-based systems (kv/remote: one server; a client transport each in kv/pilaf,
// kv/farm, kv/drtm, kv/hydradb).
void CheckRemoteSystem(Options& options);
Report RunRemoteServer(Session& session);
Report RunPilafClient(Session& session);
Report RunFarmClient(Session& session);
Report RunDrtmClient(Session& session);
Report RunHydraDbClient(Session& session);
// memcached and Redis (kv/tcp): the store runs as the server role's child, clients speak TCP.
void CheckTcpStore(Options& options);
Report RunTcpServer(Session& session);
Report RunTcpClient(Session& session);

}  // namespace rdmalab::kv
