#include "rdma/session.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include "rdma/affinity.h"
#include "rdma/error.h"
#include "rdma/send_ring.h"

namespace rdmalab {
namespace {

using nlohmann::json;

constexpr const char* kStandaloneToken = "rdmalab-standalone";
constexpr int kStandaloneLeaveMs = 5000;

std::string Describe(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

const char* LinkLayerName(std::uint8_t link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
}

json DeviceJson(const Participant& participant) {
  const auto& device = participant.device();
  const auto& attr = device.attr();
  const auto& port = device.port_attr();
  return {{"name", device.name()},
          {"firmware", device.firmware()},
          {"vendor_id", attr.vendor_id},
          {"vendor_part_id", attr.vendor_part_id},
          {"hw_ver", attr.hw_ver},
          {"node_guid", attr.node_guid},
          {"max_qp", attr.max_qp},
          {"max_qp_wr", attr.max_qp_wr},
          {"max_sge", attr.max_sge},
          {"max_cqe", attr.max_cqe},
          {"max_qp_rd_atom", attr.max_qp_rd_atom},
          {"atomic_cap", static_cast<int>(attr.atomic_cap)},
          {"port", int{device.port()}},
          {"link_layer", LinkLayerName(port.link_layer)},
          {"active_mtu_bytes", MtuBytes(port.active_mtu)},
          {"active_speed", port.active_speed},
          {"active_width", port.active_width},
          {"lid", port.lid},
          {"gid_index", participant.address().gid_index}};
}

}  // namespace

std::atomic<bool> g_abort{false};

Participant::Participant(const ParticipantOptions& options, const JoinSpec& join)
    : timeout_s_(options.timeout_s),
      cpu_list_(options.cpus),
      deadline_ns_(MonotonicNs() + static_cast<std::uint64_t>(options.timeout_s * 1e9)),
      device_(Device::Open(options.ib_dev, static_cast<std::uint8_t>(options.ib_port))),
      pd_(AllocatePd(device_)),
      address_(LocalAddress(device_, options.gid_index)),
      clock_(TscClock::Calibrate()) {
  cpus_ = options.cpus.empty() ? AllowedCpus(CpusOfNode(DeviceNumaNode(device_.name()))) : ParseCpuList(options.cpus);
  if (cpus_.empty()) Fail("no CPU to run on: --cpus '", options.cpus, "' lists none");

  std::string host;
  std::uint16_t port = 0;
  std::string token;
  if (!options.rendezvous.empty()) {
    if (options.role.empty()) Fail("--rendezvous needs --role: server, client or node");
    if (join.node_roles != (options.role == "node")) {
      Fail("role '", options.role, "' does not fit ", join.program,
           join.node_roles ? ": its only role is node" : ": its roles are server and client");
    }
    const char* env_token = std::getenv("RDMALAB_RENDEZVOUS_TOKEN");
    if (env_token == nullptr || *env_token == '\0') {
      Fail("--rendezvous needs the run's token in $RDMALAB_RENDEZVOUS_TOKEN (the harness sets it)");
    }
    token = env_token;
    std::tie(host, port) = ParseHostPort(options.rendezvous);
    role_ = options.role;
    index_ = options.index;
  } else {
    if (join.node_roles) {
      Fail("all-to-all runs need the coordinator: pass --rendezvous HOST:PORT --role node --index I --peers N");
    }
    if (!options.role.empty() && options.role != (options.server_host.empty() ? "server" : "client")) {
      Fail("--role ", options.role, " contradicts the command line: without SERVER_HOST this process is the server");
    }
    role_ = options.server_host.empty() ? "server" : "client";
    index_ = role_ == "server" ? 0 : options.index;
    token = kStandaloneToken;
    port = static_cast<std::uint16_t>(options.port);
    if (role_ == "server") {
      embedded_server_ = std::make_unique<RendezvousServer>("0.0.0.0", port, token);
      host = "127.0.0.1";
    } else {
      host = options.server_host;
    }
  }
  if (role_ == "server" && index_ != 0) Fail("--index ", index_, " for the server: there is one server, index 0");
  rendezvous_.emplace(RendezvousClient::Connect(host, port, token, role_, index_, RemainingMs("the server")));

  // The server (or node 0) publishes the symmetric options; everyone else compares.
  if (is_aggregator()) {
    clients_ = options.peers;
    Put("config", {{"symmetric", join.symmetric}, {"clients", clients_}});
  } else {
    const json theirs = Get(role_ == "node" ? "node/0" : "server/0", "config");
    for (const auto& [key, value] : join.symmetric.items()) {
      const json& other = theirs.at("symmetric").value(key, json());
      if (other != value) {
        Fail("option ", key, " differs between the sides: ", role_ == "node" ? "node 0" : "the server", " has ",
             Describe(other), ", this ", role_, " has ", Describe(value), "; symmetric options must match");
      }
    }
    clients_ = theirs.at("clients").get<int>();
    if (role_ == "client" && options.peers != 1) {
      Fail("--peers ", options.peers, " for a client: a client has exactly one server (1)");
    }
    if (role_ == "node" && options.peers != clients_) {
      Fail("--peers ", options.peers, " differs from node 0's ", clients_, ": every node names the node count");
    }
  }
  if (index_ >= (role_ == "server" ? 1 : clients_)) {
    Fail("--index ", index_, " is out of range for role ", role_, ": valid 0..", clients_ - 1);
  }
}

Participant::~Participant() = default;

std::vector<std::string> Participant::PeerNames() const {
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

int Participant::RemainingMs(const char* waiting_for) const {
  const std::uint64_t now = MonotonicNs();
  if (now >= deadline_ns_) {
    Fail("--timeout ", timeout_s_, " s passed while waiting for ", waiting_for, "; raise --timeout or check the peers");
  }
  return static_cast<int>((deadline_ns_ - now) / 1'000'000);
}

std::uint64_t Participant::DeadlineTicks() const {
  const std::uint64_t now = MonotonicNs();
  const std::uint64_t left = deadline_ns_ > now ? deadline_ns_ - now : 0;
  return clock_.Now() + clock_.NsToTicks(left);
}

void Participant::Put(const std::string& what, const json& value) { rendezvous_->Put(Name() + "/" + what, value); }

json Participant::Get(const std::string& peer, const std::string& what) {
  return rendezvous_->Get(peer + "/" + what, RemainingMs((peer + "'s " + what).c_str()));
}

void Participant::Barrier(const std::string& name) {
  rendezvous_->Barrier(name, participants(), RemainingMs(("barrier " + name).c_str()));
}

void Participant::ReportFailure(const std::string& reason) noexcept {
  if (rendezvous_) rendezvous_->ReportFailure(reason);
}

void Participant::Finish() {
  rendezvous_->Bye();
  if (embedded_server_) embedded_server_->WaitUntilAllLeft(kStandaloneLeaveMs);
}

std::vector<int> Participant::CpusForThread(int thread) const {
  if (cpu_list_.empty()) return cpus_;
  return {cpus_[static_cast<std::size_t>(thread) % cpus_.size()]};
}

void RunPinnedThreads(const Participant& participant, int threads, const std::function<void(int)>& body) {
  std::vector<std::thread> workers;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        PinThisThread(participant.CpusForThread(t));
        body(t);
      } catch (...) {
        g_abort.store(true, std::memory_order_relaxed);
        std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  if (first_error) std::rethrow_exception(first_error);
}

void ServeBetweenBarriers(Participant& session, int threads, std::atomic<bool>& stop, const std::string& suffix,
                          const std::function<void(int)>& serve) {
  stop.store(false);
  std::exception_ptr error;
  std::thread runner([&] {
    try {
      RunPinnedThreads(session, threads, serve);
    } catch (...) {
      error = std::current_exception();
    }
  });
  const auto finish = [&] {
    stop.store(true);
    runner.join();
  };
  try {
    session.Barrier("start" + suffix);
    session.Barrier("done" + suffix);
  } catch (...) {
    finish();
    if (error) std::rethrow_exception(error);
    throw;
  }
  finish();
  if (error) std::rethrow_exception(error);
}

json Region::Describe() const {
  return {{"address", reinterpret_cast<std::uintptr_t>(buffer.data())}, {"rkey", mr->rkey}, {"bytes", buffer.size()}};
}

Region MakeRegion(const Participant& participant, std::size_t bytes, bool hugepages) {
  return MakeRegionOnNode(participant, bytes, hugepages, DeviceNumaNode(participant.device().name()));
}

Region MakeRegionOnNode(const Participant& participant, std::size_t bytes, bool hugepages, int numa_node) {
  Region region;
  region.buffer = Buffer::Allocate(bytes, hugepages, numa_node);
  region.mr = RegisterMemory(participant.pd(), region.buffer.data(), region.buffer.size(), kAllAccess);
  return region;
}

RemoteRegion RemoteRegion::FromJson(const json& json) {
  return {json.at("address").get<std::uint64_t>(), json.at("rkey").get<std::uint32_t>(),
          json.at("bytes").get<std::uint64_t>()};
}

void CompletionFailed(const ibv_wc& completion, const char* while_doing) {

  Fail("work completion error on QP ", completion.qp_num, " while ", while_doing, ": ",
       ibv_wc_status_str(completion.status), " (status ", static_cast<int>(completion.status), ", vendor error ",
       completion.vendor_err, ")",
       completion.status == IBV_WC_RETRY_EXC_ERR ? ": the peer stopped answering (did it exit?)" : "");
}

json EnvironmentJson(const Participant& participant, bool hugepages) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  utsname uts{};
  uname(&uts);
  const bool tsc = std::string(participant.clock().Source()) != "clock_monotonic";
  return {{"host", host},
          {"cpu_model", CpuModel()},
          {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
          {"kernel", std::string(uts.sysname) + " " + uts.release},
          {"device", DeviceJson(participant)},
          {"provider_library", Device::ProviderLibrary()},
          {"clock_source", participant.clock().Source()},
          {"tsc_ghz", tsc ? json(participant.clock().GHz()) : json(nullptr)},
          {"hugepages", hugepages}};
}

}  // namespace rdmalab
