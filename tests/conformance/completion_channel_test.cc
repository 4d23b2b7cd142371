// Completion channels: ibv_req_notify_cq arms a CQ, a completion then makes the channel fd
// readable and ibv_get_cq_event returns the CQ; solicited-only arming ignores unsolicited
// completions; only a completion added after the arming raises an event (ibv_req_notify_cq(3),
// rxe), so a program that takes the event, re-arms and then polls one completion, as
// perftest's -e mode does, sees one event per completion. A blocking ibv_get_cq_event is a
// read() of the channel as on a NIC: a signal whose handler lacks SA_RESTART ends it with
// EINTR (qperf's timed tests end their event loop so), one with SA_RESTART does not. Every
// other wait is poll() on channel->fd with a timeout.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr int kEventTimeoutMs = 5000;
constexpr int kNoEventWaitMs = 200;
constexpr auto kSignalAfter = std::chrono::milliseconds(50);
// A send that ends the blocking wait if the signal did not: the test fails instead of hanging.
constexpr auto kBackstopSendAfter = std::chrono::milliseconds(2000);

void CountSignal(int) {}

// SIGUSR1's handler, installed with or without SA_RESTART, for the life of the object.
class SignalHandlerScope {
 public:
  explicit SignalHandlerScope(int flags) {
    struct sigaction action{};
    action.sa_handler = CountSignal;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, &previous_);
  }
  ~SignalHandlerScope() { sigaction(SIGUSR1, &previous_, nullptr); }

 private:
  struct sigaction previous_{};
};

class CompletionChannel : public VerbsTest {
 protected:
  void SetUp() override {
    CONFORMANCE_SETUP(VerbsTest::SetUp());
    channel_.reset(ibv_create_comp_channel(peer().ctx()));
    if (!channel_ && IsUnsupported(errno)) GTEST_SKIP() << "ibv_create_comp_channel: " << strerror(errno);
    ASSERT_TRUE(channel_ != nullptr) << strerror(errno);
    recv_cq_.reset(ibv_create_cq(peer().ctx(), 64, this, channel_.get(), 0));
    ASSERT_TRUE(recv_cq_ != nullptr) << strerror(errno);
    QpConfig b_config{.type = IBV_QPT_RC, .recv_cq = recv_cq_.get()};
    CONFORMANCE_SETUP(MakePair(&pair_, {.type = IBV_QPT_RC}, {}, &b_config));
    CONFORMANCE_SETUP(MakeBuffer(&send_buf_, local(), 4096));
    CONFORMANCE_SETUP(MakeBuffer(&recv_buf_, peer(), 4096));
    for (int i = 0; i < 8; ++i) ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(recv_buf_, i * 64, 64)}, i), 0);
  }
  void TearDown() override {
    if (recv_cq_ && unacked_ > 0) ibv_ack_cq_events(recv_cq_.get(), unacked_);
  }
  void Send(unsigned extra_flags) {
    ASSERT_NO_FATAL_FAILURE(PostAndExpect(
        *pair_.a, {.opcode = IBV_WR_SEND, .sges = {Sge(send_buf_, 0, 32)}, .flags = IBV_SEND_SIGNALED | extra_flags},
        IBV_WC_SUCCESS));
  }
  bool FdReadable(int timeout_ms) {
    pollfd pfd{channel_->fd, POLLIN, 0};
    return poll(&pfd, 1, timeout_ms) > 0;
  }
  // Waits for the channel, takes the event and checks it names our CQ.
  void ExpectEvent() {
    ASSERT_TRUE(FdReadable(kEventTimeoutMs)) << "no completion event within " << kEventTimeoutMs << " ms";
    ibv_cq* cq = nullptr;
    void* cq_context = nullptr;
    ASSERT_EQ(ibv_get_cq_event(channel_.get(), &cq, &cq_context), 0);
    ++unacked_;
    EXPECT_EQ(cq, recv_cq_.get());
    EXPECT_EQ(cq_context, this) << "cq_context from ibv_create_cq";
    EXPECT_FALSE(FdReadable(0)) << "channel fd still readable after its only event was taken";
  }

  ChannelPtr channel_;
  CqPtr recv_cq_;
  Pair pair_;
  Buffer send_buf_, recv_buf_;
  unsigned unacked_ = 0;
};

TEST_P(CompletionChannel, ArmedCqRaisesEvent) {
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  EXPECT_FALSE(FdReadable(0)) << "event before any completion";
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent());
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
  ibv_ack_cq_events(recv_cq_.get(), unacked_);
  unacked_ = 0;
}

