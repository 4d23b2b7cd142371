// A client process of any system: its --clients clients spread over --threads pinned
// threads, each thread running the client core (client_core.h) over the transports the
// system built, between the run's barriers; the process's row goes to the server through
// the rendezvous ("result"), so the server reports the aggregate with every client's count.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kv/core/client_core.h"
#include "kv/core/report.h"
#include "kv/core/session.h"
#include "rdma/error.h"

namespace rdmalab::kv {

WorkloadConfig WorkloadOf(const Options& options);
ClientPlan PlanOf(const Options& options);
// This process's clients' global ids: index * --clients + j.
std::uint32_t GlobalClientId(const Session& session, int j);
// A dead server is noticed after this many retries unanswered at the least (--dead-after-ms).
constexpr std::uint64_t kRetriesBeforeDead = 5;
// How often a standalone client's watch on the rendezvous connection wakes to see the run end.
constexpr int kRendezvousWatchMs = 50;

// The row, the counts for the server and the validation, once the threads are done. A run
// cut short (`cut_short` non-empty: the error line) gives nothing to the server, which is gone.
Report FinishClientProcess(Session& session, const std::vector<ClientState>& clients,
                           const std::vector<ThreadOutcome>& outcomes, const std::string& cut_short);
// The error line of a run cut short after `after_s` seconds: the server named, the reason.
std::string CutShortLine(const Session& session, const std::string& reason, double after_s);
// The server's side of the same: every client process's "result" gathered into one row
// (rate over the longest process interval, every client's count) and the run's validation.
Report CollectClientResults(Session& session);

// `transports[j]` serves client j of this process. Barriers: "ready" (every side set up),
// "start", "done". While the clients run, a watcher waits on the rendezvous connection,
// whose end means a standalone server's end; with the transports' own signs (no answers,
// failed completions) it cuts the run short, and the report says so (Report::cut_short).
template <typename Transport>
Report RunClientProcess(Session& session, std::vector<std::unique_ptr<Transport>>& transports) {
  const Options& o = session.options();
  const ClientPlan plan = PlanOf(o);
  const WorkloadConfig workload = WorkloadOf(o);
  const int threads = o.threads;
  std::vector<std::vector<ClientState>> states(threads);
  std::vector<std::vector<std::unique_ptr<Transport>>> owned(threads);
  for (int j = 0; j < o.clients; ++j) {
    states[j % threads].emplace_back(workload, GlobalClientId(session, j), plan);
    owned[j % threads].push_back(std::move(transports[j]));
  }
  std::vector<ThreadOutcome> outcomes(threads);
  session.Barrier("ready");
  session.Barrier("start");
  const std::uint64_t deadline = session.DeadlineTicks();
  const auto started = std::chrono::steady_clock::now();
  RunCut cut;
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished.load(std::memory_order_acquire)) {
      if (session.RendezvousClosed(kRendezvousWatchMs)) {
        cut.Cut("its rendezvous connection closed (the server's process ended)");
        return;
      }
    }
  });
  RunPinnedThreads(session, threads, [&](int t) {
    RunClients(owned[t], states[t], plan, session.clock(), deadline, cut, outcomes[t]);
  });
  finished.store(true, std::memory_order_release);
  watcher.join();
  const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<ClientState> all;
  for (auto& group : states) {
    for (auto& state : group) all.push_back(std::move(state));
  }
  const std::string cut_short = cut.cut() ? CutShortLine(session, cut.reason(), after_s) : "";
  Report report = FinishClientProcess(session, all, outcomes, cut_short);
  if (cut_short.empty()) session.Barrier("done");
  return report;
}

}  // namespace rdmalab::kv
