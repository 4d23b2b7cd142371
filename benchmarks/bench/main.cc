// rdmalab-bench: parse, check, join the run, measure, report. Every failure ends here as
// one line "rdmalab-bench: error: ..." and a non-zero exit; peers learn of it through
// the rendezvous so that they fail fast instead of waiting for their deadlines.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/options.h"
#include "benchmarks/bench/report.h"
#include "benchmarks/bench/session.h"
#include "rdma/clock.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

constexpr int kExitError = 1;
constexpr int kExitValidation = 2;
constexpr double kWatchdogGraceS = 5.0;

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

// The last line of defence for "nothing hangs": every wait has its own deadline, but a
// call stuck inside a provider still ends the process shortly after --timeout.
class Watchdog {
 public:
  explicit Watchdog(double timeout_s)
      : thread_([this, timeout_s] {
          std::unique_lock lock(mutex_);
          const auto limit = std::chrono::duration<double>(timeout_s + kWatchdogGraceS);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "rdmalab-bench: error: still running %.1f s after --timeout %.1f s; aborting\n",
                         kWatchdogGraceS, timeout_s);
            std::fflush(stderr);
            _exit(kExitError);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

void WriteDocument(const Options& options, const nlohmann::json& document, const std::string& table) {
  if (!options.out_json) {
    std::fputs(table.c_str(), stdout);
    return;
  }
  if (options.out_json_file.empty() || options.out_json_file == "-") {
    std::fputs(table.c_str(), stderr);
    std::puts(document.dump(2).c_str());
    return;
  }
  std::fputs(table.c_str(), stdout);
  std::ofstream file(options.out_json_file);
  file << document.dump(2) << "\n";
  if (!file) Fail("cannot write --out_json file '", options.out_json_file, "'");
}

int Main(int argc, char** argv) {
  std::optional<Session> session;
  try {
    Options options = ParseOptions(argc, argv);
    const Mode& mode = FindMode(options.mode);
    mode.check(options);
    Watchdog watchdog(options.timeout_s);
    const std::uint64_t start_ns = MonotonicNs();
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    session.emplace(options, mode.node_roles(options));
    const Report report = mode.run(*session);
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    const double wall_s = static_cast<double>(MonotonicNs() - start_ns) / 1e9;
    const auto document = ReportJson(*session, report, Seconds(after.ru_utime) - Seconds(before.ru_utime),
                                     Seconds(after.ru_stime) - Seconds(before.ru_stime), wall_s);
    WriteDocument(session->options(), document, ReportTable(*session, report));
    session->Finish();
    if (!report.validation.value("ok", true)) {
      std::fprintf(stderr, "rdmalab-bench: error: the run's own check failed (validation): %s\n",
                   report.validation.dump().c_str());
      return kExitValidation;
    }
    return 0;
  } catch (const std::exception& error) {
    if (session) session->ReportFailure(error.what());
    std::fprintf(stderr, "rdmalab-bench: error: %s\n", error.what());
    return kExitError;
  }
}

}  // namespace
}  // namespace rdmalab::bench

int main(int argc, char** argv) { return rdmalab::bench::Main(argc, argv); }
