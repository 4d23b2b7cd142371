// softnic per-device counters (`softnic counters --json`): schema, and that each counter
// moves when its event happens.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "softnic_tool.h"

namespace conformance {
namespace {

constexpr size_t kMessageBytes = 1000;

class Counters : public PairTest<SoftnicTest> {
 protected:
  // The pair, then the counters it starts from.
  void SetUpCountedPair(ibv_qp_type type, const ConnectConfig& connect = {}) {
    CONFORMANCE_SETUP(SetUpPair(type, connect));
    CONFORMANCE_SETUP(SoftnicTest::Counters(&before_));
  }
  uint64_t Delta(const std::string& device, const std::string& name) {
    nlohmann::json after;
    SoftnicTest::Counters(&after);
    return CounterOf(after, device, name) - CounterOf(before_, device, name);
  }
  uint64_t SumDelta(const std::string& name) {
    nlohmann::json after;
    SoftnicTest::Counters(&after);
    return CounterSum(after, name) - CounterSum(before_, name);
  }
  SendSpec Write(uint32_t rkey) {
    return {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(local_buf_, 0, 64)}, .remote_addr = remote_buf_.addr(),
            .rkey = rkey};
  }
  nlohmann::json before_;
};

TEST_P(Counters, SchemaNamesTheFabricAndDevices) {
  nlohmann::json doc;
  CONFORMANCE_SETUP(SoftnicTest::Counters(&doc));
  EXPECT_EQ(doc.value("fabric", ""), FabricName());
  std::vector<std::string> names;
  for (const nlohmann::json& device : doc["devices"]) {
    names.push_back(device.value("name", ""));
    ASSERT_TRUE(device.contains("counters") && device["counters"].is_object());
    for (const char* counter : {"tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "dropped_no_recv",
                                "dropped_fault", "dropped_device_down", "rnr_retries", "retry_exceeded",
                                "remote_access_errors", "cq_overruns", "doorbells"}) {
      EXPECT_TRUE(device["counters"].contains(counter) && device["counters"][counter].is_number_unsigned())
          << device.value("name", "?") << " lacks unsigned counter " << counter;
    }
  }
  EXPECT_NE(std::find(names.begin(), names.end(), local().name()), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), peer().name()), names.end());
}

TEST_P(Counters, SendCountsPacketsAndBytes) {
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC));
  ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf_, 0, 4096)}, 1), 0);
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(
      *pair_.a, {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, kMessageBytes)}}, IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.b->recv_cq(), IBV_WC_SUCCESS));
  EXPECT_GE(Delta(local().name(), "tx_packets"), 1u);
  EXPECT_GE(Delta(local().name(), "tx_bytes"), kMessageBytes);
  EXPECT_GE(Delta(peer().name(), "rx_packets"), 1u);
  EXPECT_GE(Delta(peer().name(), "rx_bytes"), kMessageBytes);
}

TEST_P(Counters, LinkedListIsOneDoorbell) {
  constexpr int kListLength = 4;
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC));
  ibv_sge sge = Sge(local_buf_, 0, 8);
  ibv_send_wr wrs[kListLength]{};
  for (int i = 0; i < kListLength; ++i) {
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sge;
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].send_flags = i + 1 == kListLength ? IBV_SEND_SIGNALED : 0;
    wrs[i].wr.rdma.remote_addr = remote_buf_.addr();
    wrs[i].wr.rdma.rkey = remote_buf_.rkey();
    wrs[i].next = i + 1 < kListLength ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(pair_.a->qp(), wrs, &bad), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  EXPECT_EQ(Delta(local().name(), "doorbells"), 1u) << "a linked list of " << kListLength << " WRs is one doorbell";
  CONFORMANCE_SETUP(SoftnicTest::Counters(&before_));
  for (int i = 0; i < kListLength; ++i) {
    wrs[i].next = nullptr;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_post_send(pair_.a->qp(), &wrs[i], &bad), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  }
  EXPECT_EQ(Delta(local().name(), "doorbells"), uint64_t{kListLength});
}

