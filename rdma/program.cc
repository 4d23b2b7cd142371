#include "rdma/program.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "rdma/error.h"

#ifndef RDMALAB_VERSION
#define RDMALAB_VERSION "unknown"
#endif

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

CpuMeter::CpuMeter() : start_ns_(MonotonicNs()), user_s_(CpuSeconds(true)), system_s_(CpuSeconds(false)) {}

nlohmann::json CpuMeter::Json() const {
  const double wall_s = static_cast<double>(MonotonicNs() - start_ns_) / 1e9;
  const double user_s = CpuSeconds(true) - user_s_, system_s = CpuSeconds(false) - system_s_;
  return {{"user_s", user_s},
          {"system_s", system_s},
          {"wall_s", wall_s},
          {"utilization", wall_s > 0 ? (user_s + system_s) / wall_s : 0.0}};
}

nlohmann::json DocumentJson(const char* program, const char* schema_version, const Participant& participant,
                            bool hugepages, const RunReport& report, const nlohmann::json& cpu, nlohmann::json own) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : report.rows) rows.push_back(RowJson(row));
  own.update({{"schema_version", schema_version},
              {"tool", {{"name", program}, {"version", RDMALAB_VERSION}}},
              {"backend", "measured"},
              {"role", participant.role()},
              {"index", participant.index()},
              {"environment", EnvironmentJson(participant, hugepages)},
              {"results", rows},
              {"cpu", cpu},
              {"validation", report.validation},
              {"notes", report.notes}});
  return own;
}

std::string TableText(const std::string& heading, const RunReport& report,
                      const std::function<std::string(const ResultRow&)>& peer_label,
                      const std::string& validation_line) {
  std::string out = heading + RowTableHeader();
  for (const auto& row : report.rows) out += RowTableLine(row);
  for (const auto& row : report.rows) out += PerPeerLine(row, peer_label(row));
  out += validation_line;
  for (const auto& note : report.notes) out += "# " + note.get<std::string>() + "\n";
  return out;
}

}  // namespace rdmalab
