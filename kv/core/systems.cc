#include "kv/core/systems.h"

#include "rdma/error.h"

namespace rdmalab::kv {

const std::vector<System>& Systems() {
  static const std::vector<System> systems = {
      {"herd", "HERD: UC WRITE requests polled by their last byte, UD SEND responses, MICA cache, 2-stage pipeline",
       CheckHerd, RunHerdServer, RunHerdClient},
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
  std::string valid;
  for (const auto& system : Systems()) {
    if (name == system.name) return system;
    valid += (valid.empty() ? "" : ", ") + std::string(system.name);
  }
  Fail("unknown --system '", name, "': valid systems are ", valid);
}

}  // namespace rdmalab::kv
