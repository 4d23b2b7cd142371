#include "benchmarks/bench/options.h"

#include <functional>

#include "benchmarks/bench/key_addresses.h"
#include "rdma/error.h"
#include "rdma/flags.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

using Flag = rdmalab::Flag<Options>;

#define INT_FLAG RDMALAB_INT_FLAG
#define SWITCH_FLAG RDMALAB_SWITCH_FLAG
#define STRING_FLAG RDMALAB_STRING_FLAG
#define CHOICE_FLAG RDMALAB_CHOICE_FLAG
#define SECONDS_FLAG RDMALAB_SECONDS_FLAG

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = FlagTable<Options>({
      {"role", 0, "ROLE", false, "server | client | node (coordinator runs; standalone: implied)",
       CHOICE_FLAG(role, "server", "client", "node")},
      {"index", 0, "I", false, "0-based index within the role", INT_FLAG(index, 0, 1 << 20)},
      {"peers", 0, "N", false, "processes of the other role (server: clients; node: all nodes)",
       INT_FLAG(peers, 1, 4096)},
      {"verb", 0, "VERB", true, "read | write | write_inline | send | cas | faa [default write; atomics faa]",
       CHOICE_FLAG(verb, "read", "write", "write_inline", "send", "cas", "faa")},
      {"connection", 'c', "RC|UC|UD", true, "transport", CHOICE_FLAG(connection, "RC", "UC", "UD")},
      {"size", 's', "BYTES[,BYTES...]", true, "payload bytes per message (a list sweeps)",
       [](Options& o, const std::string& v) { o.sizes = ParseSizes("size", v); }, FieldGetter(&Options::sizes)},
      {"all", 'a', nullptr, true, "sweep sizes 2..2^23 by powers of two", SWITCH_FLAG(all)},
      {"iters", 'n', "N", true, "operations per thread (default: lat 1000, others 100000; excludes -D)",
       INT_FLAG(iters, 1, 1ll << 50)},
      {"duration", 'D', "SEC", true, "measure for SEC seconds instead of -n", SECONDS_FLAG(duration_s, 0)},
      {"warmup", 0, "SEC", true, "warm-up before measuring", SECONDS_FLAG(warmup_s, 0)},
      {"tx-depth", 't', "N", true, "window: outstanding WRs per QP", INT_FLAG(tx_depth, 1, 1 << 16)},
      {"cq-mod", 'Q', "N", true, "signal one WR in N (selective signaling)", INT_FLAG(cq_mod, 1, 1 << 16)},
      {"post_list", 'l', "N", true, "WRs per ibv_post_send (doorbell batch)", INT_FLAG(post_list, 1, 1 << 12)},
      {"qp", 'q', "N", true, "QPs per thread per peer (multi-queue)", INT_FLAG(qp, 1, 1 << 12)},
      {"threads", 0, "N", true, "threads per process, one CPU each", INT_FLAG(threads, 1, 256)},
      {"inline_size", 'I', "BYTES", true, "inline payloads up to BYTES", INT_FLAG(inline_size, 0, 1 << 16)},
      {"sge", 0, "K", true, "SGEs per WR (payload split evenly)", INT_FLAG(sge, 1, 64)},
      {"header-only", 0, nullptr, true, "SENDs carry no payload, only a 4-byte immediate", SWITCH_FLAG(header_only)},
      {"direction", 0, "DIR", true, "inbound (clients -> server) | outbound | alltoall",
       CHOICE_FLAG(direction, "inbound", "outbound", "alltoall")},
      {"lat-method", 0, "METHOD", true, "completion (signaled op until its CQE) | pingpong (half round trip)",
       CHOICE_FLAG(lat_method, "completion", "pingpong")},
      {"events", 'e', nullptr, true,
       "lat: sleep on a completion channel (ibv_req_notify_cq, ibv_get_cq_event) instead of polling",
       SWITCH_FLAG(events)},
      {"rdma_cm", 'R', nullptr, true,
       "connect every RC/UC QP through rdma_cm (REQ/REP/RTU; the server listens on --port, node i on --port + i)",
       SWITCH_FLAG(rdma_cm)},
      {"request", 0, "VERB", true, "echo request verb: write | send", CHOICE_FLAG(request, "write", "send")},
      {"response", 0, "VERB", true, "echo response verb: write | send", CHOICE_FLAG(response, "write", "send")},
      {"response-connection", 0, "RC|UC|UD", true, "echo response transport",
       CHOICE_FLAG(response_connection, "RC", "UC", "UD")},
      {"accesses", 0, "N", true, "echo server: random memory accesses per request", INT_FLAG(accesses, 0, 64)},
      {"prefetch", 0, nullptr, true, "echo server: prefetch the accesses of the next requests", SWITCH_FLAG(prefetch)},
      {"table-mb", 0, "MB", true, "echo server: size of the randomly accessed table", INT_FLAG(table_mb, 1, 1 << 16)},
      {"counters", 0, "Z", true, "atomics: number of counters hit at random", INT_FLAG(counters, 1, 1 << 24)},
      {"counter-stride", 0, "BYTES", true, "atomics: bytes between counters (multiple of 8)",
       INT_FLAG(counter_stride, 8, 1 << 20)},
      {"design", 0, "NAME", true, "sequencer: herd-rpc | herd-rpc-batch | herd-rpc-mq | spec-s0 | atomics",
       CHOICE_FLAG(design, "herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics")},
      {"count", 0, "N", true, "sequencer: integers handed out in total", INT_FLAG(count, 1, 1ll << 40)},
      {"batch", 0, "N", true, "sequencer: most requests answered per doorbell", INT_FLAG(batch, 1, 1024)},
      {"numa", 0, "WHERE", true, "tput: source buffers on the device's NUMA node (device, near) or another (far)",
       CHOICE_FLAG(numa, "device", "near", "far")},
      {"page-offset", 0, "BYTES", true, "tput: each source buffer starts BYTES into its own page (-1: packed)",
       INT_FLAG(page_offset, -1, 4095)},
      {"buffers", 0, "N", true, "tput: cycle over N source buffers (0: one per slot of the window)",
       INT_FLAG(buffers, 0, 1 << 16)},
      {"distribution", 0, "D", true,
       "tput --verb read: each READ reads the value of a key drawn uniform | zipf (none: its own window slot)",
       CHOICE_FLAG(distribution, "none", "uniform", "zipf")},
      {"placement", 0, "P", true,
       "with --distribution: values in popularity order (clustered) or a random slot each (unclustered)",
       CHOICE_FLAG(placement, "clustered", "unclustered")},
      {"keys", 0, "N", true, "with --distribution: values in the server's array (0: 4 Mi, 8x a 32 MiB LLC at 64 B)",
       INT_FLAG(keys, 0, kMaxKeys)},
      {"zipf-theta", 0, "T", true, "with --distribution zipf: the skew (YCSB: 0.99)",
       RDMALAB_NUMBER_FLAG(zipf_theta, 0.01, 0.9999)},
      {"stack", 0, "STACK", true,
       "rdma (verbs) | udp | tcp: lat and tput over the kernel's sockets | raw: UDP frames over a raw-packet QP",
       CHOICE_FLAG(stack, "rdma", "udp", "tcp", "raw")},
      {"io-batch", 0, "N", true, "--stack udp|raw: datagrams per sendmmsg/recvmmsg or post list",
       INT_FLAG(io_batch, 1, 1024)},
      {"validate", 0, nullptr, true, "check every byte moved (slower; a fast number from a broken transfer fails)",
       SWITCH_FLAG(validate)},
      {"seed", 0, "N", true, "random seed (targets, keys)", INT_FLAG(seed, 0, 1ll << 62)},
  });
  return flags;
}

}  // namespace

