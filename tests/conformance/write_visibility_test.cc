// WRITE visibility order (HERD-style request polling): a poller in another process spins on
// the last 8 bytes of a multi-cacheline message that one writer overwrites kWrites times;
// whenever it sees sequence s there, every earlier word already holds s or later. A torn
// message (an earlier word older than the last) fails the test.
#include <atomic>
#include <cstring>

#include "process_fixture.h"

namespace conformance {
namespace {

constexpr uint64_t kWrites = 1'000'000;
constexpr size_t kMessageBytes = 512;  // 8 cache lines
constexpr size_t kWords = kMessageBytes / sizeof(uint64_t);
constexpr uint32_t kBatch = 64;  // WRs per ibv_post_send, the last one signaled
constexpr uint32_t kBatchesInFlight = 2;
// Writing stops after kWrites or this long, whichever comes first: what the test checks is
// that no torn message is ever seen, not a rate (rxe under TCG emulation manages ~7k per s).
constexpr std::chrono::milliseconds kWriteBudgetMs{45'000};
// Writing goes on at least this long, so that a poller starved of CPU on a loaded machine
// still gets scheduled while the writes happen.
constexpr std::chrono::milliseconds kMinWriteMs{1'500};
constexpr uint64_t kMinObservations = 100;  // fewer means the poller never raced the writer
static_assert(kWrites % kBatch == 0);

struct PollerReport {
  uint64_t observations;
  uint64_t torn;
  uint64_t first_torn_seq;
  uint64_t first_torn_word;
  uint64_t first_torn_value;
  uint64_t final_value;
};

CONFORMANCE_HELPER(visibility_poller) {
  if (args.size() != 1) return HelperFail("visibility_poller DEVICE");
  Side side;
  std::string error;
  if (!OpenAndConnect(args[0], kMessageBytes, {}, channel, &side, &error)) return HelperFail(error);
  auto* words = reinterpret_cast<uint64_t*>(side.buffer.data());
  PollerReport report{};
  uint64_t last_seen = 0;
  uint64_t final_seq = 0;
  for (uint64_t spin = 0;; ++spin) {
    const uint64_t seq = std::atomic_ref<uint64_t>(words[kWords - 1]).load(std::memory_order_acquire);
    if (seq != last_seen) {
      ++report.observations;
      last_seen = seq;
      for (size_t i = 0; i + 1 < kWords; ++i) {
        const uint64_t value = std::atomic_ref<uint64_t>(words[i]).load(std::memory_order_relaxed);
        if (value < seq) {
          if (report.torn++ == 0) {
            report.first_torn_seq = seq;
            report.first_torn_word = i;
            report.first_torn_value = value;
          }
          break;
        }
      }
    }
    if ((spin & 0xfff) == 0 && channel.Readable()) {
      if (!channel.RecvValue(&final_seq, kHandshakeTimeoutMs)) return HelperFail("writer vanished");
      break;
    }
  }
  report.final_value = std::atomic_ref<uint64_t>(words[kWords - 1]).load(std::memory_order_acquire);
  if (!channel.SendValue(report)) return HelperFail("sending the report");
  return 0;
}

class WriteVisibility : public ProcessTest {};

TEST_P(WriteVisibility, PollerNeverSeesTornMessage) {
  std::unique_ptr<Child> poller;
  CONFORMANCE_SETUP(Spawn(&poller, "visibility_poller", {peer_name()}));
  Side side;
  std::string error;
  ASSERT_TRUE(OpenAndConnect(local_name(), kMessageBytes * kBatch * kBatchesInFlight, {}, poller->channel(), &side,
                             &error))
      << error;
  ASSERT_GE(side.ep->cap().max_send_wr, kBatch * kBatchesInFlight);

  std::vector<ibv_sge> sges(kBatch);
  std::vector<ibv_send_wr> wrs(kBatch);
  const auto start = Clock::now();
  uint64_t seq = 0;
  for (uint64_t batch = 0; (batch < kWrites / kBatch && Clock::now() - start < kWriteBudgetMs) ||
                          Clock::now() - start < kMinWriteMs;
       ++batch) {
    // Slots of batch b are reused by batch b + 2; batch b completed before b + 2 is built.
    uint8_t* slots = side.buffer.data() + (batch % kBatchesInFlight) * kBatch * kMessageBytes;
    for (uint32_t i = 0; i < kBatch; ++i) {
      ++seq;
      auto* words = reinterpret_cast<uint64_t*>(slots + i * kMessageBytes);
      for (size_t w = 0; w < kWords; ++w) words[w] = seq;
      sges[i] = {reinterpret_cast<uint64_t>(words), kMessageBytes, side.buffer.lkey()};
      wrs[i] = {};
      wrs[i].wr_id = seq;
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].opcode = IBV_WR_RDMA_WRITE;
      wrs[i].send_flags = i + 1 == kBatch ? IBV_SEND_SIGNALED : 0;
      wrs[i].wr.rdma.remote_addr = side.remote.mr.addr;
      wrs[i].wr.rdma.rkey = side.remote.mr.rkey;
      wrs[i].next = i + 1 < kBatch ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(side.ep->qp(), wrs.data(), &bad);
    ASSERT_EQ(rc, 0) << "ibv_post_send of batch " << batch << ": " << strerror(rc);
    if (batch + 1 >= kBatchesInFlight) {
      std::optional<ibv_wc> wc = PollOne(side.ep->send_cq());
      ASSERT_TRUE(wc.has_value()) << "no completion for batch " << batch + 1 - kBatchesInFlight;
      ASSERT_WC_STATUS(*wc, IBV_WC_SUCCESS);
    }
  }
  for (uint32_t left = 1; left < kBatchesInFlight; ++left) {
    std::optional<ibv_wc> wc = PollOne(side.ep->send_cq());
    ASSERT_TRUE(wc.has_value());
    ASSERT_WC_STATUS(*wc, IBV_WC_SUCCESS);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(poller->channel().SendValue(seq));
  PollerReport report{};
  ASSERT_TRUE(poller->channel().RecvValue(&report, kHandshakeTimeoutMs)) << "the poller sent no report";
  ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*poller));
  RecordProperty("writes_per_second", static_cast<int>(seq / seconds));
  RecordProperty("poller_observations", static_cast<int>(report.observations));
  EXPECT_EQ(report.torn, 0u) << "torn message: last word " << report.first_torn_seq << " but word "
                             << report.first_torn_word << " still " << report.first_torn_value << " ("
                             << report.observations << " observations)";
  EXPECT_EQ(report.final_value, seq) << "the last WRITE is not visible after its completion";
  EXPECT_GE(report.observations, kMinObservations) << "the poller barely saw the writes; the race was not exercised";
}

CONFORMANCE_INSTANTIATE(WriteVisibility);

}  // namespace
}  // namespace conformance
