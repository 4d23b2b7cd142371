#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

#include "rdma/affinity.h"
#include "rdma/clock.h"
#include "rdma/error.h"
#include "rdma/histogram.h"
#include "rdma/rendezvous.h"
#include "rdma/send_ring.h"

namespace rdmalab {
namespace {

TEST(LatencyHistogram, ExactBelowTwiceTheSubBucketCount) {
  for (std::uint64_t v = 0; v < 2 * LatencyHistogram::kSubBuckets; ++v) {
    EXPECT_EQ(LatencyHistogram::BucketOf(v), v);
    EXPECT_EQ(LatencyHistogram::BucketLow(v), v);
  }
}

TEST(LatencyHistogram, BucketsTileTheValueRange) {
  // Every bucket starts where the previous one ended, up to 2^63.
  for (std::size_t b = 1; b < LatencyHistogram::kBucketCount; ++b) {
    EXPECT_EQ(LatencyHistogram::BucketLow(b), LatencyHistogram::BucketLow(b - 1) + LatencyHistogram::BucketWidth(b - 1))
        << "bucket " << b;
    EXPECT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::BucketLow(b)), b);
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(~std::uint64_t{0}), LatencyHistogram::kBucketCount - 1);
}

TEST(LatencyHistogram, PercentilesWithinRelativeErrorOfSortedSamples) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(8.0, 1.5);  // ~3 us median, long tail
  std::vector<std::uint64_t> samples;
  LatencyHistogram h;
  for (int i = 0; i < 200'000; ++i) {
    samples.push_back(static_cast<std::uint64_t>(latency(rng)));
    h.Record(samples.back());
  }
  std::sort(samples.begin(), samples.end());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * samples.size())) - 1;
    const double truth = static_cast<double>(samples[rank]);
    EXPECT_NEAR(static_cast<double>(h.Percentile(p)), truth, truth / LatencyHistogram::kSubBuckets + 1) << p;
  }
  EXPECT_EQ(h.Min(), samples.front());
  EXPECT_EQ(h.Max(), samples.back());
  EXPECT_EQ(h.Percentile(100), samples.back());
  double sum = 0, squares = 0;
  for (auto s : samples) sum += static_cast<double>(s);
  const double mean = sum / samples.size();
  for (auto s : samples) squares += (s - mean) * (s - mean);
  EXPECT_NEAR(h.Mean(), mean, mean * 1e-9);
  EXPECT_NEAR(h.Stdev(), std::sqrt(squares / (samples.size() - 1)), 1e-6 * mean);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (std::uint64_t v = 1; v < 100'000; v += 7) {
    (v % 3 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.Count(), all.Count());
  for (double p : {10.0, 50.0, 99.0}) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
  EXPECT_EQ(a.Min(), all.Min());
  EXPECT_EQ(a.Max(), all.Max());
}

TEST(LatencyHistogram, EmptyReportsZeros) {
  LatencyHistogram h;
  EXPECT_EQ(h.Count(), 0u);
  EXPECT_EQ(h.Percentile(50), 0u);
  EXPECT_EQ(h.Min(), 0u);
  EXPECT_EQ(h.Mean(), 0.0);
}

TEST(TscClock, AgreesWithMonotonicClock) {
  const TscClock clock = TscClock::Calibrate(20);
  const std::uint64_t ns0 = MonotonicNs();
  const std::uint64_t t0 = clock.Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const double tsc_ns = static_cast<double>(clock.TicksToNs(clock.Now() - t0));
  const double mono_ns = static_cast<double>(MonotonicNs() - ns0);
  EXPECT_NEAR(tsc_ns / mono_ns, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(clock.TicksToNs(clock.NsToTicks(1'000'000))), 1e6, 2.0);
}

TEST(CpuList, ParsesRangesAndRejectsGarbage) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("5"), (std::vector<int>{5}));
  EXPECT_THROW(ParseCpuList("3-1"), Error);
  EXPECT_THROW(ParseCpuList("a"), Error);
  EXPECT_FALSE(CpusOfNode(-1).empty());
}

