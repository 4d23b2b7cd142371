// sequencer's rows: the server's (its workers' hand-out, the clients' published rates, the
// counter's final value) and a client's (its rate, latency and what it received).
#include <cstring>

#include "benchmarks/bench/peer_rates.h"
#include "benchmarks/bench/sequencer/run.h"

namespace rdmalab::bench::sequencer {

using nlohmann::json;

ResultRow SequencerRun::ServerRow() {
  ResultRow row;
  row.size_bytes = kIntegerBytes;
  row.payload_bytes_per_op = kIntegerBytes;
  for (std::size_t t = 0; t < workers_.size(); ++t) {
    const Worker& worker = workers_[t];
    row.per_thread.push_back({{"thread", t}, {"handed_out", worker.handed_out}, {"batches", worker.batches},
                              {"mean_batch", worker.batches ? double(worker.handed_out) / double(worker.batches) : 0.0},
                              {"header_only_responses", worker.header_only}});
  }
  SumPeerRates(session_, "/0", row);
  std::uint64_t counter = counter_.load();
  if (design_ == Design::kAtomics) std::memcpy(&counter, exposed_.data(), sizeof(counter));
  row.extra["counter_final"] = counter;
  // The baseline answers every request with a post of its own, whatever --batch says.
  row.extra["responses_per_post_max"] = design_ == Design::kHerd ? 1 : o_.batch;
  return row;
}

void SequencerRun::AddClientCounts(ResultRow& row) const {
  const SequencerClientStats& stats = client_.stats();
  row.extra["integers_received"] = stats.received;
  row.extra["local_duplicates"] = stats.local_duplicates;
  row.extra["exhausted_answers"] = stats.exhausted;
  if (design_ == Design::kSpec) {
    row.extra["header_only_answers"] = stats.header_only;
    row.extra["regular_answers"] = stats.regular;
  }
}

}  // namespace rdmalab::bench::sequencer
