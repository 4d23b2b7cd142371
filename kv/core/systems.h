// The system table: a key-value system is a server and a client over one Session, plus the
// checks it makes of the options before anything is touched. main.cc looks systems up here
// by name, as rdmalab-bench looks up its modes.
#pragma once

#include <string>
#include <vector>

#include "kv/core/options.h"
#include "kv/core/report.h"
#include "kv/core/session.h"

namespace rdmalab::kv {

struct System {
  const char* name;
  const char* summary;
  void (*check)(Options& options);  // fails naming the conflict
  Report (*server)(Session& session);
  Report (*client)(Session& session);
};

const std::vector<System>& Systems();
const System& FindSystem(const std::string& name);

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
