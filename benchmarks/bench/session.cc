#include "benchmarks/bench/session.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

std::string NameOf(const Participant& participant) {
  return participant.role() + "/" + std::to_string(participant.index());
}

int IndexOf(const std::string& name) { return std::stoi(name.substr(name.find('/') + 1)); }

// Where requesters under the coordinator reach this process's listener: the IPv4 address
// of an IPv4-mapped GID (RoCE, softnic's fabrics), else the host name.
std::string ListenerHost(const PortAddress& address) {
  static constexpr std::uint8_t kIpv4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (address.gid_index >= 0 && std::equal(std::begin(kIpv4MappedPrefix), std::end(kIpv4MappedPrefix),
                                           address.gid.begin())) {
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, address.gid.data() + 12, text, sizeof(text));
    return text;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) FailErrno("gethostname", errno);
  return host;
}

}  // namespace

void Session::ConnectQps(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic) {
  if (options().rdma_cm) {
    ConnectThroughRdmaCm(links, max_rd_atomic);
  } else {
    ConnectThroughRendezvous(links, max_rd_atomic);
  }
}

bool Session::ListensTo(const std::string& peer) const {
  if (role() != "node") return is_server();
  return index() < IndexOf(peer);
}

void Session::ConnectThroughRendezvous(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic) {
  json mine = json::object();
  for (const QpLink& l : links) mine[l.peer][std::to_string(l.link)] = ToJson(Endpoint{l.qp->qp_num, l.link, address()});
  Put("qp links", mine);
  std::map<std::string, json> theirs;
  const std::string self = NameOf(*this);
  for (const QpLink& l : links) {
    if (!theirs.contains(l.peer)) theirs[l.peer] = Get(l.peer, "qp links").at(self);
    const Endpoint remote = EndpointFromJson(theirs[l.peer].at(std::to_string(l.link)));
    ConnectQp(l.qp, device(), address(), remote, l.link, max_rd_atomic);
  }
}

void Session::ConnectThroughRdmaCm(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic) {
  const std::string self = NameOf(*this);
  std::map<std::pair<std::string, std::uint32_t>, ibv_qp*> accepted_links;
  std::vector<const QpLink*> requested_links;
  for (const QpLink& l : links) {
    if (ListensTo(l.peer)) {
      accepted_links[{l.peer, l.link}] = l.qp;
    } else {
      requested_links.push_back(&l);
    }
  }
  // Nodes listen on a port each (several may share a host); a server on --port.
  const int port = options().port + (role() == "node" ? index() : 0);
  if (port > 65535) Fail("-p/--port ", options().port, " + node index ", index(), " exceeds 65535 (rdma_cm's port)");
  if (!accepted_links.empty()) {
    cm_listener_ = std::make_unique<CmListener>(static_cast<std::uint16_t>(port));
    Put("rdma_cm", {{"host", ListenerHost(address())}, {"port", port}});
  }
  // Requests go to lower-index nodes (or the server) only, which accept below: no cycle.
  std::sort(requested_links.begin(), requested_links.end(),
            [](const QpLink* a, const QpLink* b) { return IndexOf(a->peer) < IndexOf(b->peer); });
  for (const QpLink* l : requested_links) {
    const json listener = Get(l->peer, "rdma_cm");
    const std::string host = options().server_host.empty() ? listener.at("host").get<std::string>()
                                                          : options().server_host;
    auto& connection = cm_connections_.emplace_back(std::make_unique<CmConnection>());
    const Endpoint remote = connection->Connect(host, listener.at("port").get<std::uint16_t>(), {self, l->link},
                                                Endpoint{l->qp->qp_num, l->link, address()}, deadline_ns());
    ConnectQp(l->qp, device(), address(), remote, l->link, max_rd_atomic);
    connection->Establish();
  }
  if (accepted_links.empty()) return;
  cm_listener_->AcceptAll(
      accepted_links.size(),
      [&](const CmLink& link, const Endpoint& remote) {
        const auto found = accepted_links.find({link.requester, link.link});
        if (found == accepted_links.end() || found->second == nullptr) {
          Fail("rdma_cm: a request from ", link.requester, " for QP link ", link.link,
               ", which this participant does not have or already connected");
        }
        ConnectQp(found->second, device(), address(), remote, link.link, max_rd_atomic);
        const Endpoint local{found->second->qp_num, link.link, address()};
        found->second = nullptr;
        return local;
      },
      deadline_ns());
}

}  // namespace rdmalab::bench
