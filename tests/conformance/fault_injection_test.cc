// softnic fault injection through the CLI: UC/UD messages dropped by an injected fault are
// lost and counted (dropped_fault); RC stays reliable under drops; a device that is down
// makes RC give up (IBV_WC_RETRY_EXC_ERR) and UD lose messages (dropped_device_down);
// added delay shows up in completion latency.
#include <cstring>

#include "softnic_tool.h"

namespace conformance {
namespace {

constexpr int kMessages = 20;
constexpr int kDelayUs = 20'000;

class FaultInjection : public SoftnicTest {
 protected:
  void SetUpPair(ibv_qp_type type, const ConnectConfig& connect = {}, uint32_t depth = 64) {
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = type, .send_wr = depth, .recv_wr = depth,
                                        .cq_entries = static_cast<int>(2 * depth)}, connect));
    CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 1 << 16));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 1 << 16));
  }
  SendSpec Send(uint64_t wr_id) {
    return {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, 64)}, .wr_id = wr_id, .ah = pair_.a_to_b.get(),
            .remote_qpn = pair_.b->qp()->qp_num};
  }
  SendSpec Write(uint64_t wr_id, size_t offset = 0) {
    return {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, offset, 64)}, .wr_id = wr_id,
            .remote_addr = remote_buf_.addr() + offset, .rkey = remote_buf_.rkey()};
  }
  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

TEST_P(FaultInjection, UdDropsAreLostAndCounted) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD));
  for (int i = 0; i < kMessages + 1; ++i) ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, i * 128, 128)}, i), 0);
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--drop", "1.0"}));
  for (int i = 0; i < kMessages; ++i) ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(i), IBV_WC_SUCCESS));
  ibv_wc wc{};
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq(), kQuietTimeMs, &wc)) << "delivered under drop 1.0: " << Describe(wc);
  CONFORMANCE_SETUP(Counters(&after));
  EXPECT_GE(CounterSum(after, "dropped_fault") - CounterSum(before, "dropped_fault"), uint64_t{kMessages});
  CONFORMANCE_SETUP(Faults({"clear"}));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(99), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
}

TEST_P(FaultInjection, UcWriteDropsAreLostAndCounted) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UC));
  std::memset(local_buf_.data(), 0x77, 64 * kMessages);
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--drop", "1.0"}));
  for (int i = 0; i < kMessages; ++i)
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(i, i * 64), IBV_WC_SUCCESS));
  for (int i = 0; i < 64 * kMessages; ++i) ASSERT_EQ(remote_buf_.data()[i], 0) << "written under drop 1.0";
  CONFORMANCE_SETUP(Counters(&after));
  EXPECT_GE(CounterSum(after, "dropped_fault") - CounterSum(before, "dropped_fault"), uint64_t{kMessages});
}

TEST_P(FaultInjection, PartialDropLosesSomeUdMessages) {
  constexpr int kSends = 400;
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD, {}, kSends));
  for (int i = 0; i < kSends; ++i) ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, (i % 256) * 128, 128)}, i), 0);
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--drop", "0.5"}));
  for (int i = 0; i < kSends; ++i) ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(i), IBV_WC_SUCCESS));
  const size_t delivered = PollMany(pair_.b->recv_cq(), kSends, kQuietTimeMs).size();
  CONFORMANCE_SETUP(Counters(&after));
  const uint64_t dropped = CounterSum(after, "dropped_fault") - CounterSum(before, "dropped_fault");
  EXPECT_GT(delivered, size_t{kSends / 4}) << "drop 0.5 lost far too many";
  EXPECT_LT(delivered, size_t{kSends * 3 / 4}) << "drop 0.5 lost far too few";
  EXPECT_EQ(delivered + dropped, size_t{kSends}) << "every message is either delivered or counted as dropped";
}

TEST_P(FaultInjection, RcReliableUnderDrops) {
  constexpr int kWrites = 200;
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  for (int i = 0; i < 64 * kWrites; ++i) local_buf_.data()[i] = static_cast<uint8_t>(i * 3 + 1);
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--drop", "0.2"}));
  for (int i = 0; i < kWrites; ++i)
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(i, i * 64), IBV_WC_SUCCESS));
  EXPECT_EQ(std::memcmp(remote_buf_.data(), local_buf_.data(), 64 * kWrites), 0) << "RC lost data under drops";
}

TEST_P(FaultInjection, DeviceDownRcRetryExceeded) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC, kShortRetry));
  // Several WRITEs of the shape that follows: whatever softnic caches about the peer is warm.
  for (uint64_t i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(1), IBV_WC_SUCCESS));
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--down"}));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(2), IBV_WC_RETRY_EXC_ERR));
  CONFORMANCE_SETUP(Counters(&after));
  EXPECT_GT(CounterSum(after, "dropped_device_down"), CounterSum(before, "dropped_device_down"));
  EXPECT_GT(CounterSum(after, "retry_exceeded"), CounterSum(before, "retry_exceeded"));
  // Back up: a fresh pair works again.
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--up"}));
  Pair fresh;
  CONFORMANCE_SETUP(MakePair(&fresh, {.type = IBV_QPT_RC}, kShortRetry));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*fresh.a, Write(3), IBV_WC_SUCCESS));
}

TEST_P(FaultInjection, DeviceDownUdDropped) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_UD));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 128)}, 1), 0);
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--down"}));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Send(1), IBV_WC_SUCCESS));
  EXPECT_TRUE(StaysEmpty(pair_.b->recv_cq()));
  CONFORMANCE_SETUP(Counters(&after));
  EXPECT_GT(CounterSum(after, "dropped_device_down"), CounterSum(before, "dropped_device_down"));
}

TEST_P(FaultInjection, DelayShowsInLatency) {
  CONFORMANCE_SETUP(SetUpPair(IBV_QPT_RC));
  CONFORMANCE_SETUP(Faults({"set", "--device", peer().name(), "--delay-us", std::to_string(kDelayUs)}));
  const auto start = Clock::now();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(1), IBV_WC_SUCCESS));
  const auto elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  EXPECT_GE(elapsed_us, kDelayUs) << "a WRITE completed in " << elapsed_us << " us with --delay-us " << kDelayUs;
}

CONFORMANCE_INSTANTIATE(FaultInjection);

}  // namespace
}  // namespace conformance
