#include "benchmarks/bench/peer_rates.h"

#include <algorithm>

namespace rdmalab::bench {

nlohmann::json PeerRate(const std::string& peer, std::uint64_t ops, double duration_s) {
  return {{"peer", peer}, {"ops", ops}, {"mops", duration_s > 0 ? ops / duration_s / 1e6 : 0.0}};
}

void PublishRate(Session& session, const std::string& suffix, const ResultRow& row) {
  session.Put("result" + suffix, {{"ops", row.ops}, {"duration_s", row.duration_s}});
}

void SumPeerRates(Session& session, const std::string& suffix, ResultRow& row) {
  for (const auto& peer : session.PeerNames()) {
    const nlohmann::json result = session.Get(peer, "result" + suffix);
    const auto ops = result.at("ops").get<std::uint64_t>();
    const double duration = result.at("duration_s").get<double>();
    row.ops += ops;
    row.duration_s = std::max(row.duration_s, duration);
    row.per_peer.push_back(PeerRate(peer, ops, duration));
  }
}

}  // namespace rdmalab::bench