TEST_P(CompletionChannel, UnarmedCqRaisesNoEvent) {
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
  EXPECT_FALSE(FdReadable(kNoEventWaitMs)) << "event on a CQ that was never armed";
}

TEST_P(CompletionChannel, OneEventPerArming) {
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent());
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(Send(0));
  EXPECT_FALSE(FdReadable(kNoEventWaitMs)) << "a second event without re-arming";
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
  // Re-armed: the next completion raises an event again.
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent());
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
}

TEST_P(CompletionChannel, RearmBeforePollRaisesNoExtraEvent) {
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    ASSERT_NO_FATAL_FAILURE(ExpectEvent());
    ibv_ack_cq_events(recv_cq_.get(), unacked_);
    unacked_ = 0;
    // Re-armed while the completion that raised the event is still in the CQ.
    ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
    EXPECT_FALSE(FdReadable(kNoEventWaitMs))
        << "round " << round << ": an event for a completion that was in the CQ before the arming";
    if (FdReadable(0)) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      ASSERT_EQ(ibv_get_cq_event(channel_.get(), &cq, &context), 0);
      ibv_ack_cq_events(recv_cq_.get(), 1);
    }
  }
}

TEST_P(CompletionChannel, SolicitedOnly) {
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 1), 0);
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
  EXPECT_FALSE(FdReadable(kNoEventWaitMs)) << "an unsolicited completion raised a solicited-only event";
  ASSERT_NO_FATAL_FAILURE(Send(IBV_SEND_SOLICITED));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent());
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
}

TEST_P(CompletionChannel, NonBlockingGetCqEvent) {
  const int flags = fcntl(channel_->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  EXPECT_NE(ibv_get_cq_event(channel_.get(), &cq, &context), 0) << "an event out of nothing";
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  ASSERT_NO_FATAL_FAILURE(Send(0));
  ASSERT_NO_FATAL_FAILURE(ExpectEvent());
}

// Signals the calling thread after kSignalAfter; once the wait returned, or at `send_by`,
// posts one SEND that raises the armed CQ's event. Returns what the blocking
// ibv_get_cq_event returned.
int GetCqEventSignaledMidWait(ibv_comp_channel* channel, ibv_qp* sender, const Buffer& buffer,
                              std::chrono::milliseconds send_by, int* error) {
  pthread_t waiter = pthread_self();
  std::atomic<bool> returned{false};
  std::thread helper([&] {
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(kSignalAfter);
    pthread_kill(waiter, SIGUSR1);
    while (!returned.load() && std::chrono::steady_clock::now() - start < send_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    PostSend(sender, {.opcode = IBV_WR_SEND, .sges = {Sge(buffer, 0, 32)}});
  });
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  int rc = ibv_get_cq_event(channel, &cq, &context);
  *error = errno;
  returned.store(true);
  helper.join();
  return rc;
}

TEST_P(CompletionChannel, SignalWithoutRestartInterruptsGetCqEvent) {
  SignalHandlerScope handler(0);
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  int error = 0;
  int rc = GetCqEventSignaledMidWait(channel_.get(), pair_.a->qp(), send_buf_, kBackstopSendAfter, &error);
  if (rc == 0) ++unacked_;
  EXPECT_EQ(rc, -1) << "the wait outlived a signal without SA_RESTART";
  EXPECT_EQ(error, EINTR) << strerror(error);
  // The event of the backstop SEND is still there for the next wait.
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  if (rc != 0) ASSERT_NO_FATAL_FAILURE(ExpectEvent());
}

TEST_P(CompletionChannel, SignalWithRestartLeavesGetCqEventWaiting) {
  SignalHandlerScope handler(SA_RESTART);
  ASSERT_EQ(ibv_req_notify_cq(recv_cq_.get(), 0), 0);
  int error = 0;
  int rc = GetCqEventSignaledMidWait(channel_.get(), pair_.a->qp(), send_buf_, 4 * kSignalAfter, &error);
  ASSERT_EQ(rc, 0) << "a signal with SA_RESTART ended the wait: " << strerror(error);
  ++unacked_;
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(pair_.a->send_cq(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(recv_cq_.get(), IBV_WC_SUCCESS));
}

CONFORMANCE_INSTANTIATE(CompletionChannel);

}  // namespace
}  // namespace conformance
