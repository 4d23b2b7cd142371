// rdmalab-bench: parse, check, join the run, measure, report. Every failure ends here as
// one line "rdmalab-bench: error: ..." and a non-zero exit; peers learn of it through
// the rendezvous so that they fail fast instead of waiting for their deadlines. What the
// host cannot do ends as "rdmalab-bench: unsupported: ..." and kExitUnsupported instead,
// so that the harness tells a point this host cannot run from a broken one.
#include <cstdio>
#include <optional>

#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/options.h"
#include "benchmarks/bench/report.h"
#include "benchmarks/bench/session.h"
#include "rdma/clock.h"
#include "rdma/error.h"
#include "rdma/program.h"

namespace rdmalab::bench {
namespace {

int Main(int argc, char** argv) {
  std::optional<Session> session;
  try {
    Options options = ParseOptions(argc, argv);
    const Mode& mode = ModeFor(options);
    if (options.events && (options.mode != "lat" || options.stack != "rdma")) {
      Fail("-e/--events applies to lat over RDMA only (mode ", options.mode, ", --stack ", options.stack,
           "): other modes and the socket stacks always poll");
    }
    if (options.rdma_cm && options.stack != "rdma") {
      Fail("-R/--rdma_cm connects QPs: it applies to --stack rdma only (not ", options.stack, ")");
    }
    if (options.rdma_cm && options.connection == "UD") {
      Fail("-R/--rdma_cm with -c UD: -R connects RC and UC QPs (UD needs no connection)");
    }
    if (options.distribution != "none" && (options.mode != "tput" || options.stack != "rdma")) {
      Fail("--distribution ", options.distribution, " applies to mode tput over RDMA (--verb read), not mode ",
           options.mode, " --stack ", options.stack);
    }
    mode.check(options);
    Watchdog watchdog("rdmalab-bench", options.timeout_s);
    const std::uint64_t start_ns = MonotonicNs();
    const double user_before = CpuSeconds(true), system_before = CpuSeconds(false);
    session.emplace(options, mode.node_roles(options));
    const Report report = mode.run(*session);
    const double wall_s = static_cast<double>(MonotonicNs() - start_ns) / 1e9;
    const auto document = ReportJson(*session, report, CpuSeconds(true) - user_before,
                                     CpuSeconds(false) - system_before, wall_s);
    WriteDocument(options.out_json, options.out_json_file, document, ReportTable(*session, report));
    session->Finish();
    if (!report.validation.value("ok", true)) {
      std::fprintf(stderr, "rdmalab-bench: error: the run's own check failed (validation): %s\n",
                   report.validation.dump().c_str());
      return kExitValidation;
    }
    return 0;
  } catch (const std::exception& error) {
    if (session) session->ReportFailure(FailureReason(error));
    return ExitAfter("rdmalab-bench", error);
  }
}

}  // namespace
}  // namespace rdmalab::bench

int main(int argc, char** argv) { return rdmalab::bench::Main(argc, argv); }
