#include "benchmarks/bench/session.h"

#include <cstdlib>

#include "rdma/affinity.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr const char* kStandaloneToken = "rdmalab-standalone";
constexpr int kStandaloneLeaveMs = 5000;

std::string Describe(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

}  // namespace

Session::Session(Options options, bool node_roles)
    : options_(std::move(options)),
      deadline_ns_(MonotonicNs() + static_cast<std::uint64_t>(options_.timeout_s * 1e9)),
      device_(Device::Open(options_.ib_dev, static_cast<std::uint8_t>(options_.ib_port))),
      pd_(AllocatePd(device_)),
      address_(LocalAddress(device_, options_.gid_index)),
      clock_(TscClock::Calibrate()) {
  cpus_ = options_.cpus.empty() ? AllowedCpus(CpusOfNode(DeviceNumaNode(device_.name())))
                                : ParseCpuList(options_.cpus);
  if (cpus_.empty()) Fail("no CPU to run on: --cpus '", options_.cpus, "' lists none");

  std::string host;
  std::uint16_t port = 0;
  std::string token;
  if (!options_.rendezvous.empty()) {
    if (options_.role.empty()) Fail("--rendezvous needs --role: server, client or node");
    if (node_roles != (options_.role == "node")) {
      Fail("role '", options_.role, "' does not fit mode ", options_.mode,
           node_roles ? " with --direction alltoall: its only role is node" : ": its roles are server and client");
    }
    const char* env_token = std::getenv("RDMALAB_RENDEZVOUS_TOKEN");
    if (env_token == nullptr || *env_token == '\0') {
      Fail("--rendezvous needs the run's token in $RDMALAB_RENDEZVOUS_TOKEN (the harness sets it)");
    }
    token = env_token;
    std::tie(host, port) = ParseHostPort(options_.rendezvous);
    role_ = options_.role;
    index_ = options_.index;
  } else {
    if (node_roles) Fail("all-to-all runs need the coordinator: pass --rendezvous HOST:PORT --role node --index I --peers N");
    if (!options_.role.empty() && options_.role != (options_.server_host.empty() ? "server" : "client")) {
      Fail("--role ", options_.role, " contradicts the command line: without SERVER_HOST this process is the server");
    }
    role_ = options_.server_host.empty() ? "server" : "client";
    index_ = role_ == "server" ? 0 : options_.index;
    token = kStandaloneToken;
    port = static_cast<std::uint16_t>(options_.port);
    if (role_ == "server") {
      embedded_server_ = std::make_unique<RendezvousServer>("0.0.0.0", port, token);
      host = "127.0.0.1";
    } else {
      host = options_.server_host;
    }
  }
  if (role_ == "server" && index_ != 0) Fail("--index ", index_, " for the server: there is one server, index 0");
  rendezvous_.emplace(RendezvousClient::Connect(host, port, token, role_, index_, RemainingMs("the server")));

  // The server (or node 0) publishes the symmetric options; everyone else compares.
  const json mine = SymmetricConfigJson(options_);
  if (is_aggregator()) {
    clients_ = options_.peers;
    Put("config", {{"symmetric", mine}, {"clients", clients_}});
  } else {
    const json theirs = Get(role_ == "node" ? "node/0" : "server/0", "config");
    for (const auto& [key, value] : mine.items()) {
      const json& other = theirs.at("symmetric").value(key, json());
      if (other != value) {
        Fail("option ", key, " differs between the sides: ", role_ == "node" ? "node 0" : "the server", " has ",
             Describe(other), ", this ", role_, " has ", Describe(value), "; symmetric options must match");
      }
    }
    clients_ = theirs.at("clients").get<int>();
    if (role_ == "client" && options_.peers != 1) {
      Fail("--peers ", options_.peers, " for a client: a client has exactly one server (1)");
    }
    if (role_ == "node" && options_.peers != clients_) {
      Fail("--peers ", options_.peers, " differs from node 0's ", clients_, ": every node names the node count");
    }
  }
  if (index_ >= (role_ == "server" ? 1 : clients_)) {
    Fail("--index ", index_, " is out of range for role ", role_, ": valid 0..", clients_ - 1);
  }
}

Session::~Session() = default;

std::vector<std::string> Session::PeerNames() const {
  std::vector<std::string> names;
  if (role_ == "client") {
    names.push_back("server/0");
  } else {
    const std::string peer_role = role_ == "server" ? "client" : "node";
    for (int i = 0; i < clients_; ++i) {
      if (role_ == "node" && i == index_) continue;
      names.push_back(peer_role + "/" + std::to_string(i));
    }
  }
  return names;
}

int Session::RemainingMs(const char* waiting_for) const {
  const std::uint64_t now = MonotonicNs();
  if (now >= deadline_ns_) {
    Fail("--timeout ", options_.timeout_s, " s passed while waiting for ", waiting_for,
         "; raise --timeout or check the peers");
  }
  return static_cast<int>((deadline_ns_ - now) / 1'000'000);
}

void Session::Put(const std::string& what, const json& value) { rendezvous_->Put(Name() + "/" + what, value); }

json Session::Get(const std::string& peer, const std::string& what) {
  return rendezvous_->Get(peer + "/" + what, RemainingMs((peer + "'s " + what).c_str()));
}

void Session::Barrier(const std::string& name) {
  rendezvous_->Barrier(name, participants(), RemainingMs(("barrier " + name).c_str()));
}

void Session::ReportFailure(const std::string& reason) noexcept {
  if (rendezvous_) rendezvous_->ReportFailure(reason);
}

void Session::Finish() {
  rendezvous_->Bye();
  if (embedded_server_) embedded_server_->WaitUntilAllLeft(kStandaloneLeaveMs);
}

std::vector<int> Session::CpusForThread(int thread) const {
  if (options_.cpus.empty()) return cpus_;
  return {cpus_[static_cast<std::size_t>(thread) % cpus_.size()]};
}

}  // namespace rdmalab::bench
