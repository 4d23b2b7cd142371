// Every knob of rdmalab-bench, as one struct filled from one flag table (options.cc): the
// participant's (rdma/flags.h ParticipantOptions) and the modes'. Each flag has its perftest
// spelling where one exists, its values, unit, default and help, and whether both sides of
// a run must agree on it (symmetric flags are checked at connect).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rdma/flags.h"

namespace rdmalab::bench {

struct Options : ParticipantOptions {
  std::string mode;
  // Workload.
  std::string verb;  // empty: the mode's default (write; atomics: faa)
  std::string connection = "RC";
  std::vector<std::uint32_t> sizes;
  bool all = false;
  std::uint64_t iters = 0;  // 0: the mode's default
  double duration_s = 0;
  double warmup_s = 0.2;
  int tx_depth = 128;
  int cq_mod = 1;
  int post_list = 1;
  int qp = 1;
  int threads = 1;
  int inline_size = 0;
  int sge = 1;
  bool header_only = false;
  std::string direction = "inbound";
  std::string lat_method;   // empty: the verb's default
  bool events = false;      // lat: sleep on a completion channel instead of polling
  bool rdma_cm = false;     // connect every RC/UC QP through rdma_cm
  // echo
  std::string request = "write";
  std::string response = "send";
  std::string response_connection = "UD";
  int accesses = 0;
  bool prefetch = false;
  int table_mb = 64;
  // atomics
  int counters = 1;
  int counter_stride = 8;
  // sequencer
  std::string design = "herd-rpc";
  std::uint64_t count = 1'000'000;
  int batch = 16;
  // Where tput's active side keeps the buffers it sends from (nosql Fig. 9-11).
  std::string numa = "device";  // device | near | far
  int page_offset = -1;         // -1: slots packed by cache line; else each slot this far into its own page
  int buffers = 0;              // 0: one buffer per slot of the window; else cycle over this many
  // Keyed READs of tput (nosql Fig. 14, key_addresses.h): none keeps one slot per window entry.
  std::string distribution = "none";  // none | uniform | zipf
  std::string placement = "clustered";  // clustered | unclustered
  std::uint64_t keys = 0;               // 0: kDefaultKeys
  double zipf_theta = 0.99;
  // Kernel-socket stand-ins of lat and tput (sockets.cc), and raw Ethernet frames (raw_packet.cc).
  std::string stack = "rdma";
  int io_batch = 1;
  bool validate = false;
};

// The command line: `rdmalab-bench MODE [flags] [SERVER_HOST]`; parsing, --help, the
// document's config and --describe come from it (rdma/flags.h).
const CommandLine<Options>& BenchCommandLine();

}  // namespace rdmalab::bench
