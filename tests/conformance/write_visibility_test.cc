// WRITE visibility order (HERD-style request polling): a poller in another process spins on
// the last 8 bytes of a multi-cacheline message that one writer overwrites kWrites times;
// whenever it sees sequence s there, every earlier byte already belongs to message s or a
// later one. A torn message (an earlier byte from an older message) fails the test.
//
// The promise is per byte, as the spec states it: a word may be caught while the next
// message overwrites it. The kernel's rxe copies with memcpy, byte by byte in the TCG guest,
// so the poller can read 0x182ff's successor 0x18300 half-written as 0x18200: older than
// 0x182ff as a number, yet every byte of it is from 0x182ff or 0x18300.
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
// Writing goes on at least this long, and (within the budget) until the poller says it has
// seen kMinObservations messages: a poller starved of CPU on a loaded machine still gets
// scheduled while the writes happen.
constexpr std::chrono::milliseconds kMinWriteMs{1'500};
constexpr uint64_t kMinObservations = 100;  // fewer means the poller never raced the writer
// The poller sends one of these exactly once, before its report: kEnoughObservations as soon
// as it has seen kMinObservations messages, kTooFewObservations at the end if it never did.
constexpr uint64_t kTooFewObservations = 0;
constexpr uint64_t kEnoughObservations = 1;
static_assert(kWrites % kBatch == 0);

struct PollerReport {
  uint64_t observations;
  uint64_t caught_mid_overwrite;  // a word below s whose every byte is from s or later
  uint64_t undecided;             // the writer ran too far ahead to tell
  uint64_t torn;
  uint64_t first_torn_seq;
  uint64_t first_torn_word;
  uint64_t first_torn_value;
  uint64_t final_value;
};

// Messages are written one after another on one QP, so while the poller read a word, the
// message being written was at most one past the last word it reads afterwards.
constexpr uint64_t kMaxMessagesInFlight = 1;
// Byte b of a message's value is ((seq >> 8b) & 0xff). With n candidates, a message older
// than the oldest by fewer than 256 - n has a lowest byte unlike every candidate's; beyond
// kMaxCandidates the word is left undecided rather than passed.
constexpr uint64_t kMaxCandidates = 128;

enum class WordVerdict { kMixOfNewer, kTorn, kUndecided };

// Whether every byte of `value` equals that byte of some sequence in [oldest, newest].
WordVerdict ClassifyWord(uint64_t value, uint64_t oldest, uint64_t newest) {
  if (newest - oldest >= kMaxCandidates) return WordVerdict::kUndecided;  // the poller slept
  for (int shift = 0; shift < 64; shift += 8) {
    const uint64_t byte = (value >> shift) & 0xff;
    bool found = false;
    for (uint64_t seq = oldest; seq <= newest && !found; ++seq) found = ((seq >> shift) & 0xff) == byte;
    if (!found) return WordVerdict::kTorn;
  }
  return WordVerdict::kMixOfNewer;
}

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
      if (++report.observations == kMinObservations && !channel.SendValue(kEnoughObservations)) {
        return HelperFail("telling the writer it has seen enough");
      }
      last_seen = seq;
      for (size_t i = 0; i + 1 < kWords; ++i) {
        const uint64_t value = std::atomic_ref<uint64_t>(words[i]).load(std::memory_order_acquire);
        if (value >= seq) continue;
        const uint64_t newest =
            std::atomic_ref<uint64_t>(words[kWords - 1]).load(std::memory_order_acquire) + kMaxMessagesInFlight;
        const WordVerdict verdict = ClassifyWord(value, seq, newest);
        if (verdict == WordVerdict::kMixOfNewer) ++report.caught_mid_overwrite;
        if (verdict == WordVerdict::kUndecided) ++report.undecided;
        if (verdict != WordVerdict::kTorn) continue;
        if (report.torn++ == 0) {
          report.first_torn_seq = seq;
          report.first_torn_word = i;
          report.first_torn_value = value;
        }
        break;
      }
    }
    if ((spin & 0xfff) == 0 && channel.Readable()) {
      if (!channel.RecvValue(&final_seq, kHandshakeTimeoutMs)) return HelperFail("writer vanished");
      break;
    }
  }
  report.final_value = std::atomic_ref<uint64_t>(words[kWords - 1]).load(std::memory_order_acquire);
  if (report.observations < kMinObservations && !channel.SendValue(kTooFewObservations)) {
    return HelperFail("telling the writer it saw too few");
  }
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
  bool poller_said_enough = false;
  auto keep_writing = [&](uint64_t batch) {
    const auto elapsed = Clock::now() - start;
    if (elapsed < kMinWriteMs) return true;
    if (elapsed >= kWriteBudgetMs) return false;
    if (!poller_said_enough && poller->channel().Readable()) {
      uint64_t message = kTooFewObservations;
      poller_said_enough = poller->channel().RecvValue(&message, kHandshakeTimeoutMs) && message == kEnoughObservations;
    }
    return batch < kWrites / kBatch || !poller_said_enough;
  };
  for (uint64_t batch = 0; keep_writing(batch); ++batch) {
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
  uint64_t message = kEnoughObservations;
  if (!poller_said_enough) {
    ASSERT_TRUE(poller->channel().RecvValue(&message, kHandshakeTimeoutMs)) << "the poller sent no observation count";
  }
  PollerReport report{};
  ASSERT_TRUE(poller->channel().RecvValue(&report, kHandshakeTimeoutMs)) << "the poller sent no report";
  ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*poller));
  RecordProperty("writes_per_second", static_cast<int>(seq / seconds));
  RecordProperty("poller_observations", static_cast<int>(report.observations));
  RecordProperty("words_caught_mid_overwrite", static_cast<int>(report.caught_mid_overwrite));
  RecordProperty("words_undecided", static_cast<int>(report.undecided));
  EXPECT_EQ(report.torn, 0u) << "torn message: last word " << report.first_torn_seq << " but word "
                             << report.first_torn_word << " still " << report.first_torn_value << " ("
                             << report.observations << " observations)";
  EXPECT_EQ(report.final_value, seq) << "the last WRITE is not visible after its completion";
  EXPECT_GE(report.observations, kMinObservations) << "the poller barely saw the writes; the race was not exercised";
}

CONFORMANCE_INSTANTIATE(WriteVisibility);

}  // namespace
}  // namespace conformance
