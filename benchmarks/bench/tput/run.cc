// tput and atomics as modes: their option checks, and the run of every payload size, each
// measured between barriers by the loops of loop.cc and reported by aggregate.cc.
#include <exception>
#include <functional>
#include <thread>

#include "benchmarks/bench/tput/run.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace tput {

using nlohmann::json;

ResultRow TputRun::Measure(std::size_t size_index, std::uint32_t size) {
  const Options& o = session_.options();
  const std::string suffix = "/" + std::to_string(size_index);
  passive_stop_.store(false);
  std::exception_ptr passive_error;
  std::thread passive_runner;
  const bool receiving = plan_.passive && plan_.kind == VerbKind::kSend;
  if (receiving) {
    passive_runner = std::thread([&] {
      try {
        RunPinnedThreads(session_, o.threads, [&](int t) { RunPassive(passive_[static_cast<std::size_t>(t)], size); });
      } catch (...) {
        passive_error = std::current_exception();
      }
    });
  }
  const auto stop_receivers = [&] {
    passive_stop_.store(true);
    if (passive_runner.joinable()) passive_runner.join();
  };
  struct StopOnExit {
    const std::function<void()> stop;
    ~StopOnExit() { stop(); }
  } stop_on_exit{stop_receivers};

  session_.Barrier("start" + suffix);
  ResultRow row;
  row.size_bytes = size;
  row.payload_bytes_per_op = IsAtomicKind(plan_.kind) ? 8 : size;
  json mine = json::object();
  if (plan_.active) {
    RunPinnedThreads(session_, o.threads, [&](int t) { RunActive(active_[static_cast<std::size_t>(t)], t, size); });
    mine = SumActiveThreads(size, row);
    session_.Put("result" + suffix, mine);
  } else {
    row.rate_measured = false;
  }
  session_.Barrier("done" + suffix);
  stop_receivers();
  if (passive_error) std::rethrow_exception(passive_error);

  const json active_results = GatherActiveResults(suffix, mine);
  SumActiveProcesses(active_results, mine, row);
  if (receiving) CountLoss(active_results, row);
  if (o.validate && plan_.passive) row.extra["validation"] = ValidatePassive(size, active_results);
  return row;
}

Report TputRun::Run() {
  const Options& o = session_.options();
  Setup();
  Report report;
  bool valid = true;
  json checks = json::array();
  for (std::size_t i = 0; i < o.sizes.size(); ++i) {
    const std::uint32_t size = o.sizes[i];
    if (o.validate && plan_.active) FillSourceSlots(size);
    report.rows.push_back(Measure(i, size));
    ResultRow& row = report.rows.back();
    if (plan_.active || session_.is_aggregator()) {
      if (report.pcie_modeled.is_null()) report.pcie_modeled = {{"rows", json::array()}};
      report.pcie_modeled["rows"].push_back(ModeledPcieRow(size, row));
    }
    if (o.validate && plan_.active && plan_.kind == VerbKind::kRead) {
      row.extra["validation"] = ValidateActiveReads(size);
    }
    if (row.extra.contains("validation")) {
      checks.push_back(row.extra["validation"]);
      valid = valid && row.extra["validation"].at("ok").get<bool>();
    }
  }
  session_.Barrier("finished");
  report.validation = {{"enabled", o.validate}, {"checks", checks}, {"ok", valid}};
  if (plan_.kind == VerbKind::kSend && plan_.qp_type == IBV_QPT_UD) {
    report.notes.push_back("UD is unreliable: rates count SENDs completed by the sender; see loss_fraction");
  }
  return report;
}

}  // namespace tput

void CheckTput(Options& options) {
  if (options.verb.empty()) options.verb = "write";
  CheckThroughputOptions(options);
  DefaultSizes(options, 64);
}

void CheckAtomics(Options& options) {
  if (options.verb.empty()) options.verb = "faa";
  if (!IsAtomic(options.verb)) Fail("mode atomics with --verb ", options.verb, ": valid verbs are cas, faa");
  if (options.direction != "inbound") Fail("mode atomics with --direction ", options.direction, ": atomics run inbound");
  CheckThroughputOptions(options);
  DefaultSizes(options, 8);
}

Report RunTput(Session& session) { return tput::TputRun(session).Run(); }

}  // namespace rdmalab::bench