std::string HelpText() {
  return "usage: rdmalab-bench MODE [flags] [SERVER_HOST]\n"
         "       rdmalab-bench MODE --rendezvous HOST:PORT --role ROLE --index I --peers N [flags]\n"
         "modes: lat, tput, echo, atomics, sgbatch, sequencer (README: benchmarks/README.md)\n"
         "A standalone server is started without SERVER_HOST; clients name it. Flags accept '-' or '_'.\n\n" +
         FlagHelp(Flags(), [](const char* name) {
           return std::string(name) == "iters" || std::string(name) == "out_json";
         });
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  const std::vector<std::string> positional = ParseFlags(Flags(), "rdmalab-bench", HelpText(), argc, argv, options);
  if (positional.empty()) Fail("no mode given: expected one of lat, tput, echo, atomics, sgbatch, sequencer");
  options.mode = positional[0];
  if (positional.size() > 2) Fail("unexpected argument '", positional[2], "': expected MODE [SERVER_HOST]");
  if (positional.size() == 2) options.server_host = positional[1];
  return options;
}

json ConfigJson(const Options& options) {
  json config = {{"mode", options.mode}};
  config.update(FlagsJson(Flags(), options, false));
  config["server_host"] = options.server_host;
  return config;
}

json SymmetricConfigJson(const Options& options) {
  json config = {{"mode", options.mode}};
  config.update(FlagsJson(Flags(), options, true));
  return config;
}

}  // namespace rdmalab::bench
