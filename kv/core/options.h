// Every knob of rdmalab-kv, as one struct filled from one flag table (options.cc): the
// participant's (rdma/flags.h ParticipantOptions) and the systems'. Perftest spellings where
// the meaning is the same, values, unit, default, help, and whether both sides of a run must
// agree on it (symmetric flags are checked when the clients join).
#pragma once

#include <cstdint>
#include <string>

#include "rdma/flags.h"

namespace rdmalab::kv {

struct Options : ParticipantOptions {
  std::string system = "herd";
  // Workload (kv/workload).
  std::uint64_t keys = 1 << 20;
  double put_fraction = 0.05;
  double get_fraction = -1;  // < 0: 1 - put_fraction; else put_fraction = 1 - get_fraction (the survey's axis)
  std::string distribution = "uniform";
  double zipf_theta = 0.99;
  int key_size = 16;
  int value_size = 32;
  // Clients.
  int window = 4;
  int clients = 1;  // logical clients per client process, each with its own QPs or connections
  int threads = 1;  // threads per process (client: the clients are spread over them; server: see --workers)
  std::uint64_t iters = 0;  // operations per client; 0: the default unless -D
  double duration_s = 0;
  double warmup_s = 0.2;
  bool validate = false;
  double retry_ms = 100;
  // No answer to any request in flight for this long: the server is taken as dead and the
  // run cut short (0: never). At least 5 x retry_ms, so that retries had their chance.
  double dead_after_ms = 1000;
  // HERD server.
  int workers = 1;
  int core = -1;  // >= 0: the server reports that worker's load only
  int cq_mod = 64;
  int inline_size = 192;
  bool batching = false;
  int queues = 1;  // response UD QPs per worker (multi-queue when > 1)
  int log_mb = 64;
  int index_log2 = 0;  // 0: sized for --keys
  bool preload = true;
  // READ-based systems (kv/remote).
  std::string store = "emulated";  // Pilaf, FaRM: emulated | full (Pilaf: 3-1 cuckoo table; FaRM: hopscotch table)
  int corrupt = 0;                 // full stores, server: flip a byte of this many keys' value or bucket
  // FaRM full: keys per home bucket of the hopscotch table. With H = 6 and no overflow chains
  // some 5 consecutive homes draw more keys than their 10 buckets hold at higher loads (at
  // 0.25, 1 key of 1 Mi finds no place; at 0.2, none of 4 Mi: kv/README.md).
  double farm_load_factor = 0.2;
  int farm_buffer_slots = 0;  // FaRM: slots of each client's circular buffer (0: 2 x --window)
  std::string lock_placement = "spread";  // DrTM: spread | same-bits
  int lock_retries = 1000;
  bool hydradb_miss_path = false;
  // TCP baselines.
  std::string protocol = "text";  // memcached: text | binary
  bool pipeline = false;
  std::string server_bin;  // empty: memcached / redis-server from PATH
  std::string bind = "127.0.0.1";
  int tcp_port = 0;        // 0: a free port
};

// The command line: `rdmalab-kv server|client --system NAME [flags] [SERVER_HOST]`; parsing,
// --help, the document's config and --describe come from it (rdma/flags.h).
const CommandLine<Options>& KvCommandLine();

}  // namespace rdmalab::kv
