#include "kv/core/options.h"

#include <vector>

#include "kv/core/systems.h"
#include "kv/workload/workload.h"
#include "rdma/error.h"
#include "rdma/flags.h"

namespace rdmalab::kv {
namespace {

using nlohmann::json;
using Flag = rdmalab::Flag<Options>;

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = FlagTable<Options>({
      {"system", 0, "NAME", true, "key-value system (see --help's list)", RDMALAB_STRING_FLAG(system)},
      {"role", 0, "ROLE", false, "server | client (coordinator runs; standalone: the first argument)",
       RDMALAB_CHOICE_FLAG(role, "server", "client")},
      {"index", 0, "I", false, "0-based index of a client process", RDMALAB_INT_FLAG(index, 0, 1 << 20)},
      {"peers", 0, "N", false, "server: client processes; client: 1", RDMALAB_INT_FLAG(peers, 1, 4096)},
      {"keys", 0, "N", true, "distinct keys", RDMALAB_INT_FLAG(keys, 1, 1ll << 32)},
      {"put-fraction", 0, "F", true, "fraction of operations that are PUTs", RDMALAB_NUMBER_FLAG(put_fraction, 0, 1)},
      {"get-fraction", 0, "F", true, "fraction of operations that are GETs (instead of --put-fraction)",
       RDMALAB_NUMBER_FLAG(get_fraction, 0, 1)},
      {"distribution", 0, "D", true, "key popularity: uniform | zipf",
       RDMALAB_CHOICE_FLAG(distribution, "uniform", "zipf")},
      {"zipf-theta", 0, "T", true, "Zipf skew (YCSB: 0.99)", RDMALAB_NUMBER_FLAG(zipf_theta, 0.01, 0.9999)},
      {"key-size", 0, "BYTES", true, "key bytes (HERD: the 16-byte keyhash; memcached/redis: key text, 16..250)",
       RDMALAB_INT_FLAG(key_size, kMinKeyTextBytes, kMaxKeyTextBytes)},
      {"value-size", 's', "BYTES", true, "value bytes", RDMALAB_INT_FLAG(value_size, 1, 1000)},
      {"window", 'w', "W", true, "requests in flight per client", RDMALAB_INT_FLAG(window, 1, 256)},
      {"clients", 0, "N", true, "clients per client process (each its own QPs or connections)",
       RDMALAB_INT_FLAG(clients, 1, 1024)},
      {"threads", 0, "N", false, "client threads per process; the clients are spread over them",
       RDMALAB_INT_FLAG(threads, 1, 256)},
      {"iters", 'n', "N", true, "operations per client (default 100000; excludes -D)",
       RDMALAB_INT_FLAG(iters, 1, 1ll << 50)},
      {"duration", 'D', "SEC", true, "measure for SEC seconds instead of -n", RDMALAB_SECONDS_FLAG(duration_s, 0)},
      {"warmup", 0, "SEC", true, "warm-up before measuring", RDMALAB_SECONDS_FLAG(warmup_s, 0)},
      {"validate", 0, nullptr, true, "check every GET's value against what was PUT", RDMALAB_SWITCH_FLAG(validate)},
      {"retry-ms", 0, "MS", true, "a request unanswered this long is sent again (same id)",
       RDMALAB_NUMBER_FLAG(retry_ms, 0.01, 1e6)},
      {"workers", 0, "NS", true, "HERD: server worker threads (one key partition each)",
       RDMALAB_INT_FLAG(workers, 1, 64)},
      {"core", 0, "K", false, "HERD server: report worker K's load only (herd14 Fig. 14); -1: the total",
       RDMALAB_INT_FLAG(core, -1, 63)},
      {"cq-mod", 'Q', "N", true, "signal one SEND/WRITE in N", RDMALAB_INT_FLAG(cq_mod, 1, 4096)},
      {"inline_size", 'I', "BYTES", true, "HERD: responses with values up to BYTES go inline",
       RDMALAB_INT_FLAG(inline_size, 0, 1000)},
      {"batching", 0, nullptr, true, "HERD: answer a sweep's requests with one doorbell (guide16)",
       RDMALAB_SWITCH_FLAG(batching)},
      {"queues", 'q', "N", true, "HERD: response UD QPs per worker, used in turn (guide16 multi-queue: 3)",
       RDMALAB_INT_FLAG(queues, 1, 16)},
      {"log-mb", 0, "MB", true, "HERD: cache log per worker", RDMALAB_INT_FLAG(log_mb, 1, 1 << 16)},
      {"index-log2", 0, "N", true, "HERD: log2 of index buckets per worker (0: sized for --keys)",
       RDMALAB_INT_FLAG(index_log2, 0, 30)},
      {"preload", 0, "[=BOOL]", true, "HERD, FaRM full: load every key before the run, so GETs hit",
       RDMALAB_SWITCH_FLAG(preload)},
      {"store", 0, "S", true,
       "Pilaf, FaRM: emulated (herd14's -em designs) | full (Pilaf: 3-1 cuckoo table whose buckets and extents the "
       "client checks by CRC64; farm, farm-var: hopscotch table, H = 6, of versioned CRC64-sealed buckets)",
       RDMALAB_CHOICE_FLAG(store, "emulated", "full")},
      {"corrupt", 0, "N", false,
       "full stores, server: flip a byte in the value or bucket of N keys after loading (tests checksums)",
       RDMALAB_INT_FLAG(corrupt, 0, 1 << 30)},
      {"farm-load-factor", 0, "F", true,
       "FaRM full: keys per home bucket of the hopscotch table (H = 6: above 0.2, some of millions of keys find no place)",
       RDMALAB_NUMBER_FLAG(farm_load_factor, 0.05, 4)},
      {"farm-buffer-slots", 0, "N", true, "FaRM: slots of each client's circular PUT buffer (0: 2 x --window)",
       RDMALAB_INT_FLAG(farm_buffer_slots, 0, 1 << 16)},
      {"lock-placement", 0, "P", true,
       "DrTM: lock words 8 B apart (spread) or 4096 B apart, sharing their 12 low address bits (same-bits)",
       RDMALAB_CHOICE_FLAG(lock_placement, "spread", "same-bits")},
      {"lock-retries", 0, "N", true, "DrTM: lock CASes retried before a PUT is refused",
       RDMALAB_INT_FLAG(lock_retries, 0, 1 << 30)},
      {"hydradb-miss-path", 0, nullptr, true, "HydraDB: a client's first GET of a key asks the server for its address",
       RDMALAB_SWITCH_FLAG(hydradb_miss_path)},
      {"protocol", 0, "P", true, "memcached: text | binary", RDMALAB_CHOICE_FLAG(protocol, "text", "binary")},
      {"pipeline", 0, nullptr, true,
       "TCP: the window's requests share one connection (pipelined); off: one connection per window slot",
       RDMALAB_SWITCH_FLAG(pipeline)},
      {"server-threads", 0, "N", true, "memcached/redis: server threads (memcached -t; redis io-threads)",
       RDMALAB_INT_FLAG(server_threads, 1, 64)},
      {"server-bin", 0, "PATH", false, "memcached/redis: the server program (default: from PATH)",
       RDMALAB_STRING_FLAG(server_bin)},
      {"bind", 0, "ADDR", false, "memcached/redis: address the server listens on and clients reach",
       RDMALAB_STRING_FLAG(bind)},
      {"tcp-port", 0, "N", false, "memcached/redis: server port (0: a free one)",
       RDMALAB_INT_FLAG(tcp_port, 0, 65535)},
      {"seed", 0, "N", true, "random seed (keys, operations)", RDMALAB_INT_FLAG(seed, 0, 1ll << 62)},
  });
  return flags;
}

}  // namespace

