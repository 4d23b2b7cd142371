// One process's part in a run: its device, its place among the participants (role, index,
// peers), the rendezvous connection and the run's deadline. Standalone runs embed the
// rendezvous server in the server process, so both kinds of run share this code path.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench/options.h"
#include "rdma/clock.h"
#include "rdma/connect.h"
#include "rdma/rendezvous.h"
#include "rdma/verbs.h"

namespace rdmalab::bench {

class Session {
 public:
  // Opens the device, joins the run and checks that every participant was given the same
  // symmetric options. `node_roles`: the mode has only peers of one role ("node").
  Session(Options options, bool node_roles);
  ~Session();

  const Options& options() const { return options_; }
  const Device& device() const { return device_; }
  ibv_pd* pd() const { return pd_.get(); }
  const PortAddress& address() const { return address_; }
  const TscClock& clock() const { return clock_; }
  const std::string& role() const { return role_; }
  int index() const { return index_; }
  bool is_server() const { return role_ == "server"; }
  // The process that reports the aggregate: the server, or node 0.
  bool is_aggregator() const { return role_ == "server" || (role_ == "node" && index_ == 0); }
  int clients() const { return clients_; }
  int participants() const { return role_ == "node" ? clients_ : clients_ + 1; }
  // Participants this process exchanges data with, as "role/index" names.
  std::vector<std::string> PeerNames() const;

  // Milliseconds left before the run's deadline; fails once it has passed.
  int RemainingMs(const char* waiting_for) const;
  std::uint64_t deadline_ns() const { return deadline_ns_; }

  void Put(const std::string& what, const nlohmann::json& value);
  nlohmann::json Get(const std::string& peer, const std::string& what);
  void Barrier(const std::string& name);
  void ReportFailure(const std::string& reason) noexcept;
  // Says bye and, on a standalone server, waits for the clients to leave.
  void Finish();

  // Where thread t may run: with --cpus, one CPU of the list (round robin); otherwise every
  // CPU of the device's NUMA node, so that processes sharing a host are not stacked on one CPU.
  std::vector<int> CpusForThread(int thread) const;

 private:
  std::string Name() const { return role_ + "/" + std::to_string(index_); }
  Options options_;
  std::uint64_t deadline_ns_;
  Device device_;
  PdPtr pd_;
  PortAddress address_;
  TscClock clock_;
  std::string role_;
  int index_ = 0;
  int clients_ = 1;
  std::vector<int> cpus_;
  std::unique_ptr<RendezvousServer> embedded_server_;
  std::optional<RendezvousClient> rendezvous_;
};

}  // namespace rdmalab::bench
