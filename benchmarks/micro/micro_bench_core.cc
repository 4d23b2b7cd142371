// CPU costs inside rdmalab-bench's measurement loops that are not the provider's: a latency
// sample (TSC read + histogram record) and a keyed READ's address (tput --distribution) must
// stay a few ns so that doing them for every op does not change what is measured; a
// sequencer's or an ECHO client's work per answer is what the model charges those clients
// beside their verbs.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "benchmarks/bench/echo_client.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/key_addresses.h"
#include "benchmarks/bench/sequencer_client.h"
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

// tput --distribution's post path: the slot of the next keyed READ over the default 4 Mi keys.
// Args: Zipf (0: uniform), clustered (0: unclustered).
void BM_KeyedReadSlot(benchmark::State& state) {
  const bool zipf = state.range(0) != 0, clustered = state.range(1) != 0;
  auto addresses = rdmalab::bench::KeyAddresses({std::uint64_t{1} << 22, zipf, 0.99, clustered, 1}).Stream(0);
  for (auto _ : state) benchmark::DoNotOptimize(addresses.NextSlot());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_KeyedReadSlot)->ArgNames({"zipf", "clustered"})->Args({0, 1})->Args({0, 0})->Args({1, 1})->Args({1, 0});

// A sequencer client's own work per answer with the network taken out (the answers arrive in
// request order, one per poll, carrying what a server handing out integers in order gives one
// of two clients): the request's window slot and time, the poll's clock read, the answer's
// latency sample, its bit in the exactly-once bitmap, the window's count. One iteration is a
// whole hand-out of validate-sequencer's --count over rdmalab-bench's default window, as
// SequencerRun::RunClient runs it. `run_all.py calibrate` reads it as the model's
// cpu.sequencer_client_answer_ns.
void BM_SequencerClientAnswer(benchmark::State& state) {
  constexpr std::uint64_t kCount = 400000;  // experiments/calibrate/validate-sequencer.yaml
  constexpr std::uint32_t kClients = 2, kWindow = 128;
  const auto clock = rdmalab::TscClock::Calibrate(10);
  std::uint64_t answers = 0;
  for (auto _ : state) {
    auto latency = std::make_unique<rdmalab::LatencyHistogram>();
    rdmalab::bench::SequencerClientWindow client(kWindow, kCount, clock, *latency);
    std::array<std::uint32_t, kWindow> slots_in_flight{};
    std::uint64_t oldest = 0, newest = 0, next_integer = 0;
    while (!client.Done()) {
      while (client.CanPost()) slots_in_flight[newest++ % kWindow] = client.TakeSlot(clock.Now());
      client.AnswerSlot(slots_in_flight[oldest++ % kWindow], next_integer, clock.Now());
      next_integer += kClients;
      ++answers;
    }
    benchmark::DoNotOptimize(client.stats().received);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(answers));
}
BENCHMARK(BM_SequencerClientAnswer)->Unit(benchmark::kMillisecond);

// An ECHO client's own work per answer with the network taken out (the answers arrive in
// request order, one per poll): the poll's clock read, the answer's latency sample, the next
// request's number and time on the freed slot, the measured interval's check. One iteration is
// kAnswers answers over rdmalab-bench's default window, as EchoRun::MeasureClient runs them.
// `run_all.py calibrate` reads it as the model's cpu.echo_client_answer_ns.
void BM_EchoClientAnswer(benchmark::State& state) {
  constexpr std::uint32_t kWindow = 128;
  constexpr std::uint64_t kAnswers = 200000;
  const auto clock = rdmalab::TscClock::Calibrate(10);
  std::uint64_t answers = 0;
  for (auto _ : state) {
    rdmalab::ResultRow row;
    row.latency_ns = std::make_unique<rdmalab::LatencyHistogram>();
    rdmalab::bench::EchoClientWindow client(kWindow, clock, *row.latency_ns);
    std::uint64_t seq = 0;
    const std::uint64_t start = clock.Now();
    for (std::uint32_t slot = 0; slot < kWindow; ++slot) client.Post(slot, seq++, clock.Now());
    rdmalab::bench::MeasuredInterval interval(start, 0, 0, kAnswers);
    std::uint32_t oldest = 0;
    while (client.in_flight() > 0) {
      const std::uint64_t now = clock.Now();
      const std::uint32_t slot = oldest++ % kWindow;
      client.Answer(slot, now, interval.counting());
      if (!interval.stopping()) client.Post(slot, seq++, clock.Now());
      interval.Update(now, client.measured(), clock, row);
    }
    answers += seq;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(answers));
}
BENCHMARK(BM_EchoClientAnswer)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
