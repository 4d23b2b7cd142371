// rdmalab-kv: parse, check, join the run, serve or drive the system, report. Every failure
// ends here as one line "rdmalab-kv: error: ..." and a non-zero exit; peers learn of it
// through the rendezvous so that they fail fast instead of waiting for their deadlines. What
// the host cannot do (rdma/error.h Unsupported) ends as "rdmalab-kv: unsupported: ..." and
// kExitUnsupported.
#include <cstdio>
#include <optional>

#include "kv/core/options.h"
#include "kv/core/report.h"
#include "kv/core/session.h"
#include "kv/core/systems.h"
#include "rdma/clock.h"
#include "rdma/error.h"
#include "rdma/program.h"

namespace rdmalab::kv {
namespace {

int Main(int argc, char** argv) {
  std::optional<Session> session;
  try {
    Options options = ParseOptions(argc, argv);
    const System& system = FindSystem(options.system);
    system.check(options);
    Watchdog watchdog("rdmalab-kv", options.timeout_s);
    const std::uint64_t start_ns = MonotonicNs();
    const double user_before = CpuSeconds(true), system_before = CpuSeconds(false);
    session.emplace(options);
    const Report report = session->is_server() ? system.server(*session) : system.client(*session);
    const double wall_s = static_cast<double>(MonotonicNs() - start_ns) / 1e9;
    const auto document =
        ReportJson(*session, report, CpuSeconds(true) - user_before, CpuSeconds(false) - system_before, wall_s);
    WriteDocument(options.out_json, options.out_json_file, document, ReportTable(*session, report));
    session->Finish();
    if (!report.validation.value("ok", true)) {
      std::fprintf(stderr, "rdmalab-kv: error: wrong values returned: %s\n", report.validation.dump().c_str());
      return kExitValidation;
    }
    return 0;
  } catch (const std::exception& error) {
    if (session) session->ReportFailure(FailureReason(error));
    return ExitAfter("rdmalab-kv", error);
  }
}

}  // namespace
}  // namespace rdmalab::kv

int main(int argc, char** argv) { return rdmalab::kv::Main(argc, argv); }
