#include "rdma/program.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "rdma/error.h"

namespace rdmalab {
namespace {

constexpr double kWatchdogGraceS = 5.0;

}  // namespace

Watchdog::Watchdog(const char* program, double timeout_s)
    : thread_([this, program, timeout_s] {
        std::unique_lock lock(mutex_);
        const auto limit = std::chrono::duration<double>(timeout_s + kWatchdogGraceS);
        if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
          std::fprintf(stderr, "%s: error: still running %.1f s after --timeout %.1f s; aborting\n", program,
                       kWatchdogGraceS, timeout_s);
          std::fflush(stderr);
          _exit(kExitError);
        }
      }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
  thread_.join();
}

void WriteDocument(bool out_json, const std::string& out_json_file, const nlohmann::json& document,
                   const std::string& table) {
  if (!out_json) {
    std::fputs(table.c_str(), stdout);
    return;
  }
  if (out_json_file.empty() || out_json_file == "-") {
    std::fputs(table.c_str(), stderr);
    std::puts(document.dump(2).c_str());
    return;
  }
  std::fputs(table.c_str(), stdout);
  std::ofstream file(out_json_file);
  file << document.dump(2) << "\n";
  if (!file) Fail("cannot write --out_json file '", out_json_file, "'");
}

int ExitAfter(const char* program, const std::exception& error) {
  const bool unsupported = dynamic_cast<const Unsupported*>(&error) != nullptr;
  std::fprintf(stderr, "%s: %s: %s\n", program, unsupported ? "unsupported" : "error", error.what());
  return unsupported ? kExitUnsupported : kExitError;
}

std::string FailureReason(const std::exception& error) {
  return dynamic_cast<const Unsupported*>(&error) != nullptr ? std::string("unsupported: ") + error.what()
                                                              : std::string(error.what());
}

double CpuSeconds(bool user) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const timeval& t = user ? usage.ru_utime : usage.ru_stime;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

nlohmann::json CpuJson(double user_s, double system_s, double wall_s) {
  return {{"user_s", user_s},
          {"system_s", system_s},
          {"wall_s", wall_s},
          {"utilization", wall_s > 0 ? (user_s + system_s) / wall_s : 0.0}};
}

}  // namespace rdmalab
