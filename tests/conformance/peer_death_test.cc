// A peer process killed with SIGKILL mid-stream: the survivor gets an error completion
// (RC: IBV_WC_RETRY_EXC_ERR with a short timeout) and never hangs; UD sends to the dead
// QP complete normally (silent loss).
#include <signal.h>

#include <thread>

#include "process_fixture.h"

namespace conformance {
namespace {

constexpr ConnectConfig kShortRetry{.timeout = 10, .retry_cnt = 2, .rnr_retry = 2, .min_rnr_timer = 1};
constexpr uint64_t kWritesBeforeKill = 1000;
constexpr std::chrono::milliseconds kDetectBudgetMs{10'000};
constexpr uint32_t kWindow = 16;
constexpr uint8_t kReady = 'r';

CONFORMANCE_HELPER(victim_responder) {
  if (args.size() != 1) return HelperFail("victim_responder DEVICE");
  Side side;
  std::string error;
  if (!OpenAndConnect(args[0], 1 << 16, kShortRetry, channel, &side, &error)) return HelperFail(error);
  if (!channel.SendValue(kReady)) return HelperFail("ready");
  // Stay alive (QP in RTS) until killed; PR_SET_PDEATHSIG covers a test that dies first.
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

class PeerDeath : public ProcessTest {
 protected:
  // Streams WRITEs of `write_bytes` to a victim and kills it mid-stream.
  void SurviveKilledResponder(uint32_t write_bytes);
};

void PeerDeath::SurviveKilledResponder(uint32_t write_bytes) {
  std::unique_ptr<Child> victim;
  CONFORMANCE_SETUP(Spawn(&victim, "victim_responder", {peer_name()}));
  Side side;
  std::string error;
  ASSERT_TRUE(OpenAndConnect(local_name(), 1 << 16, kShortRetry, victim->channel(), &side, &error)) << error;
  uint8_t ready = 0;
  ASSERT_TRUE(victim->channel().RecvValue(&ready, kHandshakeTimeoutMs));

  // Stream WRITEs with kWindow outstanding; kill the victim after kWritesBeforeKill.
  uint64_t posted = 0, succeeded = 0, after_kill = 0;
  bool killed = false;
  std::optional<ibv_wc> error_wc;
  Clock::time_point kill_time{};
  while (!error_wc) {
    while (posted - succeeded < kWindow) {
      const int rc = PostSend(side.ep->qp(), {.opcode = IBV_WR_RDMA_WRITE,
                                              .sges = {Sge(side.buffer, (posted % 64) * 512, write_bytes)},
                                              .wr_id = posted, .remote_addr = side.remote.mr.addr + (posted % 64) * 512,
                                              .rkey = side.remote.mr.rkey});
      if (rc != 0) break;  // the QP may already be in ERR
      ++posted;
    }
    std::optional<ibv_wc> wc = PollOne(side.ep->send_cq(), kDetectBudgetMs);
    ASSERT_TRUE(wc.has_value()) << "no completion within " << kDetectBudgetMs.count() << " ms"
                                << (killed ? " after the peer was killed: the survivor hangs" : "");
    if (wc->status != IBV_WC_SUCCESS) {
      error_wc = wc;
      break;
    }
    ++succeeded;
    if (killed) {
      ++after_kill;
      ASSERT_LT(Clock::now() - kill_time, kDetectBudgetMs)
          << after_kill << " WRITEs succeeded into a process killed " << kDetectBudgetMs.count() << " ms ago";
    }
    if (!killed && succeeded >= kWritesBeforeKill) {
      victim->Kill();
      ASSERT_TRUE(victim->Wait(kDetectBudgetMs).has_value());
      killed = true;
      kill_time = Clock::now();
    }
  }
  ASSERT_TRUE(killed) << "error before the kill: " << Describe(*error_wc);
  EXPECT_WC_STATUS(*error_wc, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(QueryState(side.ep->qp()), IBV_QPS_ERR);
  // Everything still queued flushes; nothing hangs.
  for (uint64_t left = posted - succeeded - 1; left > 0; --left) {
    std::optional<ibv_wc> wc = PollOne(side.ep->send_cq());
    ASSERT_TRUE(wc.has_value()) << left << " WRs neither completed nor flushed";
    EXPECT_WC_STATUS(*wc, IBV_WC_WR_FLUSH_ERR);
  }
}

TEST_P(PeerDeath, RcSurvivorGetsRetryExceeded) { SurviveKilledResponder(512); }

// Small WRITEs of one shape, whatever softnic caches per shape: the death still shows.
TEST_P(PeerDeath, RcSurvivorOfSmallWritesGetsRetryExceeded) { SurviveKilledResponder(32); }

CONFORMANCE_HELPER(ud_victim) {
  if (args.size() != 1) return HelperFail("ud_victim DEVICE");
  std::string error;
  std::unique_ptr<Device> device = Device::Open(args[0], &error);
  if (!device) return HelperFail(error);
  int err = 0;
  std::unique_ptr<Endpoint> ep = Endpoint::Create(*device, {.type = IBV_QPT_UD}, &err, &error);
  if (!ep) return HelperFail(error);
  if (int rc = Connect(*ep, {}); rc != 0) return HelperFail(std::string("UD to RTS: ") + strerror(rc));
  if (!channel.SendValue(ep->info())) return HelperFail("hello");
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST_P(PeerDeath, UdSendsToKilledPeerComplete) {
  std::unique_ptr<Child> victim;
  CONFORMANCE_SETUP(Spawn(&victim, "ud_victim", {peer_name()}));
  QpInfo victim_info{};
  ASSERT_TRUE(victim->channel().RecvValue(&victim_info, kHandshakeTimeoutMs));
  victim->Kill();
  ASSERT_TRUE(victim->Wait(kDetectBudgetMs).has_value());
  std::unique_ptr<Device> device;
  std::unique_ptr<Endpoint> ep;
  ASSERT_NO_FATAL_FAILURE(OpenEndpoint(local_name(), {.type = IBV_QPT_UD}, &device, &ep));
  std::string error;
  ASSERT_EQ(Connect(*ep, {}), 0);
  ibv_ah_attr ah_attr = AhAttr(*device, victim_info, false);
  AhPtr ah(ibv_create_ah(device->pd(), &ah_attr));
  ASSERT_TRUE(ah != nullptr) << strerror(errno);
  Buffer buffer = Buffer::Make(device->pd(), 4096, kAllRemoteAccess, &error);
  ASSERT_TRUE(static_cast<bool>(buffer)) << error;
  for (int i = 0; i < 10; ++i) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(*ep,
                                          {.opcode = IBV_WR_SEND, .sges = {Sge(buffer, 0, 64)},
                                           .wr_id = static_cast<uint64_t>(i), .ah = ah.get(),
                                           .remote_qpn = victim_info.qpn},
                                          IBV_WC_SUCCESS));
  }
}

CONFORMANCE_INSTANTIATE(PeerDeath);

}  // namespace
}  // namespace conformance
