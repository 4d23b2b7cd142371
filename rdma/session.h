// One process's part in a run of any rdmalab program (rdmalab-bench, rdmalab-kv): its
// device, its place among the participants (role, index, peers), the rendezvous connection
// and the run's deadline. Standalone runs embed the rendezvous server in the server
// process, so both kinds of run share this code path.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rdma/buffer.h"
#include "rdma/clock.h"
#include "rdma/connect.h"
#include "rdma/flags.h"
#include "rdma/rendezvous.h"
#include "rdma/verbs.h"

namespace rdmalab {

// What a program tells the participant beyond its options (rdma/flags.h ParticipantOptions).
struct JoinSpec {
  std::string program;      // e.g. "rdmalab-bench tput", for error messages
  bool node_roles = false;  // the program's only role is "node" (all-to-all)
  nlohmann::json symmetric = nlohmann::json::object();  // options every participant must agree on
};

class Participant {
 public:
  // Opens the device, joins the run and checks that every participant was given the same
  // symmetric options.
  Participant(const ParticipantOptions& options, const JoinSpec& join);
  ~Participant();

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
  // The deadline as a TSC value, so that hot loops compare without a clock call.
  std::uint64_t DeadlineTicks() const;

  void Put(const std::string& what, const nlohmann::json& value);
  nlohmann::json Get(const std::string& peer, const std::string& what);
  void Barrier(const std::string& name);
  void ReportFailure(const std::string& reason) noexcept;
  // Says bye and, on a standalone server, waits for the clients to leave.
  void Finish();
  // A standalone client's watch on its server while the run needs no rendezvous (the server
  // embeds the rendezvous server, so its end ends the connection): waits up to `wait_ms`,
  // true once the connection was closed. Never while Put, Get or Barrier may run.
  bool RendezvousClosed(int wait_ms) const { return !rendezvous_ || rendezvous_->ClosedByServer(wait_ms); }

  // Where thread t may run: with --cpus, one CPU of the list (round robin); otherwise every
  // CPU of the device's NUMA node, so that processes sharing a host are not stacked on one CPU.
  std::vector<int> CpusForThread(int thread) const;

 private:
  std::string Name() const { return role_ + "/" + std::to_string(index_); }
  double timeout_s_;
  std::string cpu_list_;
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

// Runs body(t) for t in [0, threads), each thread placed per Participant::CpusForThread; the
// first exception of any thread is rethrown here after all have joined, and raises g_abort
// so that the other threads' loops stop early.
void RunPinnedThreads(const Participant& participant, int threads, const std::function<void(int)>& body);
extern std::atomic<bool> g_abort;

// Server side of one measured interval: `serve(t)` runs on `threads` pinned threads while
// this process passes the barriers "start<suffix>" and "done<suffix>"; then `stop` is raised
// and the threads are joined. A serving thread's failure is rethrown in preference to the
// barrier timeout it caused.
void ServeBetweenBarriers(Participant& participant, int threads, std::atomic<bool>& stop, const std::string& suffix,
                          const std::function<void(int)>& serve);

// Registered memory and how peers address it.
constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
struct Region {
  Buffer buffer;
  MrPtr mr;
  std::uint8_t* data() const { return buffer.data(); }
  nlohmann::json Describe() const;
};
Region MakeRegion(const Participant& participant, std::size_t bytes, bool hugepages);
// The same on NUMA node `numa_node` (-1: no binding) instead of the device's.
Region MakeRegionOnNode(const Participant& participant, std::size_t bytes, bool hugepages, int numa_node);

struct RemoteRegion {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint64_t bytes = 0;
  static RemoteRegion FromJson(const nlohmann::json& json);
};

// The "environment" block every rdmalab document carries: host, CPU, kernel, device
// attributes and firmware, provider library, clock source.
nlohmann::json EnvironmentJson(const Participant& participant, bool hugepages);

}  // namespace rdmalab