// Each posting thread counts in a lane of its own, and a reader adds up the lanes the
// process's threads claimed: more threads than the 8 lanes softnic once had (the 8th and
// later shared one, at several times the cost) must all be counted, exactly.
TEST_P(Counters, EveryThreadsDoorbellsCountedBeyondEightThreads) {
  constexpr int kThreads = 12;
  constexpr int kPostsPerThread = 50;
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC));
  std::vector<Pair> pairs(kThreads);
  for (Pair& pair : pairs) CONFORMANCE_SETUP(MakePair(&pair, {.type = IBV_QPT_RC}));
  CONFORMANCE_SETUP(SoftnicTest::Counters(&before_));
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (Pair& pair : pairs) {
    threads.emplace_back([&, qp = pair.a->qp(), cq = pair.a->send_cq()] {
      ibv_sge sge = Sge(local_buf_, 0, 8);
      for (int i = 0; i < kPostsPerThread; ++i) {
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = remote_buf_.addr();
        wr.wr.rdma.rkey = remote_buf_.rkey();
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(qp, &wr, &bad) != 0) return;
        std::vector<ibv_wc> done = PollMany(cq, 1);
        if (done.size() != 1 || done[0].status != IBV_WC_SUCCESS) return;
        completed.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(completed.load(), kThreads * kPostsPerThread) << "every WRITE completes";
  EXPECT_EQ(Delta(local().name(), "doorbells"), uint64_t{kThreads * kPostsPerThread});
}

TEST_P(Counters, UdWithoutRecvCountsDroppedNoRecv) {
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_UD));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a,
                                        {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, 64)},
                                         .ah = pair_.a_to_b.get(), .remote_qpn = pair_.b->qp()->qp_num},
                                        IBV_WC_SUCCESS));
  EXPECT_GE(SumDelta("dropped_no_recv"), 1u);
}

TEST_P(Counters, RnrRetriesCounted) {
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC, kShortRetry));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, {.opcode = IBV_WR_SEND, .sges = {Sge(local_buf_, 0, 64)}},
                                        IBV_WC_RNR_RETRY_EXC_ERR));
  EXPECT_GE(SumDelta("rnr_retries"), 1u);
}

TEST_P(Counters, RetryExceededCounted) {
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC, kShortRetry));
  pair_.b->DestroyQp();
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.rkey()), IBV_WC_RETRY_EXC_ERR));
  EXPECT_GE(SumDelta("retry_exceeded"), 1u);
}

TEST_P(Counters, RemoteAccessErrorsCounted) {
  CONFORMANCE_SETUP(SetUpCountedPair(IBV_QPT_RC));
  ASSERT_NO_FATAL_FAILURE(PostAndExpect(*pair_.a, Write(remote_buf_.rkey() ^ 0x1234u), IBV_WC_REM_ACCESS_ERR));
  EXPECT_GE(SumDelta("remote_access_errors"), 1u);
}

TEST_P(Counters, CqOverrunCounted) {
  CqPtr cq(ibv_create_cq(local().ctx(), 4, nullptr, nullptr, 0));
  ASSERT_TRUE(cq != nullptr);
  const uint32_t overflow = static_cast<uint32_t>(cq->cqe) + 4;
  QpConfig config{.type = IBV_QPT_RC, .send_wr = overflow, .send_cq = cq.get()};
  QpConfig b_config{.type = IBV_QPT_RC};
  Pair pair;  // after the CQ: its QPs go first
  CONFORMANCE_SETUP(MakePair(&pair, config, {}, &b_config));
  CONFORMANCE_SETUP(MakeBuffer(&local_buf_, local(), 4096));
  CONFORMANCE_SETUP(MakeBuffer(&remote_buf_, peer(), 4096));
  CONFORMANCE_SETUP(SoftnicTest::Counters(&before_));
  for (uint32_t i = 0; i < overflow; ++i) {
    if (PostSend(pair.a->qp(), Write(remote_buf_.rkey())) != 0) break;
  }
  EXPECT_GE(SumDelta("cq_overruns"), 1u);
}

CONFORMANCE_INSTANTIATE(Counters);

}  // namespace
}  // namespace conformance
