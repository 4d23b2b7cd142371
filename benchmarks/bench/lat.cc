// lat: one operation in flight at a time, between one client and one server.
// - completion: the client posts one signaled READ/WRITE/SEND/CAS/FAA and spins on its
//   completion (herd14 Fig. 2's "signaled" latencies; perftest's ib_read_lat, ib_atomic_lat).
// - pingpong: client and server bounce a message; latency is half the round trip
//   (perftest's ib_write_lat and ib_send_lat; herd14's ECHO with unsignaled inline WRITEs
//   when --cq-mod is large and the payload is inline).
// With -e/--events a waiting side sleeps on a completion channel instead of polling
// (perftest's -e): the latency a program pays for giving its core away between messages.
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/modeled_pcie.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/tput_plan.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr std::uint32_t kRecvDepth = 64;
constexpr std::uint64_t kMarkerPeriod = 255;
constexpr std::uint32_t kSpinsPerCheck = 4096;
// A sleeper wakes at least this often to check the deadline and the stop flag.
constexpr int kEventSliceMs = 50;
static_assert((kSpinsPerCheck & (kSpinsPerCheck - 1)) == 0, "a power of two: checked with a mask");

// The byte a ping-pong message ends with in iteration i: never 0, never the previous one.
std::uint8_t Marker(std::uint64_t iteration) { return static_cast<std::uint8_t>(iteration % kMarkerPeriod + 1); }

class LatRun {
 public:
  explicit LatRun(Session& session) : session_(session), o_(session.options()) {}
  Report Run();

 private:
  void Setup();
  void PrepareWr(ibv_wr_opcode opcode, std::uint32_t size);
  void Post(ibv_wr_opcode opcode, std::uint32_t size, std::uint64_t iteration, bool signaled);
  void PostRecv(std::uint32_t slot);
  void WaitSendCompletion();
  void RetireUnsignaled();
  bool WaitRecv(const std::atomic<bool>* stop);
  bool SleepForCompletion(const std::atomic<bool>* stop, const char* waiting_for);
  bool WaitMarker(std::uint32_t size, std::uint64_t iteration, const std::atomic<bool>* stop);
  ResultRow MeasureClient(std::uint32_t size);
  void ServePingPong(std::uint32_t size, const std::atomic<bool>& stop);
  void CheckReceived(std::uint32_t size, std::uint64_t iteration);

  Session& session_;
  const Options& o_;
  VerbKind kind_ = VerbKind::kWrite;
  bool pingpong_ = false;
  ibv_qp_type qp_type_ = IBV_QPT_RC;
  std::uint32_t slot_bytes_ = 0;
  std::uint32_t inline_threshold_ = 0;
  CompChannelPtr channel_;  // -e/--events only; declared before the CQs that report to it
  CqPtr send_cq_, recv_cq_;
  QpPtr qp_;
  AhPtr ah_;
  std::uint32_t remote_qpn_ = 0;
  Region region_;  // [send slot][recv slots...]
  RemoteRegion remote_;
  std::uint64_t unsignaled_ = 0;
  std::uint64_t bad_bytes_ = 0;
  std::uint64_t checked_ = 0;
  std::uint64_t iteration_ = 0;
  std::uint32_t last_recv_slot_ = 0;
  ibv_send_wr wr_{};  // the prepared WR (PrepareWr) and its SGE
  ibv_sge sge_{};
  unsigned inline_flag_ = 0;
  std::uint32_t prepared_size_ = ~0u;  // ping-pong iterations so far (markers follow it)
};

