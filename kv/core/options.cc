#include "kv/core/options.h"

#include <vector>

#include "kv/core/systems.h"
#include "kv/workload/workload.h"
#include "rdma/error.h"
#include "rdma/flags.h"

namespace rdmalab::kv {
namespace {

using Flag = rdmalab::Flag<Options>;
constexpr Reach kClientOnly{false, kClientRole, Scope::kExperiment};

// The flags of the systems (after the participant's, rdma/flags.h).
std::vector<Flag> SystemFlags() {
  return {
      {"system", 0, "NAME", nullptr, kShared, "key-value system (the list above)",
       Text(SystemNames()),
       [](Options& o, const std::string&, const std::string& v) { o.system = FindSystem(v).name; },
       FieldGetter<Options>(&Options::system)},
      {"keys", 0, "N", "keys", kShared, "distinct keys", RDMALAB_INT_FLAG(keys, 1, 1ll << 32)},
      {"put-fraction", 0, "F", nullptr, kShared, "fraction of operations that are PUTs", RDMALAB_NUMBER_FLAG(put_fraction, 0, 1)},
      {"get-fraction", 0, "F", nullptr, kShared, "fraction of operations that are GETs (instead of --put-fraction)",
       RDMALAB_NUMBER_FLAG(get_fraction, 0, 1)},
      {"distribution", 0, "D", nullptr, kShared, "key popularity: uniform | zipf",
       RDMALAB_CHOICE_FLAG(distribution, "uniform", "zipf")},
      {"zipf-theta", 0, "T", nullptr, kShared, "Zipf skew (YCSB: 0.99)", RDMALAB_NUMBER_FLAG(zipf_theta, 0.01, 0.9999)},
      {"key-size", 0, "BYTES", "bytes", kShared, "key bytes (HERD: the 16-byte keyhash; memcached/redis: key text, 16..250)",
       RDMALAB_INT_FLAG(key_size, kMinKeyTextBytes, kMaxKeyTextBytes)},
      {"value-size", 's', "BYTES", "bytes", kShared, "value bytes", RDMALAB_INT_FLAG(value_size, 1, 1000)},
      {"window", 'w', "W", "requests", kShared, "requests in flight per client", RDMALAB_INT_FLAG(window, 1, 256)},
      {"clients", 0, "N", "clients", kShared, "clients per client process (each its own QPs or connections)",
       RDMALAB_INT_FLAG(clients, 1, 1024)},
      {"threads", 0, "N", "threads", kLocal, "client threads per process; the clients are spread over them",
       RDMALAB_INT_FLAG(threads, 1, 256)},
      {"iters", 'n', "N", "ops", kShared, "operations per client (default 100000; excludes -D)",
       RDMALAB_INT_FLAG(iters, 1, 1ll << 50)},
      {"duration", 'D', "SEC", "s", kShared, "measure for SEC seconds instead of -n", RDMALAB_SECONDS_FLAG(duration_s, 0)},
      {"warmup", 0, "SEC", "s", kShared, "warm-up before measuring", RDMALAB_SECONDS_FLAG(warmup_s, 0)},
      {"validate", 0, nullptr, nullptr, kShared, "check every GET's value against what was PUT", RDMALAB_SWITCH_FLAG(validate)},
      {"retry-ms", 0, "MS", "ms", kSharedClientSide, "a request unanswered this long is sent again (same id)",
       RDMALAB_NUMBER_FLAG(retry_ms, 0.01, 1e6)},
      {"dead-after-ms", 0, "MS", "ms", kClientOnly,
       "client: no answer to any request in flight for this long (at least 5 x --retry-ms) means the server died: "
       "the run ends, its results so far written as cut short (0: wait to the end)",
       RDMALAB_NUMBER_FLAG(dead_after_ms, 0, 1e7)},
      {"workers", 0, "NS", "threads", kShared, "server worker threads: HERD's (one key partition each), the READ-based stores' request handlers, memcached -t, "
       "redis io-threads",
       RDMALAB_INT_FLAG(workers, 1, 64)},
      {"core", 0, "K", nullptr, kServerSide, "HERD server: report worker K's load only (herd14 Fig. 14); -1: the total",
       RDMALAB_INT_FLAG(core, -1, 63)},
      {"cq-mod", 'Q', "N", "WRs", kShared, "signal one SEND/WRITE in N", RDMALAB_INT_FLAG(cq_mod, 1, 4096)},
      {"inline_size", 'I', "BYTES", "bytes", kShared, "HERD: responses with values up to BYTES go inline",
       RDMALAB_INT_FLAG(inline_size, 0, 1000)},
      {"batching", 0, nullptr, nullptr, kShared, "HERD: answer a sweep's requests with one doorbell (guide16)",
       RDMALAB_SWITCH_FLAG(batching)},
      {"queues", 'q', "N", "QPs", kShared, "HERD: response UD QPs per worker, used in turn (guide16 multi-queue: 3)",
       RDMALAB_INT_FLAG(queues, 1, 16)},
      {"log-mb", 0, "MB", "MiB", kSharedServerSide, "HERD: cache log per worker", RDMALAB_INT_FLAG(log_mb, 1, 1 << 16)},
      {"index-log2", 0, "N", nullptr, kSharedServerSide, "HERD: log2 of index buckets per worker (0: sized for --keys)",
       RDMALAB_INT_FLAG(index_log2, 0, 30)},
      {"preload", 0, "[=BOOL]", nullptr, kShared, "HERD, FaRM full: load every key before the run, so GETs hit",
       RDMALAB_SWITCH_FLAG(preload)},
      {"store", 0, "S", nullptr, kShared,
       "Pilaf, FaRM: emulated (herd14's -em designs) | full (Pilaf: 3-1 cuckoo table whose buckets and extents the "
       "client checks by CRC64; farm, farm-var: hopscotch table, H = 6, of versioned CRC64-sealed buckets)",
       RDMALAB_CHOICE_FLAG(store, "emulated", "full")},
      {"corrupt", 0, "N", "keys", kServerSide,
       "full stores, server: flip a byte in the value or bucket of N keys after loading (tests checksums)",
       RDMALAB_INT_FLAG(corrupt, 0, 1 << 30)},
      {"farm-load-factor", 0, "F", nullptr, kShared,
       "FaRM full: keys per home bucket of the hopscotch table (H = 6: above 0.2, some of millions of keys find no place)",
       RDMALAB_NUMBER_FLAG(farm_load_factor, 0.05, 4)},
      {"farm-buffer-slots", 0, "N", "slots", kShared, "FaRM: slots of each client's circular PUT buffer (0: 2 x --window)",
       RDMALAB_INT_FLAG(farm_buffer_slots, 0, 1 << 16)},
      {"lock-placement", 0, "P", nullptr, kShared,
       "DrTM: lock words 8 B apart (spread) or 4096 B apart, sharing their 12 low address bits (same-bits)",
       RDMALAB_CHOICE_FLAG(lock_placement, "spread", "same-bits")},
      {"lock-retries", 0, "N", "retries", kSharedClientSide, "DrTM: lock CASes retried before a PUT is refused",
       RDMALAB_INT_FLAG(lock_retries, 0, 1 << 30)},
      {"hydradb-miss-path", 0, nullptr, nullptr, kShared, "HydraDB: a client's first GET of a key asks the server for its address",
       RDMALAB_SWITCH_FLAG(hydradb_miss_path)},
      {"protocol", 0, "P", nullptr, kShared, "memcached: text | binary", RDMALAB_CHOICE_FLAG(protocol, "text", "binary")},
      {"pipeline", 0, nullptr, nullptr, kShared,
       "TCP: the window's requests share one connection (pipelined); off: one connection per window slot",
       RDMALAB_SWITCH_FLAG(pipeline)},
      {"server-bin", 0, "PATH", nullptr, kServerSide, "memcached/redis: the server program (default: from PATH)",
       RDMALAB_STRING_FLAG(server_bin)},
      {"bind", 0, "ADDR", nullptr, kLocal, "memcached/redis: address the server listens on and clients reach",
       RDMALAB_STRING_FLAG(bind)},
      {"tcp-port", 0, "N", nullptr, kLocal, "memcached/redis: server port (0: a free one)",
       RDMALAB_INT_FLAG(tcp_port, 0, 65535)},
  };
}

// ROLE [SERVER_HOST], and the checks that span flags.
void TakePositional(Options& options, const std::vector<std::string>& positional, int argc, char** argv) {
  std::size_t next = 0;
  if (next < positional.size() && (positional[next] == "server" || positional[next] == "client")) {
    if (!options.role.empty() && options.role != positional[next]) {
      Fail("role '", positional[next], "' contradicts --role ", options.role);
    }
    options.role = positional[next++];
  }
  if (options.role.empty()) Fail("no role given: expected 'server' or 'client' as the first argument, or --role");
  if (next < positional.size()) options.server_host = positional[next++];
  if (next < positional.size()) Fail("unexpected argument '", positional[next], "': expected ROLE [SERVER_HOST]");
  if (options.role == "client" && options.server_host.empty() && options.rendezvous.empty()) {
    Fail("a client needs the server's host (last argument) or --rendezvous HOST:PORT");
  }
  if (options.role == "server" && !options.server_host.empty()) {
    Fail("the server takes no SERVER_HOST (got '", options.server_host, "')");
  }
  if (options.get_fraction >= 0) {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];  // "--put-fraction" or "--put_fraction=F"
      if (arg.rfind("--", 0) == 0 && SameFlagName(arg.substr(2, arg.find('=') - 2), "put-fraction")) {
        Fail("--get-fraction and --put-fraction exclude each other; give one");
      }
    }
    options.put_fraction = 1.0 - options.get_fraction;
  }
  if (options.iters == 0 && options.duration_s == 0) options.iters = 100'000;
  if (options.iters != 0 && options.duration_s != 0) Fail("--iters and --duration exclude each other; give one");
  if (options.clients < options.threads) {
    Fail("--threads ", options.threads, " exceeds --clients ", options.clients, ": a thread serves at least one client");
  }
}

}  // namespace

const CommandLine<Options>& KvCommandLine() {
  static const std::vector<std::string> roles = {"server", "client"};
  static const CommandLine<Options> line = {
      "rdmalab-kv",
      "usage: rdmalab-kv server|client --system NAME [flags] [SERVER_HOST]\n"
      "       rdmalab-kv --rendezvous HOST:PORT --role ROLE --index I --peers N --system NAME [flags]\n"
      "       rdmalab-kv --describe   (every system and parameter, as JSON)\n"
      "A standalone server is started without SERVER_HOST; clients name it. Flags accept '-' or '_'.\n"
      "systems:\n" + SystemList() + "\n",
      roles,
      FlagTable<Options>(roles, SystemFlags()),
      TakePositional,
      [](const Options&) { return nlohmann::json::object(); },
      [] {
        Described kv{"kv", "a key-value system (--system) under the clients' workload", {}, {}};
        for (const auto& flag : SystemFlags()) kv.params.push_back(FlagKey(flag.name));
        return std::vector<Described>{kv};
      },
      DescribedSystems,
  };
  return line;
}

}  // namespace rdmalab::kv
