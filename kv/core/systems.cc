#include "kv/core/systems.h"

#include <algorithm>

#include "rdma/error.h"

namespace rdmalab::kv {

const std::vector<System>& Systems() {
  static const std::vector<System> systems = {
      {"herd", "HERD: UC WRITE requests polled by their last byte, UD SEND responses, MICA cache, 2-stage pipeline",
       CheckHerd, RunHerdServer, RunHerdClient},
      {"pilaf", "Pilaf-em-OPT: GET = 1.6 bucket READs one after the other, then the value READ (RC); PUT = UC "
                "SEND, answered by a UC SEND",
       CheckRemoteSystem, RunRemoteServer, RunPilafClient},
      {"farm", "FaRM-em: GET = one READ of the 6-entry neighbourhood of keys and values; PUT = UC WRITE into the "
               "client's circular buffer, answered by a UC WRITE",
       CheckRemoteSystem, RunRemoteServer, RunFarmClient},
      {"farm-var", "FaRM-em-VAR: GET = READ of the 6 keys and pointers, then READ of the value; PUT as FaRM-em",
       CheckRemoteSystem, RunRemoteServer, RunFarmClient},
      {"drtm", "DrTM-KV-em: GET = one READ; PUT = lock CAS and unlock CAS (guide16's emulation)", CheckRemoteSystem,
       RunRemoteServer, RunDrtmClient},
      {"drtm-write", "DrTM-KV-em, labelled variant: PUT = lock CAS, value WRITE, unlock CAS", CheckRemoteSystem,
       RunRemoteServer, RunDrtmClient},
      {"hydradb", "HydraDB-em: GET = READ of value and lease (RC); PUT = RC WRITE request, RC WRITE answer, inline",
       CheckRemoteSystem, RunRemoteServer, RunHydraDbClient},
      {"memcached", "memcached from the distribution over TCP, text or binary protocol (--protocol), one "
                    "connection per window slot or --pipeline",
       CheckTcpStore, RunTcpServer, RunTcpClient},
      {"redis", "redis-server from the distribution over TCP (RESP), no persistence, one connection per window "
                "slot or --pipeline",
       CheckTcpStore, RunTcpServer, RunTcpClient},
  };
  return systems;
}

const System& FindSystem(const std::string& name) {
  // Experiment files name systems as the model does (farm_var, drtm_write).
  std::string spelled = name;
  std::replace(spelled.begin(), spelled.end(), '_', '-');
  std::string valid;
  for (const auto& system : Systems()) {
    if (spelled == system.name) return system;
    valid += (valid.empty() ? "" : ", ") + std::string(system.name);
  }
  Fail("unknown --system '", name, "': valid systems are ", valid);
}

}  // namespace rdmalab::kv
