// UD fan-in: two senders into one UD QP whose receiver re-posts, as one list per poll,
// every RECV it polls. Each sender keeps at most kCreditPerSender messages unreceived and
// the receive queue holds both credits and a poll's worth besides, so every message finds a
// RECV: a lost, duplicated or reordered message is the provider's fault (two senders racing
// for one receive queue and one CQ).
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint32_t kSenders = 2;
constexpr uint64_t kCreditPerSender = 32;
constexpr uint32_t kPollBatch = 16;
constexpr uint32_t kRecvDepth = 128;
static_assert(kRecvDepth >= kSenders * kCreditPerSender + kPollBatch);
constexpr uint64_t kMaxPerSender = 100000;
constexpr std::chrono::milliseconds kSendBudgetMs{3000};  // fewer messages on a slow provider
constexpr std::chrono::milliseconds kDrainBudgetMs{20000};
constexpr uint32_t kSignalEvery = 16;
constexpr size_t kPayloadBytes = 2 * sizeof(uint64_t);  // sender index, sequence number
constexpr size_t kRecvSlotBytes = kGrhBytes + kPayloadBytes;

using Clock = std::chrono::steady_clock;

// What the senders and the receiver share: the buffers, the credits and what went wrong.
struct FanIn {
  Buffer recv_buf;
  Buffer send_bufs[kSenders];
  Endpoint* senders[kSenders] = {};
  ibv_ah* ahs[kSenders] = {};
  Endpoint* receiver = nullptr;
  Clock::time_point start;
  std::atomic<uint64_t> received_from[kSenders] = {};
  std::atomic<uint64_t> sent_by[kSenders] = {};
  std::atomic<bool> senders_done[kSenders] = {};
  std::atomic<bool> stop{false};
  std::string sender_error[kSenders];
  uint64_t next_seq[kSenders] = {};
  std::string receive_error;

  void RecvWr(uint32_t slot, ibv_sge* sge, ibv_recv_wr* wr) const {
    *sge = Sge(recv_buf, slot * kRecvSlotBytes, kRecvSlotBytes);
    *wr = {};
    wr->wr_id = slot;
    wr->sg_list = sge;
    wr->num_sge = 1;
  }

  // Waits until sender `s` has a credit for message `seq`; false when the run stops first.
  bool WaitForCredit(uint32_t s, uint64_t seq) {
    while (seq - received_from[s].load(std::memory_order_acquire) >= kCreditPerSender) {
      if (stop.load() || Clock::now() - start > kDrainBudgetMs) {
        sender_error[s] = "no credit back for message " + std::to_string(seq);
        stop.store(true);
        return false;
      }
    }
    return !stop.load();
  }

  // Sender `s`'s thread: messages {s, seq} for as long as the budget lasts, every
  // kSignalEvery-th signaled and reaped so that the send queue never fills.
  void Send(uint32_t s) {
    Endpoint& ep = *senders[s];
    uint64_t signaled_posted = 0, signaled_done = 0, seq = 0;
    for (; seq < kMaxPerSender && Clock::now() - start < kSendBudgetMs && !stop.load(); ++seq) {
      if (!WaitForCredit(s, seq)) break;
      uint64_t payload[2] = {s, seq};
      std::memcpy(send_bufs[s].data() + seq * kPayloadBytes, payload, kPayloadBytes);
      bool signaled = seq % kSignalEvery == kSignalEvery - 1;
      SendSpec spec{.opcode = IBV_WR_SEND,
                    .sges = {Sge(send_bufs[s], seq * kPayloadBytes, kPayloadBytes)},
                    .flags = signaled ? unsigned{IBV_SEND_SIGNALED} : 0u,
                    .wr_id = seq,
                    .ah = ahs[s],
                    .remote_qpn = receiver->qp()->qp_num};
      if (int rc = PostSend(ep.qp(), spec); rc != 0) {
        sender_error[s] = "ibv_post_send of message " + std::to_string(seq) + ": " + std::strerror(rc);
        break;
      }
      signaled_posted += signaled;
      while (signaled_posted - signaled_done > 2) {
        std::optional<ibv_wc> wc = PollOne(ep.send_cq());
        if (!wc || wc->status != IBV_WC_SUCCESS) {
          sender_error[s] = wc ? "send completion " + Describe(*wc) : "no send completion";
          break;
        }
        ++signaled_done;
      }
      if (!sender_error[s].empty()) break;
    }
    sent_by[s].store(seq, std::memory_order_release);
    senders_done[s].store(true, std::memory_order_release);
  }

