// The discrete-event simulator: agrees with the analytic bound when saturated, shows
// queueing latency and cache effects, runs 10 M operations in under 10 s, and its event
// loop allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <new>

#include "model/sim.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// Counting replacement of the global allocator (the whole test binary): malloc/free pair up,
// which GCC cannot see through the replaced operators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace rdmalab::model {
namespace {

const Profile& Cib() {
  static Profile p = LoadProfile("cib", DefaultProfileDir());
  return p;
}

// `clients`: the client processes (roles.client) driving the measured server.
SimConfig ConfigFor(const nlohmann::json& params, const std::string& mode, int clients,
                    Prediction* analytic = nullptr) {
  Point pt = PointFromJson({{"mode", mode}, {"roles", {{"client", clients}}}, {"params", params}});
  Prediction p = Predict(pt, Cib());
  if (analytic) *analytic = p;
  return SimConfigFor(pt, Cib(), p);
}

TEST(Sim, SaturatedThroughputMatchesTheAnalyticBound) {
  Prediction a;
  SimConfig c = ConfigFor({{"verb", "read"}, {"size", 32}, {"tx_depth", 32}, {"sim_ops", 200000}},
                          "tput", 64, &a);
  c.base_latency_ns = 1000;  // enough outstanding ops to saturate the NIC
  SimResult r = Simulate(c);
  EXPECT_NEAR(r.mops / a.mops, 1.0, 0.05) << r.mops << " vs " << a.mops;
}

TEST(Sim, LatencyGrowsWithLoadAndPercentilesAreOrdered) {
  SimConfig light = ConfigFor({{"verb", "read"}, {"size", 32}, {"tx_depth", 1}, {"sim_ops", 100000}}, "tput", 4);
  SimConfig heavy = light;
  heavy.window = 256;
  heavy.exponential = light.exponential = true;
  SimResult l = Simulate(light), h = Simulate(heavy);
  EXPECT_GT(h.lat_us_mean, 2 * l.lat_us_mean);
  EXPECT_LE(h.lat_us_p50, h.lat_us_p99);
  EXPECT_LE(h.lat_us_p99, h.lat_us_p999);
  EXPECT_LE(h.lat_us_p999, h.lat_us_max + 0.01);
}

TEST(Sim, QpContextCacheMissesSlowManyQps) {
  SimConfig c = ConfigFor({{"verb", "write"}, {"connection", "UC"}, {"size", 32}, {"sim_ops", 200000}}, "tput", 64);
  c.qp_cache_entries = 128;
  c.qp_miss_ns = 200;
  c.base_latency_ns = 500;
  c.window = 16;
  SimResult few = Simulate(c);
  c.clients = c.qps = 1024;
  c.window = 1;
  SimResult many = Simulate(c);
  EXPECT_EQ(few.qp_misses, 64u);  // compulsory misses only
  EXPECT_GT(many.qp_misses, many.completed / 2);
  EXPECT_LT(many.mops, few.mops);
}

TEST(Sim, WqeCacheOverflowCostsRereads) {
  SimConfig c = ConfigFor({{"verb", "read"}, {"size", 8}, {"direction", "outbound"}, {"qp", 14}, {"sim_ops", 200000}}, "tput", 14);
  c.wqe_cache_entries = 64;
  c.window = 2;
  SimResult small = Simulate(c);
  c.window = 64;
  SimResult big = Simulate(c);
  EXPECT_EQ(small.wqe_misses, 0u);
  EXPECT_GT(big.wqe_misses, 0u);
}

TEST(Sim, AtomicsOnOneCounterSerializeOnTheLockBucket) {
  SimConfig c = ConfigFor({{"verb", "faa"}, {"counters", 1}, {"tx_depth", 8}, {"sim_ops", 50000}}, "atomics", 16);
  SimResult one = Simulate(c);
  EXPECT_NEAR(one.mops, 1e3 / Cib().nic.atomic_lock_hold_ns, 0.05);
  c.counters = 4096;
  EXPECT_GT(Simulate(c).mops, 10 * one.mops);
}

TEST(Sim, ClientsSharingAProcessingUnitGetLessUniformityRatio) {
  SimConfig c = ConfigFor({{"verb", "read"}, {"size", 32}, {"tx_depth", 8}, {"sim_ops", 200000}},
                          "tput", 16);
  c.base_latency_ns = 100;  // PU-bound: every client's share is its PU's rate over the PU's clients
  c.pus = 8;
  SimResult even = Simulate(c);  // 2 clients per PU
  c.clients = c.qps = 12;        // 4 PUs serve 2 clients, 4 serve 1
  SimResult uneven = Simulate(c);
  EXPECT_NEAR(even.uniformity_ratio, 1.0, 0.02);
  EXPECT_NEAR(uneven.uniformity_ratio, 2.0, 0.1);
}

TEST(Sim, TheEventLoopAllocatesNothing) {
  SimConfig c = ConfigFor({{"verb", "read"}, {"size", 32}, {"tx_depth", 8}}, "tput", 32);
  c.ops = 10000;
  uint64_t before = g_allocations.load();
  Simulate(c);
  uint64_t small = g_allocations.load() - before;
  c.ops = 500000;
  before = g_allocations.load();
  Simulate(c);
  EXPECT_EQ(g_allocations.load() - before, small);  // setup only, independent of the op count
}

TEST(Sim, TenMillionOperationsTakeUnderTenSeconds) {
  SimConfig c = ConfigFor({{"verb", "read"}, {"size", 32}, {"tx_depth", 16}}, "tput", 64);
  c.ops = 10'000'000;
  // CPU time of this (single-threaded) process: the machine is shared, wall time is not ours.
  std::clock_t t0 = std::clock();
  SimResult r = Simulate(c);
  double s = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  EXPECT_EQ(r.completed, 10'000'000u);
  EXPECT_LT(s, 10.0);
  std::printf("10 M-operation point: %.2f s CPU (%.2f s wall), %llu events, %.1f Mops simulated\n", s, r.wall_s,
              static_cast<unsigned long long>(r.events), r.mops);
}

// A host engine has no PUs, PCIe or link: the simulator queues the operations at the analytic
// bottleneck (the posting threads' cores), so a key-value point simulated with softnic's profile
// keeps the analytic rate when saturated and the analytic round trip when one request is out.
TEST(Sim, HostEngineQueuesAtTheAnalyticBottleneck) {
  static Profile softnic = LoadProfile("softnic", DefaultProfileDir());
  auto config = [&](int window, Prediction* analytic) {
    Point pt = PointFromJson({{"mode", "kv"}, {"roles", {{"client", 1}}},
                              {"params", {{"system", "herd"}, {"window", window}, {"sim_ops", 100000}}}});
    *analytic = Predict(pt, softnic);
    return SimConfigFor(pt, softnic, *analytic);
  };
  Prediction a;
  SimResult one = Simulate(config(1, &a));
  EXPECT_NEAR(one.lat_us_mean / a.lat_us, 1.0, 0.05) << one.lat_us_mean << " vs " << a.lat_us;
  SimResult many = Simulate(config(64, &a));
  EXPECT_NEAR(many.mops / a.mops, 1.0, 0.05) << many.mops << " vs " << a.mops;
}

}  // namespace
}  // namespace rdmalab::model