void LatRun::Setup() {
  kind_ = ParseVerbKind(o_.verb);
  qp_type_ = ParseQpType(o_.connection);
  pingpong_ = o_.lat_method == "pingpong";
  const std::uint32_t max_size = *std::max_element(o_.sizes.begin(), o_.sizes.end());
  slot_bytes_ = SlotBytes(max_size + kUdGrhBytes);
  inline_threshold_ = o_.verb == "write_inline" ? (o_.inline_size ? o_.inline_size : max_size)
                                                : static_cast<std::uint32_t>(o_.inline_size);
  const Device& device = session_.device();
  if (qp_type_ == IBV_QPT_UD && max_size > MtuBytes(session_.address().mtu)) {
    Fail("--size ", max_size, " over UD exceeds the path MTU of ", MtuBytes(session_.address().mtu),
         " B: a UD message is one packet");
  }
  if (o_.events) channel_ = CreateCompChannel(device);
  send_cq_ = CreateCq(device, o_.tx_depth + 1, channel_.get());
  recv_cq_ = CreateCq(device, kRecvDepth, channel_.get());
  QpCaps caps;
  caps.type = qp_type_;
  caps.send_depth = static_cast<std::uint32_t>(o_.tx_depth);
  caps.recv_depth = kRecvDepth;
  caps.inline_bytes = std::min(inline_threshold_, max_size);
  qp_ = CreateQp(device, session_.pd(), send_cq_.get(), recv_cq_.get(), caps);
  region_ = MakeRegion(session_, std::uint64_t{slot_bytes_} * (1 + kRecvDepth));
  session_.Put("region", region_.Describe());
  const std::string peer = session_.PeerNames().at(0);
  remote_ = RemoteRegion::FromJson(session_.Get(peer, "region"));
  const auto rd_atomic = static_cast<std::uint8_t>(std::clamp(device.attr().max_qp_rd_atom, 1, 16));
  if (qp_type_ == IBV_QPT_UD) {
    session_.Put("endpoint", ToJson(Endpoint{qp_->qp_num, 0, session_.address()}));
    const Endpoint remote = EndpointFromJson(session_.Get(peer, "endpoint"));
    ActivateUdQp(qp_.get(), device, 0);
    ah_ = CreateAh(session_.pd(), device, session_.address(), remote.address);
    remote_qpn_ = remote.qpn;
  } else {
    session_.ConnectQps({{peer, 0, qp_.get()}}, rd_atomic);
  }
  for (std::uint32_t slot = 0; slot < kRecvDepth; ++slot) PostRecv(slot);
  session_.Barrier("connected");
}

void LatRun::PostRecv(std::uint32_t slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(region_.data()) + std::uint64_t{slot_bytes_} * (1 + slot), slot_bytes_,
              region_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int error_number = ibv_post_recv(qp_.get(), &wr, &bad);
  if (error_number != 0) FailErrno("ibv_post_recv", error_number);
}

void LatRun::PrepareWr(ibv_wr_opcode opcode, std::uint32_t size) {
  // Built once per payload size; Post() then changes only what differs per iteration.
  std::uint8_t* send_slot = region_.data();
  sge_ = {reinterpret_cast<std::uintptr_t>(send_slot), IsAtomicKind(kind_) ? 8u : size, region_.mr->lkey};
  wr_ = {};
  wr_.sg_list = &sge_;
  wr_.num_sge = size > 0 || IsAtomicKind(kind_) ? 1 : 0;
  wr_.opcode = opcode;
  const bool inline_payload = (opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_SEND) && size <= inline_threshold_;
  inline_flag_ = inline_payload ? unsigned{IBV_SEND_INLINE} : 0u;
  // Ping-pong WRITEs land in the peer's first receive slot; other one-sided ops too.
  const std::uint64_t remote_slot = remote_.address + slot_bytes_;
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_READ:
      wr_.wr.rdma = {remote_slot, remote_.rkey};
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      wr_.wr.atomic = {remote_slot, 1u, 0, remote_.rkey};
      break;
    case IBV_WR_SEND:
      if (qp_type_ == IBV_QPT_UD) wr_.wr.ud = {ah_.get(), remote_qpn_, kUdQkey};
      break;
    default:
      break;
  }
  prepared_size_ = size;
}

void LatRun::Post(ibv_wr_opcode opcode, std::uint32_t size, std::uint64_t iteration, bool signaled) {
  if (prepared_size_ != size || wr_.opcode != opcode) PrepareWr(opcode, size);
  std::uint8_t* send_slot = region_.data();
  if (opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_SEND) {
    if (o_.validate) FillPattern(send_slot, size, static_cast<std::uint32_t>(iteration));
    if (size > 0) send_slot[size - 1] = Marker(iteration);
  }
  wr_.wr_id = iteration;
  wr_.send_flags = (signaled ? unsigned{IBV_SEND_SIGNALED} : 0u) | inline_flag_;
  if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
    // Each CAS expects the value the previous one left: iteration i swaps i for i + 1.
    wr_.wr.atomic.compare_add = iteration;
    wr_.wr.atomic.swap = iteration + 1;
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(qp_.get(), &wr_, &bad);
  if (error_number != 0) Fail("ibv_post_send (latency): ", std::strerror(error_number));
}

