// Atomics from two processes: each helper does kFetchAddsPerProcess FETCH_AND_ADDs of 1 on
// one counter of the test process; the final count is exact and the returned originals
// of both processes together are exactly 0 .. 2N-1 (no two adds saw the same value).
#include <algorithm>

#include "process_fixture.h"

namespace conformance {
namespace {

constexpr uint64_t kFetchAddsPerProcess = 10'000;
constexpr int kProcesses = 2;
constexpr std::chrono::milliseconds kRunTimeoutMs{120'000};
constexpr uint8_t kGo = 'g';

CONFORMANCE_HELPER(fetch_add_client) {
  if (args.size() != 2) return HelperFail("fetch_add_client DEVICE COUNT");
  Side side;
  std::string error;
  if (!OpenAndConnect(args[0], 4096, {}, channel, &side, &error)) return HelperFail(error);
  uint8_t go = 0;
  if (!channel.RecvValue(&go, kHandshakeTimeoutMs) || go != kGo) return HelperFail("no go from the test");
  const uint64_t count = std::stoull(args[1]);
  std::vector<uint64_t> originals;
  originals.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const int rc = PostSend(side.ep->qp(), {.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .sges = {Sge(side.buffer, 0, 8)},
                                            .wr_id = i, .remote_addr = side.remote.mr.addr,
                                            .rkey = side.remote.mr.rkey, .compare_add = 1});
    if (rc != 0) return HelperFail("ibv_post_send(FETCH_AND_ADD) " + std::to_string(i) + ": " + strerror(rc));
    std::optional<ibv_wc> wc = PollOne(side.ep->send_cq());
    if (!wc) return HelperFail("no completion for FETCH_AND_ADD " + std::to_string(i));
    if (wc->status != IBV_WC_SUCCESS) return HelperFail("FETCH_AND_ADD: " + Describe(*wc));
    const uint64_t original = *reinterpret_cast<volatile uint64_t*>(side.buffer.data());
    originals.push_back(original);
  }
  if (!channel.SendVector(originals)) return HelperFail("sending results");
  return 0;
}

class MultiProcessAtomics : public ProcessTest {};

TEST_P(MultiProcessAtomics, FetchAddFromTwoProcessesIsExact) {
  std::unique_ptr<Child> children[kProcesses];
  for (auto& child : children)
    CONFORMANCE_SETUP(Spawn(&child, "fetch_add_client", {local_name(), std::to_string(kFetchAddsPerProcess)}));
  // The counter lives in the test process, on the peer device; one QP per helper.
  std::string error;
  std::unique_ptr<Device> device = Device::Open(peer_name(), &error);
  ASSERT_TRUE(device != nullptr) << error;
  if (device->attr().atomic_cap == IBV_ATOMIC_NONE) GTEST_SKIP() << "no atomics on " << peer_name();
  Buffer counter = Buffer::Make(device->pd(), 4096, kAllRemoteAccess, &error);
  ASSERT_TRUE(static_cast<bool>(counter)) << error;
  std::unique_ptr<Endpoint> eps[kProcesses];
  for (int i = 0; i < kProcesses; ++i) {
    int err = 0;
    eps[i] = Endpoint::Create(*device, {.type = IBV_QPT_RC}, &err, &error);
    ASSERT_TRUE(eps[i] != nullptr) << error;
    Hello mine{eps[i]->info(), {counter.addr(), counter.rkey(), 0, 8}};
    Hello theirs{};
    ASSERT_TRUE(children[i]->channel().SendValue(mine));
    ASSERT_TRUE(children[i]->channel().RecvValue(&theirs, kHandshakeTimeoutMs)) << "helper " << i << " never said hello";
    ASSERT_EQ(Connect(*eps[i], theirs.qp), 0);
  }
  for (auto& child : children) ASSERT_TRUE(child->channel().SendValue(kGo));
  std::vector<uint64_t> all;
  for (int i = 0; i < kProcesses; ++i) {
    std::vector<uint64_t> originals;
    ASSERT_TRUE(children[i]->channel().RecvVector(&originals, kRunTimeoutMs)) << "helper " << i << " sent no results";
    ASSERT_EQ(originals.size(), kFetchAddsPerProcess);
    EXPECT_TRUE(std::is_sorted(originals.begin(), originals.end())) << "one process saw the counter go backwards";
    all.insert(all.end(), originals.begin(), originals.end());
  }
  for (auto& child : children) ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*child));
  const uint64_t total = kFetchAddsPerProcess * kProcesses;
  EXPECT_EQ(*reinterpret_cast<volatile uint64_t*>(counter.data()), total) << "lost or duplicated FETCH_AND_ADDs";
  std::sort(all.begin(), all.end());
  for (uint64_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(all[i], i) << "returned originals are not exactly 0.." << total - 1 << " (duplicate or gap)";
}

CONFORMANCE_INSTANTIATE(MultiProcessAtomics);

}  // namespace
}  // namespace conformance
