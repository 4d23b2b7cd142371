// sequencer as a mode: its option checks, and the hand-out of --count integers, served by
// the workers (server_loop.cc) and requested by every client (client_loop.cc) between
// barriers, then checked (sequencer_check).
#include <algorithm>

#include "benchmarks/bench/peer_rates.h"
#include "benchmarks/bench/sequencer/run.h"
#include "benchmarks/bench/sequencer_check.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace sequencer {

using nlohmann::json;

ResultRow SequencerRun::ServeAll() {
  // The atomics design has no workers: the server only waits at the barriers.
  ServeBetweenBarriers(session_, static_cast<int>(workers_.size()), stop_, "/0", [&](int t) {
    Worker& worker = workers_[static_cast<std::size_t>(t)];
    if (design_ == Design::kSpec) {
      ServeSpec(worker);
    } else {
      ServeHerd(worker, static_cast<std::uint32_t>(t));
    }
  });
  return ServerRow();
}

Report SequencerRun::Serve() {
  SetupServer();
  session_.Barrier("connected");
  Report report;
  report.rows.push_back(ServeAll());
  const json check = GatherAndCheck(session_, o_.count);
  report.rows.back().extra["sequencer_check"] = check;
  report.validation = {{"enabled", true}, {"sequencer_check", check}, {"ok", check.at("ok")}};
  return report;
}

Report SequencerRun::Request() {
  SetupClient();
  session_.Barrier("connected");
  ResultRow row = LatencyRow(kIntegerBytes, kIntegerBytes, "rtt");
  client_ = SequencerClientWindow(window_, o_.count, session_.clock(), *row.latency_ns);
  session_.Barrier("start/0");
  RunClient(row);
  PublishRate(session_, "/0", row);
  session_.Barrier("done/0");
  AddClientCounts(row);
  const SequencerClientStats& stats = client_.stats();
  PublishIntegers(session_, client_.received(), stats.received, stats.local_duplicates);
  Report report;
  report.rows.push_back(std::move(row));
  report.validation = {{"enabled", true}, {"checked_by", "server"}};
  return report;
}

Report SequencerRun::Run() {
  inline_bytes_ = static_cast<std::uint32_t>(std::min(o_.inline_size, int{kRequestBytes}));
  Report report = session_.is_server() ? Serve() : Request();
  session_.Barrier("finished");
  report.notes.push_back("rates cover the whole hand-out of --count integers (no warm-up is excluded)");
  if (design_ == Design::kAtomics) report.notes.push_back("design atomics: the server's CPU takes no part");
  return report;
}

}  // namespace sequencer

void CheckSequencer(Options& options) {
  const sequencer::Design design = sequencer::ParseDesign(options.design);
  if (!options.verb.empty()) Fail("--verb ", options.verb, " does not apply to sequencer: choose --design");
  if (options.duration_s > 0 || options.iters != 0) {
    Fail("-D/--duration and -n/--iters do not apply to sequencer: a run hands out --count integers (", options.count,
         ")");
  }
  if (options.all) Fail("-a/--all does not apply to sequencer: it moves 8-byte integers");
  for (auto size : options.sizes) {
    if (size != sequencer::kIntegerBytes) Fail("--size ", size, " with sequencer: the integers are 8 bytes (--size 8)");
  }
  if (options.sizes.empty()) options.sizes.push_back(sequencer::kIntegerBytes);
  if (options.connection != "RC") {
    Fail("-c ", options.connection, " with sequencer: each --design fixes its transports; leave -c at RC");
  }
  if (options.header_only) Fail("--header-only with sequencer: spec-s0 is header-only by design");
  if (options.post_list != 1 || options.qp != 1 || options.sge != 1) {
    Fail("--post_list, --qp and --sge do not apply to sequencer: use --batch and --design herd-rpc-mq");
  }
  if (design == sequencer::Design::kAtomics && options.cq_mod != 1) {
    Fail("--cq-mod ", options.cq_mod, " with --design atomics: every fetch-and-add's result is read at its "
         "completion, so each one is signaled; use -Q 1");
  }
  CheckIntegerCount(options.count);
}

Report RunSequencer(Session& session) { return sequencer::SequencerRun(session).Run(); }

}  // namespace rdmalab::bench
