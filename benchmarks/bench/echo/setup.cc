// echo setup and connection: the server's regions, per-thread CQs and per-client QPs; the
// client's QPs; the QP pairs, address handles and the first RECVs.
#include <algorithm>

#include "benchmarks/bench/echo/run.h"
#include "rdma/affinity.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench::echo {

using nlohmann::json;

EchoShape MakeShape(const Options& o) {
  EchoShape shape;
  shape.request_type = ParseQpType(o.connection);
  shape.response_type = ParseQpType(o.response_connection);
  shape.request_write = o.request == "write";
  shape.response_write = o.response == "write";
  shape.shared_qp = shape.request_type == shape.response_type && shape.request_type != IBV_QPT_UD;
  shape.uses_ud = shape.request_type == IBV_QPT_UD || shape.response_type == IBV_QPT_UD;
  shape.window = static_cast<std::uint32_t>(o.tx_depth);
  const std::uint32_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  shape.slot_bytes = SlotBytes(max_size);
  shape.recv_bytes = shape.slot_bytes + kUdGrhBytes;
  shape.inline_bytes = std::min<std::uint32_t>(static_cast<std::uint32_t>(o.inline_size), max_size);
  return shape;
}

void EchoRun::CheckPathMtu() const {
  const std::uint32_t mtu = MtuBytes(session_.address().mtu);
  const std::uint32_t max_size = *std::max_element(o_.sizes.begin(), o_.sizes.end());
  if (shape_.uses_ud && max_size > mtu) {
    Fail("--size ", max_size, " over UD exceeds the path MTU of ", mtu, " B: a UD message is one packet");
  }
}

QpCaps EchoRun::Caps(ibv_qp_type type, std::uint32_t send_depth, std::uint32_t recv_depth) const {
  QpCaps caps;
  caps.type = type;
  caps.send_depth = send_depth;
  caps.recv_depth = std::max<std::uint32_t>(recv_depth, 1);
  caps.inline_bytes = shape_.inline_bytes;
  return caps;
}

void EchoRun::SetupServer() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const auto clients = static_cast<std::uint32_t>(peers.size());
  const std::uint32_t window = shape_.window;
  threads_.resize(static_cast<std::size_t>(o_.threads));
  clients_.resize(clients);
  requests_ = MakeRegion(session_, std::uint64_t{clients} * window * shape_.recv_bytes);
  staging_ = MakeRegion(session_, std::uint64_t{clients} * window * shape_.slot_bytes);
  if (o_.accesses > 0) {
    table_ = Buffer::Allocate(std::size_t(o_.table_mb) << 20, o_.use_hugepages, DeviceNumaNode(device.name()));
    table_words_ = table_.size() / sizeof(std::uint64_t);
  }
  session_.Put("region", requests_.Describe());
  json endpoints = json::object();
  for (std::size_t t = 0; t < threads_.size(); ++t) SetupServerThread(t, endpoints);
  session_.Put("endpoints", endpoints);
  ConnectClients();
}

// A server thread's CQs and QPs: one QP per client of the thread for connected legs (created
// by this thread, HERD's initializer), one UD QP per thread for datagram legs.
void EchoRun::SetupServerThread(std::size_t t, json& endpoints) {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const auto clients = static_cast<std::uint32_t>(peers.size());
  const std::uint32_t window = shape_.window;
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  const std::uint32_t connected_send_depth = window + cq_mod;
  ServerThread& thread = threads_[t];
  thread.rng = o_.seed * 0x9E3779B97F4A7C15ull + t + 1;
  for (std::uint32_t c = static_cast<std::uint32_t>(t); c < clients; c += static_cast<std::uint32_t>(o_.threads)) {
    thread.clients.push_back(c);
  }
  const auto mine = static_cast<std::uint32_t>(std::max<std::size_t>(1, thread.clients.size()));
  const std::uint32_t ud_send_depth =
      std::min<std::uint32_t>(static_cast<std::uint32_t>(device.attr().max_qp_wr), mine * window + cq_mod);
  if (shape_.response_type == IBV_QPT_UD && ud_send_depth < cq_mod + 1) {
    Fail("--cq-mod ", cq_mod, " needs a UD send queue of ", cq_mod + 1, " WRs; ", device.name(), " allows ",
         device.attr().max_qp_wr);
  }
  thread.send_cq = CreateCq(device, static_cast<int>(mine * (connected_send_depth + ud_send_depth)));
  thread.recv_cq = CreateCq(device, static_cast<int>(mine * window + 1));
  if (shape_.response_type == IBV_QPT_UD) {
    thread.ud_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                            Caps(IBV_QPT_UD, ud_send_depth, 1));
    ActivateUdQp(thread.ud_qp.get(), device, 0);
    thread.rings.push_back({thread.ud_qp.get(), 0, ud_send_depth, cq_mod});
  }
  for (std::uint32_t c : thread.clients) {
    ServerClient& client = clients_[c];
    client.thread = static_cast<int>(t);
    const std::string& peer = peers[c];
    client.request_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                                 Caps(shape_.request_type, connected_send_depth, shape_.request_write ? 1 : window));
    if (shape_.request_type == IBV_QPT_UD) {
      ActivateUdQp(client.request_qp.get(), device, 0);
      endpoints["request"][peer] = ToJson(Endpoint{client.request_qp->qp_num, 0, session_.address()});
    }
    if (shape_.response_type != IBV_QPT_UD && !shape_.shared_qp) {
      client.response_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                                    Caps(shape_.response_type, connected_send_depth, 1));
    }
    if (shape_.response_type != IBV_QPT_UD) {
      ibv_qp* qp = shape_.shared_qp ? client.request_qp.get() : client.response_qp.get();
      client.ring = static_cast<std::uint32_t>(thread.rings.size());
      thread.rings.push_back({qp, client.ring, connected_send_depth, cq_mod});
    }
  }
}

