// The client role of --system memcached and --system redis: the store's address from the
// server role ("tcp"), one TcpTransport per client for the run's protocol, then the client
// core like every system.
#include <memory>
#include <vector>

#include "kv/core/client_process.h"
#include "kv/core/systems.h"
#include "kv/tcp/tcp.h"
#include "kv/tcp/transport.h"
#include "rdma/rendezvous.h"

namespace rdmalab::kv {

Report RunTcpClient(Session& session) {
  using namespace tcp;
  const Options& o = session.options();
  const nlohmann::json published = session.Get("server/0", "tcp");
  Endpoint endpoint{published.at("store"), published.at("host"), published.at("port")};
  // A store listening on every interface is reached where the server role was.
  if (IsWildcard(endpoint.host)) {
    endpoint.host = !o.server_host.empty() ? o.server_host
                    : !o.rendezvous.empty() ? ParseHostPort(o.rendezvous).first
                                            : "127.0.0.1";
  }
  return WithCodec(o, [&](auto codec) {
    using Transport = TcpTransport<decltype(codec)>;
    std::vector<std::unique_ptr<Transport>> transports;
    for (int j = 0; j < o.clients; ++j) transports.push_back(std::make_unique<Transport>(endpoint, o));
    return RunClientProcess(session, transports);
  });
}

}  // namespace rdmalab::kv
