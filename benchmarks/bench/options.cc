#include "benchmarks/bench/options.h"

#include <functional>

#include "benchmarks/bench/key_addresses.h"
#include "benchmarks/bench/modes.h"
#include "rdma/error.h"
#include "rdma/flags.h"

namespace rdmalab::bench {
namespace {

using Flag = rdmalab::Flag<Options>;

#define INT_FLAG RDMALAB_INT_FLAG
#define SWITCH_FLAG RDMALAB_SWITCH_FLAG
#define STRING_FLAG RDMALAB_STRING_FLAG
#define CHOICE_FLAG RDMALAB_CHOICE_FLAG
#define SECONDS_FLAG RDMALAB_SECONDS_FLAG
#define NUMBER_FLAG RDMALAB_NUMBER_FLAG

// The flags of the modes (after the participant's, rdma/flags.h).
std::vector<Flag> ModeFlags() {
  return {
      {"verb", 0, "VERB", nullptr, kShared, "read | write | write_inline | send | cas | faa [default write; atomics faa]",
       CHOICE_FLAG(verb, "read", "write", "write_inline", "send", "cas", "faa")},
      {"connection", 'c', "RC|UC|UD", nullptr, kShared, "transport", CHOICE_FLAG(connection, "RC", "UC", "UD")},
      {"size", 's', "BYTES[,BYTES...]", "bytes", kShared, "payload bytes per message (a list sweeps)",
       RDMALAB_INT_LIST_FLAG(sizes, 0, 1ll << 30)},
      {"all", 'a', nullptr, nullptr, kShared, "sweep sizes 2..2^23 by powers of two", SWITCH_FLAG(all)},
      {"iters", 'n', "N", "ops", kShared, "operations per thread (default: lat 1000, others 100000; excludes -D)",
       INT_FLAG(iters, 1, 1ll << 50)},
      {"duration", 'D', "SEC", "s", kShared, "measure for SEC seconds instead of -n", SECONDS_FLAG(duration_s, 0)},
      {"warmup", 0, "SEC", "s", kShared, "warm-up before measuring", SECONDS_FLAG(warmup_s, 0)},
      {"tx-depth", 't', "N", "WRs", kShared, "window: outstanding WRs per QP", INT_FLAG(tx_depth, 1, 1 << 16)},
      {"cq-mod", 'Q', "N", "WRs", kShared, "signal one WR in N (selective signaling)", INT_FLAG(cq_mod, 1, 1 << 16)},
      {"post_list", 'l', "N", "WRs", kShared, "WRs per ibv_post_send (doorbell batch)", INT_FLAG(post_list, 1, 1 << 12)},
      {"qp", 'q', "N", "QPs", kShared, "QPs per thread per peer (multi-queue)", INT_FLAG(qp, 1, 1 << 12)},
      {"threads", 0, "N", "threads", kShared, "threads per process, one CPU each", INT_FLAG(threads, 1, 256)},
      {"inline_size", 'I', "BYTES", "bytes", kShared, "inline payloads up to BYTES", INT_FLAG(inline_size, 0, 1 << 16)},
      {"sge", 0, "K", "SGEs", kShared, "SGEs per WR (payload split evenly)", INT_FLAG(sge, 1, 64)},
      {"header-only", 0, nullptr, nullptr, kShared, "SENDs carry no payload, only a 4-byte immediate", SWITCH_FLAG(header_only)},
      {"direction", 0, "DIR", nullptr, kShared, "inbound (clients -> server) | outbound | alltoall",
       CHOICE_FLAG(direction, "inbound", "outbound", "alltoall")},
      {"lat-method", 0, "METHOD", nullptr, kShared, "completion (signaled op until its CQE) | pingpong (half round trip)",
       CHOICE_FLAG(lat_method, "completion", "pingpong")},
      {"events", 'e', nullptr, nullptr, kShared,
       "lat: sleep on a completion channel (ibv_req_notify_cq, ibv_get_cq_event) instead of polling",
       SWITCH_FLAG(events)},
      {"rdma_cm", 'R', nullptr, nullptr, kShared,
       "connect every RC/UC QP through rdma_cm (REQ/REP/RTU; the server listens on --port, node i on --port + i)",
       SWITCH_FLAG(rdma_cm)},
      {"request", 0, "VERB", nullptr, kShared, "echo request verb: write | send", CHOICE_FLAG(request, "write", "send")},
      {"response", 0, "VERB", nullptr, kShared, "echo response verb: write | send", CHOICE_FLAG(response, "write", "send")},
      {"response-connection", 0, "RC|UC|UD", nullptr, kShared, "echo response transport",
       CHOICE_FLAG(response_connection, "RC", "UC", "UD")},
      {"accesses", 0, "N", "accesses", kShared, "echo server: random memory accesses per request", INT_FLAG(accesses, 0, 64)},
      {"prefetch", 0, nullptr, nullptr, kShared, "echo server: prefetch the accesses of the next requests", SWITCH_FLAG(prefetch)},
      {"table-mb", 0, "MB", "MiB", kShared, "echo server: size of the randomly accessed table", INT_FLAG(table_mb, 1, 1 << 16)},
      {"counters", 0, "Z", "counters", kShared, "atomics: number of counters hit at random", INT_FLAG(counters, 1, 1 << 24)},
      {"counter-stride", 0, "BYTES", "bytes", kShared, "atomics: bytes between counters (multiple of 8)",
       INT_FLAG(counter_stride, 8, 1 << 20)},
      {"design", 0, "NAME", nullptr, kShared, "sequencer: herd-rpc | herd-rpc-batch | herd-rpc-mq | spec-s0 | atomics",
       CHOICE_FLAG(design, "herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics")},
      {"count", 0, "N", "integers", kShared, "sequencer: integers handed out in total", INT_FLAG(count, 1, 1ll << 40)},
      {"batch", 0, "N", "requests", kShared, "sequencer: most requests answered per doorbell", INT_FLAG(batch, 1, 1024)},
      {"numa", 0, "WHERE", nullptr, kShared, "tput: source buffers on the device's NUMA node (device, near) or another (far)",
       CHOICE_FLAG(numa, "device", "near", "far")},
      {"page-offset", 0, "BYTES", "bytes", kShared, "tput: each source buffer starts BYTES into its own page (-1: packed)",
       INT_FLAG(page_offset, -1, 4095)},
      {"buffers", 0, "N", "buffers", kShared, "tput: cycle over N source buffers (0: one per slot of the window)",
       INT_FLAG(buffers, 0, 1 << 16)},
      {"distribution", 0, "D", nullptr, kShared,
       "tput --verb read: each READ reads the value of a key drawn uniform | zipf (none: its own window slot)",
       CHOICE_FLAG(distribution, "none", "uniform", "zipf")},
      {"placement", 0, "P", nullptr, kShared,
       "with --distribution: values in popularity order (clustered) or a random slot each (unclustered)",
       CHOICE_FLAG(placement, "clustered", "unclustered")},
      {"keys", 0, "N", "keys", kShared, "with --distribution: values in the server's array (0: 4 Mi, 8x a 32 MiB LLC at 64 B)",
       INT_FLAG(keys, 0, kMaxKeys)},
      {"zipf-theta", 0, "T", nullptr, kShared, "with --distribution zipf: the skew (YCSB: 0.99)",
       NUMBER_FLAG(zipf_theta, 0.01, 0.9999)},
      {"stack", 0, "STACK", nullptr, kShared,
       "rdma (verbs) | udp | tcp: lat and tput over the kernel's sockets | raw: UDP frames over a raw-packet QP",
       CHOICE_FLAG(stack, "rdma", "udp", "tcp", "raw")},
      {"io-batch", 0, "N", "datagrams", kShared, "--stack udp|raw: datagrams per sendmmsg/recvmmsg or post list",
       INT_FLAG(io_batch, 1, 1024)},
      {"validate", 0, nullptr, nullptr, kShared, "check every byte moved (slower; a fast number from a broken transfer fails)",
       SWITCH_FLAG(validate)},
  };
}

void TakePositional(Options& options, const std::vector<std::string>& positional, int, char**) {
  if (positional.empty()) Fail("no mode given: expected one of ", ModeNames());
  options.mode = positional[0];
  if (positional.size() > 2) Fail("unexpected argument '", positional[2], "': expected MODE [SERVER_HOST]");
  if (positional.size() == 2) options.server_host = positional[1];
}

}  // namespace

const CommandLine<Options>& BenchCommandLine() {
  static const std::vector<std::string> roles = {"server", "client", "node"};
  static const CommandLine<Options> line = {
      "rdmalab-bench",
      "usage: rdmalab-bench MODE [flags] [SERVER_HOST]\n"
      "       rdmalab-bench MODE --rendezvous HOST:PORT --role ROLE --index I --peers N [flags]\n"
      "       rdmalab-bench --describe   (every mode and parameter, as JSON)\n"
      "modes: " + ModeNames() + " (README: benchmarks/README.md)\n"
      "A standalone server is started without SERVER_HOST; clients name it. Flags accept '-' or '_'.\n\n",
      roles,
      FlagTable<Options>(roles, ModeFlags()),
      TakePositional,
      [](const Options& options) { return nlohmann::json{{"mode", options.mode}}; },
      [] { return DescribedList(Modes()); },
      nullptr,
  };
  return line;
}

}  // namespace rdmalab::bench
