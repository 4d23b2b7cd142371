// echo as a mode: its option checks, and the run of every payload size, served by the
// server's threads (server_loop.cc) and measured by each client (client_loop.cc) between
// barriers.
#include <cstring>

#include "benchmarks/bench/echo/run.h"
#include "benchmarks/bench/peer_rates.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace echo {

ResultRow EchoRun::ServeSize(std::size_t index, std::uint32_t size) {
  ServeBetweenBarriers(session_, o_.threads, stop_, "/" + std::to_string(index),
                       [&](int t) { ServerThreadLoop(threads_[static_cast<std::size_t>(t)], size); });
  return ServerRow(index, size);
}

ResultRow EchoRun::MeasureSize(std::size_t index, std::uint32_t size) {
  const std::string suffix = "/" + std::to_string(index);
  session_.Barrier("start" + suffix);
  ResultRow row = MeasureClient(size);
  PublishRate(session_, suffix, row);
  session_.Barrier("done" + suffix);
  return row;
}

Report EchoRun::Run() {
  CheckPathMtu();
  if (session_.is_server()) {
    SetupServer();
  } else {
    SetupClient();
  }
  session_.Barrier("connected");
  Report report;
  for (std::size_t i = 0; i < o_.sizes.size(); ++i) {
    const std::uint32_t size = o_.sizes[i];
    if (session_.is_server()) {
      report.rows.push_back(ServeSize(i, size));
      std::memset(requests_.data(), 0, requests_.buffer.size());
    } else {
      report.rows.push_back(MeasureSize(i, size));
      std::memset(local_.data() + std::uint64_t{shape_.window} * shape_.slot_bytes, 0,
                  std::uint64_t{shape_.window} * shape_.recv_bytes);
    }
    // Slots are cleared on both sides before the next size polls a different last byte.
    session_.Barrier("reset/" + std::to_string(i));
  }
  session_.Barrier("finished");
  report.validation = Validation();
  return report;
}

}  // namespace echo

void CheckEcho(Options& options) {
  if (!options.verb.empty()) {
    Fail("--verb ", options.verb, " does not apply to echo: choose --request write|send and --response write|send");
  }
  if (options.request == "write" && options.connection == "UD") {
    Fail("--request write over -c UD is impossible: UD carries only SEND (use -c RC or UC, or --request send)");
  }
  if (options.response == "write" && options.response_connection == "UD") {
    Fail("--response write over --response-connection UD is impossible: UD carries only SEND "
         "(use --response-connection RC or UC, or --response send)");
  }
  if (options.header_only) Fail("--header-only does not apply to echo: an echo carries its request's bytes back");
  if (options.direction != "inbound") {
    Fail("--direction ", options.direction, " does not apply to echo: clients send requests, the server answers");
  }
  if (options.post_list != 1) Fail("--post_list ", options.post_list, " with echo: each request is posted on its own (1)");
  if (options.qp != 1) Fail("--qp ", options.qp, " with echo: one request QP per client (1)");
  if (options.sge != 1) Fail("--sge ", options.sge, " with echo: requests and responses are one SGE (1)");
  if (static_cast<std::uint32_t>(options.tx_depth) >= echo::kMaxWindow) {
    Fail("--tx-depth ", options.tx_depth, " with echo: the window must be below ", echo::kMaxWindow);
  }
  if (options.peers > echo::kMaxClients) {
    Fail("--peers ", options.peers, " with echo: at most ", echo::kMaxClients, " clients");
  }
  if (options.prefetch && options.accesses == 0) {
    Fail("--prefetch with --accesses 0: there is nothing to prefetch; give --accesses N > 0");
  }
  if (options.accesses > echo::kMaxAccesses) Fail("--accesses ", options.accesses, " exceeds ", echo::kMaxAccesses);
  DefaultSizes(options, 32);
  for (auto size : options.sizes) {
    if (size == 0) Fail("--size 0 with echo: a request is detected by its last byte, so at least 1 byte");
  }
}

Report RunEcho(Session& session) { return echo::EchoRun(session).Run(); }

}  // namespace rdmalab::bench
