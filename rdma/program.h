// What the main() of every rdmalab program shares: a watchdog that ends a process stuck
// past its deadline, and writing the run's JSON document and people's table where
// --out_json says.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

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
// The "cpu" block of a document: user, system and wall seconds and their utilization.
nlohmann::json CpuJson(double user_s, double system_s, double wall_s);

}  // namespace rdmalab