// Connects every client's QPs, learns where its responses go, and posts the RECVs of SEND requests.
void EchoRun::ConnectClients() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const std::uint32_t window = shape_.window;
  std::vector<QpLink> links;
  for (std::uint32_t c = 0; c < clients_.size(); ++c) {
    if (shape_.request_type != IBV_QPT_UD) links.push_back({peers[c], kRequestLink, clients_[c].request_qp.get()});
    if (clients_[c].response_qp) links.push_back({peers[c], kResponseLink, clients_[c].response_qp.get()});
  }
  session_.ConnectQps(links, kEchoRdAtomic);
  for (std::uint32_t c = 0; c < clients_.size(); ++c) {
    ServerClient& client = clients_[c];
    const json theirs = session_.Get(peers[c], "endpoints");
    if (shape_.response_type == IBV_QPT_UD) {
      const Endpoint remote = EndpointFromJson(theirs.at("ud"));
      client.ah = CreateAh(session_.pd(), device, session_.address(), remote.address);
      client.remote_ud_qpn = remote.qpn;
    }
    if (shape_.response_write) client.responses = RemoteRegion::FromJson(session_.Get(peers[c], "region"));
    if (!shape_.request_write) {
      for (std::uint32_t b = 0; b < window; ++b) {
        PostServerRecv(c * window + b);
      }
    }
  }
}

void EchoRun::SetupClient() {
  const Device& device = session_.device();
  const std::uint32_t window = shape_.window;
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  const std::uint32_t send_depth = window + cq_mod;
  local_ = MakeRegion(session_, std::uint64_t{window} * (shape_.slot_bytes + shape_.recv_bytes));
  json region = local_.Describe();
  region["address"] = region["address"].get<std::uint64_t>() + std::uint64_t{window} * shape_.slot_bytes;
  session_.Put("region", region);
  client_send_cq_ = CreateCq(device, static_cast<int>(2 * send_depth));
  client_recv_cq_ = CreateCq(device, static_cast<int>(window + 1));
  json endpoints = json::object();
  if (shape_.uses_ud) {
    const bool receives = shape_.response_type == IBV_QPT_UD;
    ud_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                      Caps(IBV_QPT_UD, send_depth, receives ? window : 1));
    ActivateUdQp(ud_qp_.get(), device, 0);
    endpoints["ud"] = ToJson(Endpoint{ud_qp_->qp_num, 0, session_.address()});
  }
  if (shape_.request_type != IBV_QPT_UD) {
    request_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                           Caps(shape_.request_type, send_depth, shape_.shared_qp && !shape_.response_write ? window : 1));
  }
  if (shape_.response_type != IBV_QPT_UD && !shape_.shared_qp) {
    response_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                            Caps(shape_.response_type, 1, window));
  }
  session_.Put("endpoints", endpoints);
  ConnectServer(send_depth);
  if (!shape_.response_write) {
    for (std::uint32_t b = 0; b < window; ++b) {
      PostClientRecv(b);
    }
  }
}

// Connects the client's QPs to the server's and learns where its requests go.
void EchoRun::ConnectServer(std::uint32_t send_depth) {
  const Device& device = session_.device();
  const json theirs = session_.Get("server/0", "endpoints");
  const std::string self = SelfName(session_);
  std::vector<QpLink> links;
  if (request_qp_) links.push_back({"server/0", kRequestLink, request_qp_.get()});
  if (response_qp_) links.push_back({"server/0", kResponseLink, response_qp_.get()});
  session_.ConnectQps(links, kEchoRdAtomic);
  if (shape_.request_type == IBV_QPT_UD) {
    const Endpoint remote = EndpointFromJson(theirs.at("request").at(self));
    server_ah_ = CreateAh(session_.pd(), device, session_.address(), remote.address);
    server_ud_qpn_ = remote.qpn;
  }
  if (shape_.request_write) server_requests_ = RemoteRegion::FromJson(session_.Get("server/0", "region"));
  ibv_qp* request_qp = request_qp_ ? request_qp_.get() : ud_qp_.get();
  request_ring_ = {request_qp, 0, send_depth, static_cast<std::uint32_t>(o_.cq_mod)};
  response_recv_qp_ = shape_.response_type == IBV_QPT_UD ? ud_qp_.get()
                      : shape_.shared_qp                 ? request_qp_.get()
                                                         : response_qp_.get();
}

}  // namespace rdmalab::bench::echo