TEST(HostPort, SplitsAndValidates) {
  EXPECT_EQ(ParseHostPort("10.0.0.1:7000"), (std::pair<std::string, std::uint16_t>{"10.0.0.1", 7000}));
  EXPECT_EQ(ParseHostPort("[::1]:80").first, "::1");
  EXPECT_THROW(ParseHostPort("host"), Error);
  EXPECT_THROW(ParseHostPort("host:0"), Error);
  EXPECT_THROW(ParseHostPort("host:99999"), Error);
}

class Rendezvous : public ::testing::Test {
 protected:
  std::uint16_t port_ = 0;
  void SetUp() override {
    // A port the kernel picks: concurrent tests and ephemeral ports never collide.
    server_ = std::make_unique<RendezvousServer>("127.0.0.1", 0, "secret");
    port_ = server_->port();
  }
  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(Rendezvous, PutGetBarrierBye) {
  auto a = RendezvousClient::Connect("127.0.0.1", port_, "secret", "server", 0, 2000);
  std::thread other([&] {
    auto b = RendezvousClient::Connect("127.0.0.1", port_, "secret", "client", 0, 2000);
    b.Put("client/0/endpoint", {{"qpn", 7}});
    EXPECT_EQ(b.Get("server/0/config", 2000).at("x"), 1);
    b.Barrier("start", 2, 2000);
    b.Bye();
  });
  a.Put("server/0/config", {{"x", 1}});
  EXPECT_EQ(a.Get("client/0/endpoint", 2000).at("qpn"), 7);
  a.Barrier("start", 2, 2000);
  other.join();
  a.Bye();
  EXPECT_TRUE(server_->WaitUntilAllLeft(1000));
}

TEST_F(Rendezvous, BadTokenAndDuplicatesAndTimeouts) {
  EXPECT_THROW(RendezvousClient::Connect("127.0.0.1", port_, "wrong", "client", 0, 2000), Error);
  auto a = RendezvousClient::Connect("127.0.0.1", port_, "secret", "client", 0, 2000);
  EXPECT_THROW(RendezvousClient::Connect("127.0.0.1", port_, "secret", "client", 0, 2000), Error);
  try {
    a.Get("never", 50);
    FAIL() << "get of a missing key returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timeout after 50 ms waiting for key never"), std::string::npos) << e.what();
  }
  try {
    a.Barrier("lonely", 2, 50);
    FAIL() << "barrier with one of two returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 2 arrived"), std::string::npos) << e.what();
  }
  a.Put("k", 1);
  EXPECT_THROW(a.Put("k", 2), Error);
}

TEST_F(Rendezvous, DisconnectWithoutByeFailsEveryoneFast) {
  auto waiter = RendezvousClient::Connect("127.0.0.1", port_, "secret", "server", 0, 2000);
  {
    auto dying = RendezvousClient::Connect("127.0.0.1", port_, "secret", "client", 3, 2000);
  }  // closes without bye
  const std::uint64_t start = MonotonicNs();
  try {
    waiter.Barrier("done", 2, 10'000);
    FAIL() << "barrier survived a dead participant";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("participant client/3 failed: disconnected"), std::string::npos) << e.what();
  }
  EXPECT_LT(MonotonicNs() - start, 2'000'000'000u);
}

TEST_F(Rendezvous, ClosedByServerOnlyOnceTheServerIsGone) {
  auto client = RendezvousClient::Connect("127.0.0.1", port_, "secret", "client", 0, 2000);
  EXPECT_FALSE(client.ClosedByServer(20));  // open and quiet: no request, no reply
  server_.reset();  // a standalone server's process ending
  EXPECT_TRUE(client.ClosedByServer(2000));
}

TEST(SendRing, SignalInOrderSignalsWhatSignaledSays) {
  for (std::uint32_t every : {1u, 3u, 64u}) {
    SendRing ring;
    ring.signal_every = every;
    for (std::uint64_t seq = 0; seq < 1000; ++seq) EXPECT_EQ(ring.SignalInOrder(seq), ring.Signaled(seq)) << every << " " << seq;
  }
}

TEST(RendezvousClientAlone, NoServerFailsAtTheDeadline) {
  const std::uint64_t start = MonotonicNs();
  EXPECT_THROW(RendezvousClient::Connect("127.0.0.1", 1, "t", "client", 0, 200), Error);
  EXPECT_LT(MonotonicNs() - start, 1'000'000'000u);
}

}  // namespace
}  // namespace rdmalab
