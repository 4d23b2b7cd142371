// A client process of any system: its --clients clients spread over --threads pinned
// threads, each thread running the client core (client_core.h) over the transports the
// system built, between the run's barriers; the process's row goes to the server through
// the rendezvous ("result"), so the server reports the aggregate with every client's count.
#pragma once

#include <memory>
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
// The row, the counts for the server and the validation, once the threads are done.
Report FinishClientProcess(Session& session, const std::vector<ClientState>& clients,
                           const std::vector<ThreadOutcome>& outcomes);
// The server's side of the same: every client process's "result" gathered into one row
// (rate over the longest process interval, every client's count) and the run's validation.
Report CollectClientResults(Session& session);

// `transports[j]` serves client j of this process. Barriers: "ready" (every side set up),
// "start", "done".
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
  RunPinnedThreads(session, threads, [&](int t) {
    RunClients(owned[t], states[t], plan, session.clock(), deadline, g_abort, outcomes[t]);
  });
  std::vector<ClientState> all;
  for (auto& group : states) {
    for (auto& state : group) all.push_back(std::move(state));
  }
  Report report = FinishClientProcess(session, all, outcomes);
  session.Barrier("done");
  return report;
}

}  // namespace rdmalab::kv
