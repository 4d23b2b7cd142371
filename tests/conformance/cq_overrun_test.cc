// Spec error table, row "CQ full": an overrun is reported (ibv_poll_cq < 0 and/or the
// async event IBV_EVENT_CQ_ERR) and a completion is never overwritten silently.
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr int kRequestedCqEntries = 8;
constexpr std::chrono::milliseconds kAsyncEventTimeoutMs{2000};

class CqOverrun : public VerbsTest {};

TEST_P(CqOverrun, ReportedNeverOverwritten) {
  CqPtr cq(ibv_create_cq(local().ctx(), kRequestedCqEntries, nullptr, nullptr, 0));
  ASSERT_TRUE(cq != nullptr) << strerror(errno);
  const int capacity = cq->cqe;
  ASSERT_GE(capacity, kRequestedCqEntries) << "ibv_create_cq returned fewer entries than asked for";
  const int to_post = 2 * capacity + 4;
  Pair pair;
  QpConfig config{.type = IBV_QPT_RC, .send_wr = static_cast<uint32_t>(to_post), .send_cq = cq.get()};
  QpConfig b_config{.type = IBV_QPT_RC};
  CONFORMANCE_SETUP(MakePair(&pair, config, {}, &b_config));
  Buffer src, dst;
  CONFORMANCE_SETUP(MakeBuffer(&src, local(), 4096));
  CONFORMANCE_SETUP(MakeBuffer(&dst, peer(), 4096));

  int posted = 0;
  for (; posted < to_post; ++posted) {
    const int rc = PostSend(pair.a->qp(), {.opcode = IBV_WR_RDMA_WRITE, .sges = {Sge(src, 0, 8)},
                                           .wr_id = static_cast<uint64_t>(posted), .remote_addr = dst.addr(),
                                           .rkey = dst.rkey()});
    if (rc != 0) break;  // a provider may move the QP to an error state once the CQ overflowed
  }
  ASSERT_GT(posted, capacity) << "could not even post enough WRs to overflow the CQ";

  std::optional<ibv_async_event> event = WaitAsyncEvent(local().ctx(), IBV_EVENT_CQ_ERR, kAsyncEventTimeoutMs);
  if (event) {
    EXPECT_EQ(event->element.cq, cq.get()) << "IBV_EVENT_CQ_ERR names another CQ";
  }

  int poll_error = 0;
  std::vector<uint64_t> wr_ids;
  for (;;) {
    std::optional<ibv_wc> wc = PollOne(cq.get(), std::chrono::milliseconds(100), &poll_error);
    if (!wc) break;
    if (wc->status == IBV_WC_SUCCESS) wr_ids.push_back(wc->wr_id);
  }
  const bool reported = event.has_value() || poll_error < 0;
  if (!event) RecordProperty("cq_err_event", "none on async_fd");
  const bool nothing_lost = static_cast<int>(wr_ids.size()) == posted;
  EXPECT_TRUE(reported || nothing_lost)
      << posted << " signaled WRs into a CQ of " << capacity << " entries: " << wr_ids.size()
      << " completions polled, no IBV_EVENT_CQ_ERR and no negative ibv_poll_cq (silent loss)";
  // What was kept must be the oldest completions, in order: nothing overwritten.
  for (size_t i = 0; i < wr_ids.size(); ++i) {
    ASSERT_EQ(wr_ids[i], i) << "completion " << i << " was overwritten by a later one";
  }
  EXPECT_LE(static_cast<int>(wr_ids.size()), std::max(capacity, posted));
}

CONFORMANCE_INSTANTIATE(CqOverrun);

}  // namespace
}  // namespace conformance
