// How a process measuring a rate hands it to the one reporting the aggregate: each
// measuring peer publishes its ops and window per size through the rendezvous, and the
// aggregator sums them with one per_peer entry each (echo, sequencer, tput).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "benchmarks/bench/session.h"
#include "rdma/result_row.h"

namespace rdmalab::bench {

// The per_peer entry of one peer's rate.
nlohmann::json PeerRate(const std::string& peer, std::uint64_t ops, double duration_s);

// Publishes `row`'s ops and duration as this process's result of the size `suffix` names ("/N").
void PublishRate(Session& session, const std::string& suffix, const ResultRow& row);

// Adds every peer's published result of the size to `row`: their ops, the longest of their
// windows, one per_peer entry each.
void SumPeerRates(Session& session, const std::string& suffix, ResultRow& row);

}  // namespace rdmalab::bench
