#include "kv/core/systems.h"

#include "rdma/error.h"

namespace rdmalab::kv {

// Each system's entry points, defined in its own folder: the table below is their one caller.
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

const std::vector<System>& Systems() {
  static const std::vector<System> systems = {
      {"herd", "HERD",
       "HERD: UC WRITE requests polled by their last byte, UD SEND responses, MICA cache, 2-stage pipeline",
       {"workers", "core", "cq_mod", "inline_size", "batching", "queues", "log_mb", "index_log2", "preload"},
       CheckHerd, RunHerdServer, RunHerdClient},
      {"pilaf", "Pilaf-em-OPT",
       "Pilaf-em-OPT: GET = 1.6 bucket READs one after the other, then the value READ (RC); PUT = UC "
       "SEND, answered by a UC SEND",
       {"workers", "cq_mod", "store", "corrupt"},
       CheckRemoteSystem, RunRemoteServer, RunPilafClient, RemoteDesign::kPilaf},
      {"farm", "FaRM-em",
       "FaRM-em: GET = one READ of the 6-entry neighbourhood of keys and values; PUT = UC WRITE into the "
       "client's circular buffer, answered by a UC WRITE",
       {"workers", "cq_mod", "preload", "store", "corrupt", "farm_load_factor", "farm_buffer_slots"},
       CheckRemoteSystem, RunRemoteServer, RunFarmClient, RemoteDesign::kFarm},
      {"farm-var", "FaRM-em-VAR",
       "FaRM-em-VAR: GET = READ of the 6 keys and pointers, then READ of the value; PUT as FaRM-em",
       {"workers", "cq_mod", "preload", "store", "corrupt", "farm_load_factor", "farm_buffer_slots"},
       CheckRemoteSystem, RunRemoteServer, RunFarmClient, RemoteDesign::kFarmVar},
      {"drtm", "DrTM-KV-em", "DrTM-KV-em: GET = one READ; PUT = lock CAS and unlock CAS (guide16's emulation)",
       {"workers", "cq_mod", "lock_placement", "lock_retries"},
       CheckRemoteSystem, RunRemoteServer, RunDrtmClient, RemoteDesign::kDrtm},
      {"drtm-write", "DrTM-KV-em (WRITE)", "DrTM-KV-em, labelled variant: PUT = lock CAS, value WRITE, unlock CAS",
       {"workers", "cq_mod", "lock_placement", "lock_retries"},
       CheckRemoteSystem, RunRemoteServer, RunDrtmClient, RemoteDesign::kDrtmWrite},
      {"hydradb", "HydraDB-em",
       "HydraDB-em: GET = READ of value and lease (RC); PUT = RC WRITE request, RC WRITE answer, inline",
       {"workers", "cq_mod", "hydradb_miss_path"},
       CheckRemoteSystem, RunRemoteServer, RunHydraDbClient, RemoteDesign::kHydraDb},
      {"memcached", "memcached",
       "memcached from the distribution over TCP, text or binary protocol (--protocol), one connection per window "
       "slot or --pipeline",
       {"preload", "protocol", "pipeline", "workers", "server_bin", "bind", "tcp_port"},
       CheckTcpStore, RunTcpServer, RunTcpClient},
      {"redis", "Redis",
       "redis-server from the distribution over TCP (RESP), no persistence, one connection per window "
       "slot or --pipeline",
       {"preload", "pipeline", "workers", "server_bin", "bind", "tcp_port"},
       CheckTcpStore, RunTcpServer, RunTcpClient},
  };
  return systems;
}

const std::vector<std::string>& EverySystemParams() {
  static const std::vector<std::string> params = {
      "system",     "keys",   "put_fraction", "get_fraction", "distribution", "zipf_theta", "key_size", "value_size",
      "window",     "clients", "threads",     "iters",        "duration",     "warmup",     "validate", "retry_ms",
      "dead_after_ms"};
  return params;
}

const System& FindSystem(const std::string& name) {
  for (const auto& system : Systems()) {
    if (name == system.name) return system;
  }
  std::string valid;
  for (const auto& system : SystemNames()) valid += (valid.empty() ? "" : ", ") + system;
  Fail("unknown --system '", name, "': valid systems are ", valid);
}

std::vector<std::string> SystemNames() {
  std::vector<std::string> names;
  for (const auto& system : Systems()) names.push_back(system.name);
  return names;
}

std::string SystemList() {
  std::string list;
  for (const auto& system : Systems()) list += std::string("  ") + system.name + ": " + system.summary + "\n";
  return list;
}

std::vector<Described> DescribedSystems() {
  std::vector<Described> described = DescribedList(Systems());
  for (auto& system : described) system.params.insert(system.params.begin(), EverySystemParams().begin(),
                                                      EverySystemParams().end());
  return described;
}

}  // namespace rdmalab::kv
