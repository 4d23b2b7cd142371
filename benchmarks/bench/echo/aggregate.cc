// echo's aggregation: the server's row of a size (its threads' served requests, the
// clients' published rates) and the run's validation summary.
#include "benchmarks/bench/echo/run.h"
#include "benchmarks/bench/peer_rates.h"

namespace rdmalab::bench::echo {

using nlohmann::json;

ResultRow EchoRun::ServerRow(std::size_t index, std::uint32_t size) {
  ResultRow row;
  row.size_bytes = size;
  row.payload_bytes_per_op = size;
  std::uint64_t served = 0;
  for (std::size_t t = 0; t < threads_.size(); ++t) {
    served += threads_[t].served;
    row.per_thread.push_back({{"thread", t}, {"served_requests", threads_[t].served},
                              {"access_checksum", threads_[t].sink}});
  }
  SumPeerRates(session_, "/" + std::to_string(index), row);
  row.extra["served_requests"] = served;
  return row;
}

// Clients check the echoed bytes; the server only says so.
json EchoRun::Validation() const {
  if (session_.is_server()) return {{"enabled", o_.validate}, {"checked_by", "clients"}};
  return {{"enabled", o_.validate}, {"checked_messages", checked_}, {"bad_bytes", bad_bytes_},
          {"bad_messages", bad_messages_}, {"ok", bad_bytes_ == 0 && bad_messages_ == 0}};
}

}  // namespace rdmalab::bench::echo