void LatRun::WaitSendCompletion() {
  ibv_wc wc;
  std::uint32_t spins = 0;
  for (;;) {
    const int n = ibv_poll_cq(send_cq_.get(), 1, &wc);
    if (n > 0) {
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "measuring latency");
      return;
    }
    if (n < 0) Fail("ibv_poll_cq failed on the send CQ");
    if (channel_) {
      SleepForCompletion(nullptr, "a completion");
      continue;
    }
    // The deadline is read once per kSpinsPerCheck polls: a clock read between polls would
    // add its own cost to every measured latency.
    if ((++spins & (kSpinsPerCheck - 1)) == 0) {
      if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
      if (MonotonicNs() >= session_.deadline_ns()) Fail("--timeout ", o_.timeout_s, " s passed waiting for a completion");
    }
  }
}

// Unsignaled sends must be retired by a signaled one before the send queue fills.
void LatRun::RetireUnsignaled() {
  ibv_wc wc;
  while (ibv_poll_cq(send_cq_.get(), 1, &wc) > 0) {
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "ping-pong");
  }
}

bool LatRun::WaitRecv(const std::atomic<bool>* stop) {
  ibv_wc wc;
  std::uint32_t spins = 0;
  for (;;) {
    const int n = ibv_poll_cq(recv_cq_.get(), 1, &wc);
    if (n > 0) {
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving");
      last_recv_slot_ = static_cast<std::uint32_t>(wc.wr_id);
      PostRecv(last_recv_slot_);
      return true;
    }
    if (channel_) {
      if (!SleepForCompletion(stop, "a message")) return false;
      RetireUnsignaled();  // the event may be a send's, an error among them
      continue;
    }
    if ((++spins & (kSpinsPerCheck - 1)) == 0) {
      if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
      RetireUnsignaled();  // a send that failed (the peer died) ends the wait with its error
      if (MonotonicNs() >= session_.deadline_ns()) Fail("--timeout ", o_.timeout_s, " s passed waiting for a message");
    }
  }
}

// One completion event on the channel (the caller polls again); false once `stop` is set.
bool LatRun::SleepForCompletion(const std::atomic<bool>* stop, const char* waiting_for) {
  while (!AwaitCqEvent(channel_.get(), kEventSliceMs)) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
    if (MonotonicNs() >= session_.deadline_ns()) Fail("--timeout ", o_.timeout_s, " s passed waiting for ", waiting_for);
  }
  return true;
}

