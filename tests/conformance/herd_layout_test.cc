// The process layout of the original HERD (SIGCOMM'14 release), with our own code: a
// master process creates a SysV huge-page segment under a key, registers it and hands out
// its rkey; a worker process, which registers nothing, attaches the same segment by key
// (shmget + shmat) and polls it for requests; the client (this test) RDMA WRITEs requests
// into it over UC and gets each response in a UD SEND from the worker. On a NIC every
// attacher sees the WRITEs; a provider that copies the registered segment leaves the
// worker polling memory no WRITE reaches, and the client waits forever.
#include <sys/shm.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "process_fixture.h"
#include "shared_memory.h"

namespace conformance {
namespace {

constexpr uint64_t kRequests = 100'000;
constexpr uint32_t kWindow = 16;  // request slots; one request in flight per slot
constexpr uint32_t kPayloadWords = 7;
constexpr size_t kSegmentBytes = kHugePageBytes;
constexpr uint32_t kSignalEvery = 64;  // UC WRITEs and UD SENDs per signaled one
constexpr uint32_t kSendQueueDepth = 256;
constexpr uint32_t kRecvDepth = 2 * kWindow;
constexpr uint32_t kCheckChannelEvery = 4096;  // worker poll rounds between looks at the channel
constexpr std::chrono::milliseconds kRunTimeoutMs{240'000};
static_assert(kSignalEvery <= kSendQueueDepth / 2);

// A request slot as the worker polls it: the sequence number last, so that seeing it
// means the whole request is there (RDMA WRITEs become visible in address order). The
// worker waits for the exact number it expects next in the slot, not for any change: the
// word itself may be seen half-written (kernel rxe's memcpy is byte-wise in the TCG guest,
// so 0x1ff -> 0x200 can read 0x100), and only the whole new value equals the expected one.
struct Request {
  uint64_t payload[kPayloadWords];
  uint64_t seq;
};
static_assert(sizeof(Request) == 64);

struct Response {
  uint64_t slot;
  uint64_t seq;
};

struct MasterHello {
  Hello hello;
  int32_t unavailable = 0;
  char reason[240] = {};
};

struct WorkerReport {
  uint64_t requests = 0;
  uint64_t corrupt = 0;
};

uint64_t PayloadWord(uint64_t seq, uint32_t word) { return seq * 0x9e3779b97f4a7c15ull + word; }

constexpr uint8_t kReady = 'r';
constexpr uint8_t kQuit = 'q';

// The master: creates and registers the segment, connects its UC QP, and stays until told.
CONFORMANCE_HELPER(herd_master) {
  if (args.size() != 2) return HelperFail("herd_master DEVICE KEY");
  MasterHello hello;
  std::string reason, error;
  bool unavailable = false;
  std::unique_ptr<SharedArea> segment =
      SharedArea::Create(SharedKind::kSysvHuge, kSegmentBytes, key_t(std::stol(args[1])), &reason, &unavailable);
  if (!segment) {
    hello.unavailable = unavailable ? 1 : 0;
    std::snprintf(hello.reason, sizeof(hello.reason), "%s", reason.c_str());
    channel.SendValue(hello);
    return unavailable ? 0 : HelperFail(reason);
  }
  std::unique_ptr<Device> device = Device::Open(args[0], &error);
  if (!device) return HelperFail(error);
  MrPtr mr(ibv_reg_mr(device->pd(), segment->data(), kSegmentBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!mr) return HelperFail(std::string("ibv_reg_mr on the SysV huge-page segment: ") + strerror(errno));
  int err = 0;
  std::unique_ptr<Endpoint> ep = Endpoint::Create(*device, {.type = IBV_QPT_UC}, &err, &error);
  if (!ep) return HelperFail(error);
  hello.hello = {ep->info(), {uint64_t(uintptr_t(segment->data())), mr->rkey, 0, kSegmentBytes}};
  QpInfo client;
  if (!channel.SendValue(hello) || !channel.RecvValue(&client, kHandshakeTimeoutMs)) return HelperFail("handshake");
  if (Connect(*ep, client) != 0) return HelperFail("connecting the UC QP");
  if (!channel.SendValue(kReady)) return HelperFail("ready");
  uint8_t quit = 0;
  if (!channel.RecvValue(&quit, kRunTimeoutMs + kHandshakeTimeoutMs)) return HelperFail("never told to quit");
  return 0;
}

// The worker: attaches the segment by key, as HERD's workers do, and answers each request.
CONFORMANCE_HELPER(herd_worker) {
  if (args.size() != 2) return HelperFail("herd_worker DEVICE KEY");
  int shmid = shmget(key_t(std::stol(args[1])), 0, 0);
  void* attached = shmid < 0 ? reinterpret_cast<void*>(-1) : shmat(shmid, nullptr, 0);
  if (attached == reinterpret_cast<void*>(-1)) return HelperFail(std::string("attaching by key: ") + strerror(errno));
  auto* slots = static_cast<Request*>(attached);
  std::string error;
  std::unique_ptr<Device> device = Device::Open(args[0], &error);
  if (!device) return HelperFail(error);
  int err = 0;
  std::unique_ptr<Endpoint> ep =
      Endpoint::Create(*device, {.type = IBV_QPT_UD, .send_wr = kSendQueueDepth}, &err, &error);
  if (!ep) return HelperFail(error);
  if (Connect(*ep, {}) != 0) return HelperFail("UD QP to RTS");
  Buffer responses = Buffer::Make(device->pd(), kWindow * sizeof(Response), IBV_ACCESS_LOCAL_WRITE, &error);
  if (!responses) return HelperFail(error);
  QpInfo client;
  if (!channel.SendValue(ep->info()) || !channel.RecvValue(&client, kHandshakeTimeoutMs)) return HelperFail("handshake");
  ibv_ah_attr ah_attr = AhAttr(*device, client, false);
  AhPtr ah(ibv_create_ah(device->pd(), &ah_attr));
  if (!ah) return HelperFail(std::string("ibv_create_ah: ") + strerror(errno));

  WorkerReport report;
  uint64_t expected_seq[kWindow];  // the client's numbering, below
  for (uint32_t slot = 0; slot < kWindow; ++slot) expected_seq[slot] = slot + 1;
  for (uint64_t round = 1;; ++round) {
    for (uint32_t slot = 0; slot < kWindow; ++slot) {
      uint64_t seq = std::atomic_ref<uint64_t>(slots[slot].seq).load(std::memory_order_acquire);
      if (seq != expected_seq[slot]) continue;
      expected_seq[slot] += kWindow;
      for (uint32_t word = 0; word < kPayloadWords; ++word) {
        if (slots[slot].payload[word] != PayloadWord(seq, word)) {
          ++report.corrupt;
          break;
        }
      }
      auto* response = reinterpret_cast<Response*>(responses.data()) + slot;
      *response = {slot, seq};
      bool signaled = ++report.requests % kSignalEvery == 0;
      int rc = PostSend(ep->qp(), {.opcode = IBV_WR_SEND,
                                   .sges = {Sge(responses, slot * sizeof(Response), sizeof(Response))},
                                   .flags = signaled ? unsigned(IBV_SEND_SIGNALED) : 0u, .ah = ah.get(),
                                   .remote_qpn = client.qpn});
      if (rc != 0) return HelperFail(std::string("UD SEND of a response: ") + strerror(rc));
      if (signaled) {
        std::optional<ibv_wc> wc = PollOne(ep->send_cq());
        if (!wc || wc->status != IBV_WC_SUCCESS) return HelperFail("a response SEND did not complete");
      }
    }
    if (round % kCheckChannelEvery == 0 && channel.Readable()) break;
  }
  shmdt(attached);
  return channel.SendValue(report) ? 0 : HelperFail("report");
}

// Removes the segment of `key` when the test ends: a master killed by a failure cannot.
struct SegmentRemover {
  key_t key;
  ~SegmentRemover() {
    int shmid = shmget(key, 0, 0);
    if (shmid >= 0) shmctl(shmid, IPC_RMID, nullptr);
  }
};

// The test's client: UC WRITEs of requests into the master's segment, one request in
// flight per window slot, and the worker's answers as UD SENDs.
struct HerdClient {
  static constexpr size_t kRecvBytes = kGrhBytes + sizeof(Response);

  // The device, both QPs (requests connected to the master's), the buffers and the RECVs.
  void Open(const std::string& device_name, const QpInfo& master_qp) {
    std::string error;
    device = Device::Open(device_name, &error);
    ASSERT_TRUE(device != nullptr) << error;
    int err = 0;
    requests = Endpoint::Create(*device, {.type = IBV_QPT_UC, .send_wr = kSendQueueDepth}, &err, &error);
    ASSERT_TRUE(requests != nullptr) << error;
    responses = Endpoint::Create(*device, {.type = IBV_QPT_UD, .recv_wr = kRecvDepth}, &err, &error);
    ASSERT_TRUE(responses != nullptr) << error;
    ASSERT_EQ(Connect(*requests, master_qp), 0);
    ASSERT_EQ(Connect(*responses, {}), 0);
    staging = Buffer::Make(device->pd(), kWindow * sizeof(Request), IBV_ACCESS_LOCAL_WRITE, &error);
    ASSERT_TRUE(static_cast<bool>(staging)) << error;
    inbox = Buffer::Make(device->pd(), kRecvDepth * kRecvBytes, IBV_ACCESS_LOCAL_WRITE, &error);
    ASSERT_TRUE(static_cast<bool>(inbox)) << error;
    for (uint32_t i = 0; i < kRecvDepth; ++i) {
      ASSERT_EQ(PostRecv(responses->qp(), {Sge(inbox, i * kRecvBytes, kRecvBytes)}, i), 0);
    }
    for (uint32_t slot = 0; slot < kWindow; ++slot) next_seq[slot] = slot + 1;
  }

  // Slot s carries requests s+1, s+1+kWindow, ...; a slot is written again only after the
  // worker answered its last request.
  void IssueToFreeSlots(const RemoteMr& segment) {
    for (uint32_t slot = 0; slot < kWindow; ++slot) {
      if (in_flight[slot] != 0 || next_seq[slot] > kRequests) continue;
      uint64_t seq = next_seq[slot];
      auto* request = reinterpret_cast<Request*>(staging.data()) + slot;
      for (uint32_t word = 0; word < kPayloadWords; ++word) request->payload[word] = PayloadWord(seq, word);
      request->seq = seq;
      bool signaled = ++sent % kSignalEvery == 0;
      ASSERT_EQ(PostSend(requests->qp(), {.opcode = IBV_WR_RDMA_WRITE,
                                          .sges = {Sge(staging, slot * sizeof(Request), sizeof(Request))},
                                          .flags = signaled ? unsigned(IBV_SEND_SIGNALED) : 0u,
                                          .remote_addr = segment.addr + slot * sizeof(Request),
                                          .rkey = segment.rkey}),
                0);
      if (signaled) {
        std::optional<ibv_wc> wc = PollOne(requests->send_cq());
        ASSERT_TRUE(wc.has_value() && wc->status == IBV_WC_SUCCESS) << "a request WRITE did not complete";
      }
      in_flight[slot] = seq;
      next_seq[slot] = seq + kWindow;
    }
  }

  // Takes one answer if one has come (`*took`): it must be for the request in flight on its
  // slot, which is then free; its RECV is posted again.
  void TakeResponse(bool* took) {
    ibv_wc wc{};
    int polled = ibv_poll_cq(responses->recv_cq(), 1, &wc);
    ASSERT_GE(polled, 0);
    *took = polled != 0;
    if (!*took) return;
    ASSERT_WC_STATUS(wc, IBV_WC_SUCCESS);
    Response response;
    std::memcpy(&response, inbox.data() + wc.wr_id * kRecvBytes + kGrhBytes, sizeof(response));
    ASSERT_LT(response.slot, kWindow);
    ASSERT_EQ(response.seq, in_flight[response.slot]) << "a response for a request not in flight";
    in_flight[response.slot] = 0;
    ++answered;
    ASSERT_EQ(PostRecv(responses->qp(), {Sge(inbox, wc.wr_id * kRecvBytes, kRecvBytes)}, wc.wr_id), 0);
  }

  std::unique_ptr<Device> device;
  std::unique_ptr<Endpoint> requests, responses;
  Buffer staging, inbox;
  uint64_t in_flight[kWindow] = {};
  uint64_t next_seq[kWindow] = {};
  uint64_t sent = 0, answered = 0;
};

class HerdLayout : public ProcessTest {};

TEST_P(HerdLayout, WorkerAttachedToTheSegmentAnswersEveryRequest) {
  static uint32_t runs = 0;
  const SegmentRemover segment{key_t(0x48000000 | ((getpid() & 0xffff) << 8) | (runs++ & 0xff))};
  const key_t key = segment.key;
  std::unique_ptr<Child> master, worker;  // after `segment`: killed before it is removed
  CONFORMANCE_SETUP(Spawn(&master, "herd_master", {peer_name(), std::to_string(key)}));
  MasterHello hello;
  ASSERT_TRUE(master->channel().RecvValue(&hello, kHandshakeTimeoutMs)) << "the master never said hello";
  if (hello.unavailable) GTEST_SKIP() << "no SysV huge-page segment: " << hello.reason;
  ASSERT_EQ(hello.reason[0], '\0') << hello.reason;
  CONFORMANCE_SETUP(Spawn(&worker, "herd_worker", {peer_name(), std::to_string(key)}));

  HerdClient client;  // after the helpers: its QPs go first
  ASSERT_NO_FATAL_FAILURE(client.Open(local_name(), hello.hello.qp));
  QpInfo worker_info;
  ASSERT_TRUE(worker->channel().RecvValue(&worker_info, kHandshakeTimeoutMs)) << "the worker never said hello";
  ASSERT_TRUE(worker->channel().SendValue(client.responses->info()));
  ASSERT_TRUE(master->channel().SendValue(client.requests->info()));
  uint8_t ready = 0;
  ASSERT_TRUE(master->channel().RecvValue(&ready, kHandshakeTimeoutMs));

  const auto deadline = Clock::now() + kRunTimeoutMs;
  while (client.answered < kRequests) {
    ASSERT_NO_FATAL_FAILURE(client.IssueToFreeSlots(hello.hello.mr));
    bool took = false;
    ASSERT_NO_FATAL_FAILURE(client.TakeResponse(&took));
    if (!took) {
      ASSERT_LT(Clock::now(), deadline) << client.answered << " of " << kRequests << " requests answered after "
                                        << kRunTimeoutMs.count() << " ms (" << client.sent
                                        << " written): the worker does not see the client's WRITEs";
    }
  }

  ASSERT_TRUE(worker->channel().SendValue(kQuit));
  WorkerReport report;
  ASSERT_TRUE(worker->channel().RecvValue(&report, kHandshakeTimeoutMs)) << "the worker sent no report";
  EXPECT_EQ(report.requests, kRequests) << "the worker saw another number of requests than were sent";
  EXPECT_EQ(report.corrupt, 0u) << "requests the worker saw before their payload";
  ASSERT_TRUE(master->channel().SendValue(kQuit));
  ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*worker));
  ASSERT_NO_FATAL_FAILURE(ExpectCleanExit(*master));
}

CONFORMANCE_INSTANTIATE(HerdLayout);

}  // namespace
}  // namespace conformance