  bool AllReceived() const {
    for (uint32_t s = 0; s < kSenders; ++s) {
      if (!senders_done[s].load(std::memory_order_acquire) || next_seq[s] != sent_by[s].load()) return false;
    }
    return true;
  }

  // A received message is the next one due from its sender; it gives that sender a credit.
  void Accept(const ibv_wc& wc) {
    uint64_t payload[2];
    std::memcpy(payload, recv_buf.data() + wc.wr_id * kRecvSlotBytes + kGrhBytes, kPayloadBytes);
    if (wc.status != IBV_WC_SUCCESS || wc.byte_len != kRecvSlotBytes || payload[0] >= kSenders) {
      receive_error = "receive completion " + Describe(wc);
    } else if (payload[1] != next_seq[payload[0]]) {
      receive_error = "sender " + std::to_string(payload[0]) + ": message " + std::to_string(payload[1]) +
                      " arrived where " + std::to_string(next_seq[payload[0]]) + " was due";
    } else {
      received_from[payload[0]].store(++next_seq[payload[0]], std::memory_order_release);
    }
  }

  // The receiver: polls, checks, and re-posts every polled RECV as one list per poll.
  void Receive() {
    ibv_wc wcs[kPollBatch];
    ibv_sge sges[kPollBatch];
    ibv_recv_wr wrs[kPollBatch];
    while (receive_error.empty() && !AllReceived() && Clock::now() - start < kDrainBudgetMs) {
      int n = ibv_poll_cq(receiver->recv_cq(), kPollBatch, wcs);
      if (n < 0) receive_error = "ibv_poll_cq: " + std::to_string(n);
      for (int i = 0; i < n && receive_error.empty(); ++i) {
        Accept(wcs[i]);
        RecvWr(uint32_t(wcs[i].wr_id), &sges[i], &wrs[i]);
        if (i > 0) wrs[i - 1].next = &wrs[i];
      }
      if (n > 0 && receive_error.empty()) {
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_recv(receiver->qp(), &wrs[0], &bad); rc != 0) {
          receive_error = std::string("re-posting RECVs: ") + std::strerror(rc);
        }
      }
    }
  }
};

class UdFanIn : public VerbsTest {};

TEST_P(UdFanIn, TwoSendersLoseNoMessageWhileRecvsArePosted) {
  const QpConfig config{.type = IBV_QPT_UD, .send_wr = 64, .recv_wr = kRecvDepth, .cq_entries = 1024};
  Pair first, second;  // first.b receives; first.a and second.a send to it
  CONFORMANCE_SETUP(MakePair(&first, config));
  CONFORMANCE_SETUP(MakePair(&second, config));
  FanIn fan_in;
  CONFORMANCE_SETUP(MakeBuffer(&fan_in.recv_buf, peer(), kRecvDepth * kRecvSlotBytes));
  for (Buffer& buffer : fan_in.send_bufs) {
    CONFORMANCE_SETUP(MakeBuffer(&buffer, local(), kMaxPerSender * kPayloadBytes));
  }
  fan_in.senders[0] = first.a.get();
  fan_in.senders[1] = second.a.get();
  fan_in.ahs[0] = first.a_to_b.get();
  fan_in.ahs[1] = second.a_to_b.get();
  fan_in.receiver = first.b.get();
  for (uint32_t slot = 0; slot < kRecvDepth; ++slot) {
    ibv_sge sge;
    ibv_recv_wr wr;
    fan_in.RecvWr(slot, &sge, &wr);
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(fan_in.receiver->qp(), &wr, &bad), 0);
  }

  fan_in.start = Clock::now();
  std::thread threads[kSenders];
  for (uint32_t s = 0; s < kSenders; ++s) threads[s] = std::thread([&fan_in, s] { fan_in.Send(s); });
  fan_in.Receive();
  fan_in.stop.store(true);
  for (std::thread& thread : threads) thread.join();
  for (uint32_t s = 0; s < kSenders; ++s) {
    EXPECT_EQ(fan_in.sender_error[s], "") << "sender " << s;
    EXPECT_EQ(fan_in.next_seq[s], fan_in.sent_by[s].load()) << "sender " << s << ": messages lost";
    EXPECT_GT(fan_in.sent_by[s].load(), kCreditPerSender) << "sender " << s << " barely sent";
  }
  EXPECT_EQ(fan_in.receive_error, "");
  RecordProperty("messages", static_cast<int>(fan_in.next_seq[0] + fan_in.next_seq[1]));
}

CONFORMANCE_INSTANTIATE(UdFanIn);

}  // namespace
}  // namespace conformance