bool LatRun::WaitMarker(std::uint32_t size, std::uint64_t iteration, const std::atomic<bool>* stop) {
  const volatile std::uint8_t* last = region_.data() + slot_bytes_ + size - 1;
  const std::uint8_t marker = Marker(iteration);
  std::uint32_t spins = 0;
  while (*last != marker) {
    if ((++spins & (kSpinsPerCheck - 1)) == 0) {
      if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
      RetireUnsignaled();
      if (MonotonicNs() >= session_.deadline_ns()) Fail("--timeout ", o_.timeout_s, " s passed waiting for the peer's WRITE");
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

void LatRun::CheckReceived(std::uint32_t size, std::uint64_t iteration) {
  if (!o_.validate || size < 2) return;
  // A SEND landed in the receive slot it consumed (after the GRH on UD); a WRITE in slot 0.
  const std::uint32_t slot = kind_ == VerbKind::kSend ? last_recv_slot_ : 0;
  const std::uint8_t* data = region_.data() + std::uint64_t{slot_bytes_} * (1 + slot) +
                             (qp_type_ == IBV_QPT_UD ? kUdGrhBytes : 0);
  bad_bytes_ += PatternMismatches(data, size - 1, static_cast<std::uint32_t>(iteration));
  ++checked_;
}

ibv_wr_opcode Opcode(VerbKind kind) {
  switch (kind) {
    case VerbKind::kRead: return IBV_WR_RDMA_READ;
    case VerbKind::kWrite: return IBV_WR_RDMA_WRITE;
    case VerbKind::kSend: return IBV_WR_SEND;
    case VerbKind::kCas: return IBV_WR_ATOMIC_CMP_AND_SWP;
    case VerbKind::kFaa: return IBV_WR_ATOMIC_FETCH_AND_ADD;
  }
  return IBV_WR_RDMA_WRITE;
}

ResultRow LatRun::MeasureClient(std::uint32_t size) {
  const TscClock& clock = session_.clock();
  const std::uint64_t iterations = o_.duration_s > 0 ? 0 : IterationsOrDefault(o_, 1000);
  const std::uint64_t warmup_end = session_.clock().Now() + clock.NsToTicks(static_cast<std::uint64_t>(o_.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.duration_s * 1e9));
  const ibv_wr_opcode opcode = Opcode(kind_);
  ResultRow row = LatencyRow(size, IsAtomicKind(kind_) ? 8 : size, pingpong_ ? "half_rtt" : "completion");
  std::uint64_t measure_start = 0;
  std::uint64_t measured = 0;
  for (std::uint64_t i = iteration_; ; ++i) {
    const std::uint64_t begin = session_.clock().Now();
    if (pingpong_) {
      const bool signaled = (i + 1) % static_cast<std::uint64_t>(o_.cq_mod) == 0;
      Post(opcode, size, i, signaled);
      if (kind_ == VerbKind::kSend) {
        WaitRecv(nullptr);
      } else {
        WaitMarker(size, i, nullptr);
      }
      RetireUnsignaled();
      CheckReceived(size, i);
    } else {
      Post(opcode, size, i, true);
      WaitSendCompletion();
    }
    const std::uint64_t end = session_.clock().Now();
    iteration_ = i + 1;
    if (end < warmup_end) continue;
    if (measure_start == 0) measure_start = begin;
    const std::uint64_t ticks = end - begin;
    row.latency_ns->Record(clock.TicksToNs(pingpong_ ? ticks / 2 : ticks));
    ++measured;
    if (iterations != 0 ? measured >= iterations : end - measure_start >= duration_ticks) {
      row.ops = measured;
      row.duration_s = static_cast<double>(clock.TicksToNs(end - measure_start)) / 1e9;
      return row;
    }
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
  }
}

void LatRun::ServePingPong(std::uint32_t size, const std::atomic<bool>& stop) {
  const ibv_wr_opcode opcode = Opcode(kind_);
  for (std::uint64_t i = iteration_;; ++i) {
    const bool arrived = kind_ == VerbKind::kSend ? WaitRecv(&stop) : WaitMarker(size, i, &stop);
    if (!arrived) return;
    CheckReceived(size, i);
    Post(opcode, size, i, (i + 1) % static_cast<std::uint64_t>(o_.cq_mod) == 0);
    RetireUnsignaled();
    iteration_ = i + 1;
  }
}

Report LatRun::Run() {
  Setup();
  Report report;
  for (std::size_t s = 0; s < o_.sizes.size(); ++s) {
    const std::uint32_t size = o_.sizes[s];
    const std::string suffix = "/" + std::to_string(s);
    session_.Barrier("start" + suffix);
    if (session_.role() == "client") {
      report.rows.push_back(MeasureClient(size));
      if (report.pcie_modeled.is_null()) report.pcie_modeled = {{"rows", json::array()}};
      const bool inline_payload = (kind_ == VerbKind::kWrite || kind_ == VerbKind::kSend) && size <= inline_threshold_;
      const WorkShape shape{kind_, qp_type_, size, inline_payload, false, 1, 1, pingpong_ ? o_.cq_mod : 1,
                            session_.device().ethernet(), MtuBytes(session_.address().mtu)};
      json modeled = ModeledPcie(shape, report.rows.back().ops, true);
      modeled["size_bytes"] = size;
      report.pcie_modeled["rows"].push_back(modeled);
      session_.Barrier("done" + suffix);
    } else {
      // The server answers ping-pongs, or re-posts RECVs for completion-timed SENDs, until
      // the client reaches the done barrier.
      std::atomic<bool> stop{false};
      std::exception_ptr error;
      std::thread server([&] {
        try {
          if (pingpong_) {
            ServePingPong(size, stop);
          } else if (kind_ == VerbKind::kSend) {
            while (WaitRecv(&stop)) {
            }
          }
        } catch (...) {
          error = std::current_exception();
          g_abort.store(true);
        }
      });
      try {
        session_.Barrier("done" + suffix);
      } catch (...) {
        stop.store(true);
        server.join();
        throw;
      }
      stop.store(true);
      server.join();
      if (error) std::rethrow_exception(error);
      ResultRow row;
      row.size_bytes = size;
      row.rate_measured = false;
      report.rows.push_back(std::move(row));
    }
    // Ping-pong markers continue across sizes: both sides count the same iterations.
    if (pingpong_) {
      const std::uint64_t mine = iteration_;
      session_.Put("iterations" + suffix, mine);
      const auto theirs = session_.Get(session_.PeerNames().at(0), "iterations" + suffix).get<std::uint64_t>();
      iteration_ = std::max(mine, theirs);
      std::memset(region_.data() + slot_bytes_, 0, slot_bytes_);
      session_.Barrier("reset" + suffix);
    }
  }
  session_.Barrier("finished");
  const bool ok = bad_bytes_ == 0;
  report.validation = {{"enabled", o_.validate}, {"checked_messages", checked_}, {"bad_bytes", bad_bytes_}, {"ok", ok}};
  return report;
}

}  // namespace

void CheckLat(Options& options) {
  if (options.verb.empty()) options.verb = "write";
  const VerbKind kind = ParseVerbKind(options.verb);
  const bool one_sided_read = kind == VerbKind::kRead || IsAtomicKind(kind);
  if (options.lat_method.empty()) options.lat_method = one_sided_read ? "completion" : "pingpong";
  if (options.lat_method == "pingpong" && one_sided_read) {
    Fail("--lat-method pingpong with --verb ", options.verb, ": only WRITE and SEND can ping-pong; use completion");
  }
  if (options.connection == "UD" && kind != VerbKind::kSend) {
    Fail("--verb ", options.verb, " over UD is impossible: UD carries only SEND");
  }
  if (options.connection == "UC" && one_sided_read) {
    Fail("--verb ", options.verb, " over UC is impossible: UC carries WRITE and SEND only (use -c RC)");
  }
  if (options.events && options.lat_method == "pingpong" && kind != VerbKind::kSend) {
    Fail("-e/--events with --verb ", options.verb, " ping-pong: a WRITE ping-pong sees the peer's message by its ",
         "last byte, not by a completion; use --verb send (or --lat-method completion)");
  }
  if (options.header_only) Fail("--header-only is a tput option; lat measures payload-carrying operations");
  if (options.peers != 1) Fail("lat measures one client against one server: --peers ", options.peers, " must be 1");
  if (IsAtomicKind(kind)) {
    if (options.sizes.empty()) options.sizes.push_back(8);
    for (auto size : options.sizes) {
      if (size != 8) Fail("--size ", size, " with --verb ", options.verb, ": atomics move exactly 8 bytes");
    }
  }
  DefaultSizes(options, 8);
  for (auto size : options.sizes) {
    if (options.lat_method == "pingpong" && size == 0) {
      Fail("--size 0 with ping-pong: the peer detects a message by its last byte, so at least 1 byte");
    }
    if (options.verb == "write_inline" && options.inline_size != 0 && static_cast<std::uint32_t>(options.inline_size) < size) {
      Fail("--verb write_inline with --inline_size ", options.inline_size, " < --size ", size);
    }
  }
  if (options.cq_mod > options.tx_depth) {
    Fail("--cq-mod ", options.cq_mod, " exceeds --tx-depth ", options.tx_depth, ": unsignaled WRs would fill the queue");
  }
}

Report RunLat(Session& session) { return LatRun(session).Run(); }

}  // namespace rdmalab::bench