std::string HelpText() {
  std::string systems;
  for (const auto& system : Systems()) systems += std::string("  ") + system.name + ": " + system.summary + "\n";
  return "usage: rdmalab-kv server|client --system NAME [flags] [SERVER_HOST]\n"
         "       rdmalab-kv --rendezvous HOST:PORT --role ROLE --index I --peers N --system NAME [flags]\n"
         "A standalone server is started without SERVER_HOST; clients name it. Flags accept '-' or '_'.\n"
         "systems:\n" +
         systems + "\n" + FlagHelp(Flags(), [](const char* name) {
           return std::string(name) == "iters" || std::string(name) == "out_json";
         });
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  const std::vector<std::string> positional = ParseFlags(Flags(), "rdmalab-kv", HelpText(), argc, argv, options);
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
  options.system = FindSystem(options.system).name;  // one spelling from here on
  return options;
}

json ConfigJson(const Options& options) {
  json config = FlagsJson(Flags(), options, false);
  config["role"] = options.role;
  config["server_host"] = options.server_host;
  return config;
}

json SymmetricConfigJson(const Options& options) { return FlagsJson(Flags(), options, true); }

ParticipantConfig ParticipantConfigOf(const Options& o) {
  return ParticipantConfigFrom(o, "rdmalab-kv --system " + o.system, SymmetricConfigJson(o));
}

}  // namespace rdmalab::kv
