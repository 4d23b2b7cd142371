// The one program core of rdmalab-bench and rdmalab-kv: parse, check, watchdog, join, run
// and report (RunProgram), a watchdog that ends a process stuck past its deadline, the
// parts of the JSON document and of people's table every program shares, and writing them
// where --out_json says.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdma/clock.h"
#include "rdma/flags.h"
#include "rdma/result_row.h"
#include "rdma/session.h"

namespace rdmalab {

constexpr int kExitError = 1;
constexpr int kExitValidation = 2;
constexpr int kExitUnsupported = 3;  // a valid request this host or provider cannot serve (rdma/error.h Unsupported)

// The last line of defence for "nothing hangs": every wait has its own deadline, but a
// call stuck inside a provider still ends the process shortly after --timeout.
class Watchdog {
 public:
  Watchdog(const char* program, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

// --out_json absent: the table on stdout. "-" or empty: the document on stdout, the table on
// stderr. A file name: the document there, the table on stdout.
void WriteDocument(bool out_json, const std::string& out_json_file, const nlohmann::json& document,
                   const std::string& table);

// The end of a program stopped by an exception: one line on stderr, "PROGRAM: error: ..."
// and kExitError, or "PROGRAM: unsupported: ..." and kExitUnsupported for an Unsupported.
int ExitAfter(const char* program, const std::exception& error);
// What a program tells its peers through the rendezvous: the message, marked "unsupported: "
// for an Unsupported so that theirs says why.
std::string FailureReason(const std::exception& error);

double CpuSeconds(bool user);  // this process's user or system CPU time so far

// CPU and wall time from construction on, as the document's "cpu" block: user, system and
// wall seconds and their utilization.
class CpuMeter {
 public:
  CpuMeter();
  nlohmann::json Json() const;

 private:
  std::uint64_t start_ns_;
  double user_s_;
  double system_s_;
};

// A participant of a program with the options it was started with.
template <typename Options>
class ProgramSession : public Participant {
 public:
  ProgramSession(Options options, const JoinSpec& join) : Participant(options, join), options_(std::move(options)) {}
  const Options& options() const { return options_; }

 private:
  Options options_;
};

// What a run measured, kept apart from how it is printed: rows of results with per-thread
// and per-peer breakdowns, the run's own check of what it moved, and notes. A program's
// Report adds its own parts.
struct RunReport {
  std::vector<ResultRow> rows;
  nlohmann::json validation = {{"enabled", false}};
  nlohmann::json notes = nlohmann::json::array();
  // Non-empty: the run ended early for this reason (a peer died); what it measured until
  // then is written, marked by the program's own fields, and the program fails with it.
  std::string cut_short;
};

// What the document of every program holds besides `own` (its mode, config and own parts):
// schema_version, tool, backend, role, index, environment, results, cpu, validation, notes.
nlohmann::json DocumentJson(const char* program, const char* schema_version, const Participant& participant,
                            bool hugepages, const RunReport& report, const nlohmann::json& cpu, nlohmann::json own);
// People's table: `heading`, a row per result and its per-peer line (`peer_label` of the
// row), `validation_line` when validation is on, and the notes.
std::string TableText(const std::string& heading, const RunReport& report,
                      const std::function<std::string(const ResultRow&)>& peer_label,
                      const std::string& validation_line);

// What a program plugs into the core: its names, its table's entry (a mode, a system) and
// the parts of its document and table that are its own.
template <typename Options, typename Session, typename Entry, typename Report>
struct ProgramSpec {
  const char* name;
  const char* schema_version;
  const char* validation_failure;  // the error line's words when the run's own check failed
  const CommandLine<Options>& (*command_line)();
  const Entry& (*resolve)(Options& options);  // the entry, every check before a resource passed
  JoinSpec (*join)(const Options& options, const Entry& entry);
  Report (*run)(const Entry& entry, Session& session);
  nlohmann::json (*fields)(const Session& session, const Report& report);  // mode, config and its own parts
  std::string (*heading)(const Session& session);
  std::string (*peer_label)(const ResultRow& row);
  std::string (*validation_line)(const nlohmann::json& validation);
};

// Parses, checks, arms the watchdog, joins the run, runs the entry, reports. Every failure
// ends as one line "PROGRAM: error: ..." and a non-zero exit; peers learn of it through the
// rendezvous so that they fail fast instead of waiting for their deadlines.
template <typename Options, typename Session, typename Entry, typename Report>
int RunProgram(const ProgramSpec<Options, Session, Entry, Report>& program, int argc, char** argv) {
  std::optional<Session> session;
  try {
    Options options = ParseCommandLine(program.command_line(), argc, argv);
    const Entry& entry = program.resolve(options);
    Watchdog watchdog(program.name, options.timeout_s);
    const CpuMeter meter;
    session.emplace(options, program.join(options, entry));
    const Report report = program.run(entry, *session);
    const nlohmann::json document = DocumentJson(program.name, program.schema_version, *session,
                                                 options.use_hugepages, report, meter.Json(),
                                                 program.fields(*session, report));
    const std::string validation_line =
        report.validation.value("enabled", false) ? program.validation_line(report.validation) : "";
    WriteDocument(options.out_json, options.out_json_file, document,
                  TableText(program.heading(*session), report, program.peer_label, validation_line));
    if (!report.cut_short.empty()) {
      session->ReportFailure(report.cut_short);
      std::fprintf(stderr, "%s: error: %s\n", program.name, report.cut_short.c_str());
      return kExitError;
    }
    session->Finish();
    if (!report.validation.value("ok", true)) {
      std::fprintf(stderr, "%s: error: %s: %s\n", program.name, program.validation_failure,
                   report.validation.dump().c_str());
      return kExitValidation;
    }
    return 0;
  } catch (const std::exception& error) {
    if (session) session->ReportFailure(FailureReason(error));
    return ExitAfter(program.name, error);
  }
}

}  // namespace rdmalab
