// The server role of --system memcached and --system redis: start the real store as a
// child (server_process.h), preload every key over one pipelined connection, tell the
// clients where it listens ("tcp"), stand by between the run's barriers watching the
// child, then report the clients' results and the store's own counters over the run.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "kv/core/client_process.h"
#include "kv/core/systems.h"
#include "kv/tcp/server_process.h"
#include "kv/tcp/tcp.h"
#include "kv/workload/workload.h"
#include "rdma/error.h"

namespace rdmalab::kv {
namespace tcp {
namespace {

using nlohmann::json;

constexpr int kStartTimeoutMs = 10'000;
constexpr int kIoTimeoutMs = 10'000;
constexpr int kWatchIntervalMs = 20;
// Connections beyond the clients': the preload's, the statistics', the readiness probes'.
constexpr int kSpareConnections = 32;
// memcached's minimum useful -m, and its per-item cost beyond key and value (item header,
// CAS, suffix) doubled for slab-class rounding and partly filled pages.
constexpr std::uint64_t kMemcachedBaseMb = 64;
constexpr std::uint64_t kMemcachedItemOverheadBytes = 64;
constexpr std::uint64_t kMemcachedSlackFactor = 2;
// Preload requests per round trip; their replies (at most 24 bytes each) fit in socket
// buffers, so sending a whole batch before reading cannot deadlock.
constexpr std::uint64_t kPreloadBatch = 1024;

struct StoreKind {
  const char* program;                // on PATH
  std::vector<const char*> counters;  // reported as their change over the run
  std::vector<const char*> gauges;    // reported as they are at the end
};

const StoreKind& KindOf(const Options& o) {
  static const StoreKind memcached{
      "memcached",
      {"cmd_get", "cmd_set", "get_hits", "get_misses", "evictions", "total_connections", "bytes_read", "bytes_written"},
      {"version", "threads", "curr_items", "curr_connections", "limit_maxbytes"}};
  static const StoreKind redis{"redis-server",
                               {"total_commands_processed", "keyspace_hits", "keyspace_misses", "evicted_keys",
                                "total_connections_received", "total_net_input_bytes", "total_net_output_bytes"},
                               {"redis_version", "io_threads_active", "connected_clients", "used_memory", "db0"}};
  return o.system == "redis" ? redis : memcached;
}

int Connections(const Session& session) {
  const Options& o = session.options();
  return session.clients() * o.clients * (o.pipeline ? 1 : o.window) + kSpareConnections;
}

std::vector<std::string> Arguments(const Session& session, int port) {
  const Options& o = session.options();
  const std::string threads = std::to_string(o.workers);
  if (o.system == "redis") {
    std::vector<std::string> args = {"--bind", o.bind, "--port", std::to_string(port), "--save", "", "--appendonly",
                                     "no", "--daemonize", "no", "--loglevel", "warning", "--maxclients",
                                     std::to_string(Connections(session))};
    // Reads too, not only replies, so that N threads share the socket work of N clients.
    if (o.workers > 1) args.insert(args.end(), {"--io-threads", threads, "--io-threads-do-reads", "yes"});
    return args;
  }
  const std::uint64_t item_bytes = std::uint64_t(o.key_size) + o.value_size + kMemcachedItemOverheadBytes;
  const std::uint64_t megabytes = kMemcachedBaseMb + (o.keys * item_bytes * kMemcachedSlackFactor >> 20);
  std::vector<std::string> args = {"-l", o.bind, "-p", std::to_string(port), "-U", "0", "-t", threads,
                                   "-m", std::to_string(megabytes), "-c", std::to_string(Connections(session))};
  if (geteuid() == 0) args.insert(args.end(), {"-u", "root"});  // memcached refuses root without it
  return args;
}

// The CPUs of the server's threads (--cpus), for the whole child.
std::vector<int> ChildCpus(const Session& session) {
  std::set<int> cpus;
  for (int t = 0; t < session.options().workers; ++t) {
    for (int cpu : session.CpusForThread(t)) cpus.insert(cpu);
  }
  return {cpus.begin(), cpus.end()};
}

template <typename Codec>
void Preload(const Endpoint& endpoint, const Options& o) {
  const auto key_bytes = static_cast<std::uint32_t>(o.key_size);
  const auto value_bytes = static_cast<std::uint32_t>(o.value_size);
  FileDescriptor fd = Connect(endpoint);
  std::vector<std::uint8_t> value(value_bytes), requests(kPreloadBatch * Codec::RequestBytes(key_bytes, value_bytes));
  std::vector<std::uint8_t> replies(kPreloadBatch * Codec::ReplyBytes(key_bytes, 0));
  for (std::uint64_t first = 0; first < o.keys; first += kPreloadBatch) {
    const std::uint64_t count = std::min(kPreloadBatch, o.keys - first);
    std::size_t bytes = 0;
    for (std::uint64_t k = first; k < first + count; ++k) {
      FillValue(k, kPreloadWriter, kPreloadVersion, value.data(), value_bytes);
      bytes += Codec::EncodeSet(requests.data() + bytes, k, key_bytes, value.data(), value_bytes);
    }
    SendAll(fd.get(), requests.data(), bytes, endpoint, kIoTimeoutMs);
    std::size_t head = 0, tail = 0;
    for (std::uint64_t k = first; k < first + count;) {
      const Reply reply = Codec::Parse(replies.data() + head, tail - head, false);
      if (reply.status == ReplyStatus::kIncomplete) {
        std::copy(replies.begin() + static_cast<std::ptrdiff_t>(head), replies.begin() + static_cast<std::ptrdiff_t>(tail),
                  replies.begin());
        tail -= head;
        head = 0;
        tail = ReceiveSome(fd.get(), replies.data(), tail, replies.size(), endpoint, kIoTimeoutMs);
        continue;
      }
      if (reply.status != ReplyStatus::kStored) {
        Fail(endpoint.Describe(), " answered the preload's SET of key '", KeyText(k, key_bytes), "' with ",
             Codec::Describe(replies.data() + head, tail - head), " (", Codec::kName, ")");
      }
      head += reply.bytes;
      ++k;
    }
  }
}

json Statistics(const Options& o, const Endpoint& endpoint) {
  return o.system == "redis" ? RedisInfo(endpoint, "default", kIoTimeoutMs) : MemcachedStats(endpoint, kIoTimeoutMs);
}

json ServerJson(const Options& o, const ChildServer& child, const Endpoint& endpoint, const json& before,
                const json& after) {
  const StoreKind& kind = KindOf(o);
  json during = json::object(), at_end = json::object();
  for (const char* name : kind.counters) {
    if (after.contains(name) && before.contains(name) && after[name].is_number() && before[name].is_number()) {
      during[name] = after[name].get<std::uint64_t>() - before[name].get<std::uint64_t>();
    }
  }
  for (const char* name : kind.gauges) {
    if (after.contains(name)) at_end[name] = after[name];
  }
  return {{"store", o.system},
          {"command", child.CommandLine()},
          {"address", endpoint.host + ":" + std::to_string(endpoint.port)},
          {"threads", o.workers},
          {"preloaded_keys", o.preload ? o.keys : 0},
          {"counters_during_run", during},
          {"at_end", at_end}};
}

}  // namespace
}  // namespace tcp

void CheckTcpStore(Options& o) {
  if (o.system == "redis" && o.protocol != "text") {
    Fail("--protocol ", o.protocol, " is memcached's; Redis speaks RESP only (leave --protocol out)");
  }
  // Resolved before the run is joined, so that a missing program fails at once rather than
  // after the clients came, and the report's config names the program that ran.
  if (o.role == "server") o.server_bin = tcp::FindProgram(o.server_bin, tcp::KindOf(o).program);
}

Report RunTcpServer(Session& session) {
  using namespace tcp;
  const Options& o = session.options();
  const Endpoint endpoint{o.system, o.bind, o.tcp_port != 0 ? o.tcp_port : FreeTcpPort(o.bind)};
  ChildServer child(o.server_bin, Arguments(session, endpoint.port), ChildCpus(session));
  child.WaitUntilAccepting(endpoint, std::min(kStartTimeoutMs, session.RemainingMs("the TCP store to start")));
  if (o.preload) WithCodec(o, [&](auto codec) { Preload<decltype(codec)>(endpoint, o); });
  const json before = Statistics(o, endpoint);
  session.Put("tcp", {{"store", o.system}, {"host", endpoint.host}, {"port", endpoint.port}});
  session.Barrier("ready");
  std::atomic<bool> stop{false};
  ServeBetweenBarriers(session, 1, stop, "", [&](int) {
    while (!stop.load(std::memory_order_relaxed)) {
      child.CheckRunning("during the run");
      std::this_thread::sleep_for(std::chrono::milliseconds(kWatchIntervalMs));
    }
  });
  Report report = CollectClientResults(session);
  report.server = ServerJson(o, child, endpoint, before, Statistics(o, endpoint));
  return report;
}

}  // namespace rdmalab::kv
