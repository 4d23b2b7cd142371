// CPU costs inside rdmalab-bench's measurement loops that are not the provider's: a latency
// sample (TSC read + histogram record) must stay a few ns so that recording every op does
// not change what is measured.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "rdma/clock.h"
#include "rdma/histogram.h"

namespace {

void BM_TscRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(rdmalab::ReadTsc());
}
BENCHMARK(BM_TscRead);

void BM_HistogramRecord(benchmark::State& state) {
  // Latencies spread over four decades, so that the record touches many buckets.
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> latency(7.0, 1.2);
  std::vector<std::uint64_t> samples(4096);
  for (auto& sample : samples) sample = static_cast<std::uint64_t>(latency(rng));
  auto histogram = std::make_unique<rdmalab::LatencyHistogram>();
  std::size_t i = 0;
  for (auto _ : state) {
    histogram->Record(samples[i++ & (samples.size() - 1)]);
  }
  benchmark::DoNotOptimize(histogram->Count());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_HistogramRecord);

void BM_LatencySample(benchmark::State& state) {
  // What the tput loop does per signaled completion: read the TSC, convert, record.
  const auto clock = rdmalab::TscClock::Calibrate(10);
  auto histogram = std::make_unique<rdmalab::LatencyHistogram>();
  std::uint64_t posted_at = clock.Now();
  for (auto _ : state) {
    const std::uint64_t now = clock.Now();
    histogram->Record(clock.TicksToNs(now - posted_at));
    posted_at = now;
  }
  benchmark::DoNotOptimize(histogram->Count());
}
BENCHMARK(BM_LatencySample);

}  // namespace

BENCHMARK_MAIN();
