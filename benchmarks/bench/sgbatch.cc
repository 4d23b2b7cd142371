// sgbatch: hardware-assisted batching for a software router (roce Fig. 9-10). Two hosts
// forward packets to each other with SEND/RECV over RC or UC. Packets of --size bytes lie
// scattered in a packet pool; one SEND gathers k = --sge of them, and the receiver
// scatters them back into k pool packets with a k-SGE RECV.
// The client generates: it keeps --tx-depth messages in flight, each stamped in its first
// packet with t1. The server forwards: on the RECV completion (t2) it stamps the
// turnaround t3 - t2 and SENDs the same k packet buffers back (zero copy, t3); it re-posts
// a batch's RECV once that SEND completed. The client, at t4, takes the one-way latency
// ((t4 - t1) - (t3 - t2)) / 2, which needs no synchronized clocks.
// Throughput counts packets the client gets back; wire_gbps adds 72 bytes of RoCE headers
// per MTU-sized packet of each message.
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/tput_plan.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr std::uint32_t kRoceHeaderBytesPerPacket = 72;  // systems.md: per RoCE packet on the wire
constexpr int kMaxPacketsPerWr = 32;                     // ConnectX-3's SGE limit, the paper's range
constexpr std::uint64_t kStopCheckMask = 0x3FF;
static_assert(kMaxPacketsPerWr <= kMaxSges, "the gather list fits the core's SGE bound");

// A pool of packet buffers in which the k packets of one batch are not neighbours.
class PacketPool {
 public:
  PacketPool() = default;
  PacketPool(const Session& session, std::uint32_t batches, std::uint32_t k, std::uint32_t size, std::uint64_t seed)
      : k_(k), stride_(SlotBytes(size)), size_(size) {
    const std::uint32_t packets = batches * k;
    region_ = MakeRegion(session, std::uint64_t{packets} * stride_);
    place_.resize(packets);
    std::iota(place_.begin(), place_.end(), 0u);
    std::mt19937_64 rng(seed);
    std::shuffle(place_.begin(), place_.end(), rng);
  }
  std::uint8_t* Packet(std::uint32_t batch, std::uint32_t j) const {
    return region_.data() + std::uint64_t{place_[std::uint64_t{batch} * k_ + j]} * stride_;
  }
  // The gather/scatter list of one batch.
  void Sges(std::uint32_t batch, ibv_sge* sges) const {
    for (std::uint32_t j = 0; j < k_; ++j) {
      sges[j] = {reinterpret_cast<std::uintptr_t>(Packet(batch, j)), size_, region_.mr->lkey};
    }
  }

 private:
  Region region_;
  std::vector<std::uint32_t> place_;
  std::uint32_t k_ = 1, stride_ = 64, size_ = 64;
};

class SgbatchRun {
 public:
  explicit SgbatchRun(Session& session)
      : session_(session), o_(session.options()), k_(static_cast<std::uint32_t>(o_.sge)), size_(o_.sizes.at(0)),
        window_(static_cast<std::uint32_t>(o_.tx_depth)) {}
  Report Run();

 private:
  void Setup();
  void PostRecv(std::uint32_t batch);
  void PostSend(std::uint32_t batch, bool signal_now);
  void RetireForwarded();
  void Forward();
  ResultRow Generate();
  void AddWireFigures(ResultRow& row, double wrs_per_s) const;
  void FillForValidation(std::uint32_t batch, std::uint64_t seq);
  std::uint64_t CountBadBytes(std::uint32_t batch, std::uint64_t seq) const;

  Session& session_;
  const Options& o_;
  std::uint32_t k_;
  std::uint32_t size_;
  std::uint32_t window_;
  std::uint32_t recv_batches_ = 0;
  CqPtr send_cq_, recv_cq_;
  QpPtr qp_;
  PacketPool send_pool_;  // client: one batch per window slot
  PacketPool recv_pool_;  // server: also the forwarding source
  SendRing ring_;
  std::vector<std::uint32_t> batch_of_send_;  // server: which batch each outstanding SEND carries
  std::atomic<bool> stop_{false};
  std::uint64_t forwarded_ = 0;
  std::uint64_t checked_ = 0, bad_bytes_ = 0, bad_messages_ = 0;
};


void SgbatchRun::Setup() {
  const Device& device = session_.device();
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  // The forwarder holds a batch from its RECV until its SEND is retired: the client's
  // window plus the SENDs a signaled completion has yet to cover.
  recv_batches_ = session_.is_server() ? 2 * (window_ + cq_mod) : window_;
  const std::uint32_t send_depth = session_.is_server() ? recv_batches_ : window_ + cq_mod;
  send_cq_ = CreateCq(device, static_cast<int>(send_depth));
  recv_cq_ = CreateCq(device, static_cast<int>(recv_batches_));
  QpCaps caps;
  caps.type = ParseQpType(o_.connection);
  caps.send_depth = send_depth;
  caps.recv_depth = recv_batches_;
  caps.send_sges = caps.recv_sges = k_;
  caps.inline_bytes = static_cast<std::uint32_t>(o_.inline_size);
  qp_ = CreateQp(device, session_.pd(), send_cq_.get(), recv_cq_.get(), caps);
  ring_ = {qp_.get(), 0, send_depth, cq_mod};
  const std::uint64_t seed = o_.seed + (session_.is_server() ? 0x5EED : 0);
  recv_pool_ = PacketPool(session_, recv_batches_, k_, size_, seed);
  if (!session_.is_server()) send_pool_ = PacketPool(session_, window_, k_, size_, seed + 1);
  batch_of_send_.assign(send_depth, 0);
  session_.ConnectQps({{session_.PeerNames().at(0), 0, qp_.get()}}, 1);
  for (std::uint32_t batch = 0; batch < recv_batches_; ++batch) PostRecv(batch);
}

void SgbatchRun::PostRecv(std::uint32_t batch) {
  ibv_sge sges[kMaxPacketsPerWr];
  recv_pool_.Sges(batch, sges);
  ibv_recv_wr wr{};
  wr.wr_id = batch;
  wr.sg_list = sges;
  wr.num_sge = static_cast<int>(k_);
  PostRecvOrFail(qp_.get(), &wr, "sgbatch");
}

// SENDs one batch: from the client's send pool, or (server) back out of the receive pool.
void SgbatchRun::PostSend(std::uint32_t batch, bool signal_now) {
  ibv_sge sges[kMaxPacketsPerWr];
  (session_.is_server() ? recv_pool_ : send_pool_).Sges(batch, sges);
  ibv_send_wr wr{};
  const std::uint64_t seq = ring_.posted;
  wr.wr_id = ring_.WrId(seq);
  wr.sg_list = sges;
  wr.num_sge = static_cast<int>(k_);
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = (signal_now || ring_.Signaled(seq) ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                  (k_ * size_ <= static_cast<std::uint32_t>(o_.inline_size) ? unsigned{IBV_SEND_INLINE} : 0u);
  batch_of_send_[seq % batch_of_send_.size()] = batch;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(qp_.get(), &wr, &bad);
  if (error_number != 0) Fail("ibv_post_send of ", k_, " gathered packets: ", std::strerror(error_number));
  ++ring_.posted;
}

// Server: a retired SEND frees its batch's packets for the next RECV.
void SgbatchRun::RetireForwarded() {
  constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 48) - 1;
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(send_cq_.get(), kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on the forwarder's send CQ");
  for (int i = 0; i < n; ++i) {
    if (completions[i].status != IBV_WC_SUCCESS) CompletionFailed(completions[i], "forwarding packets");
    const std::uint64_t upto = completions[i].wr_id & kSeqMask;
    for (; ring_.retired < upto; ++ring_.retired) PostRecv(batch_of_send_[ring_.retired % batch_of_send_.size()]);
  }
}

void SgbatchRun::Forward() {
  const std::uint64_t deadline = DeadlineTicks(session_);
  const std::uint32_t bytes = k_ * size_;
  ibv_wc completions[kPollBatch];
  for (std::uint64_t spins = 1;; ++spins) {
    const int n = ibv_poll_cq(recv_cq_.get(), kPollBatch, completions);
    if (n < 0) Fail("ibv_poll_cq failed on the forwarder's RECV CQ");
    for (int i = 0; i < n; ++i) {
      const std::uint64_t t2 = session_.clock().Now();
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving packets to forward");
      if (wc.byte_len != bytes) Fail("forwarder received ", wc.byte_len, " bytes; k x size is ", bytes);
      const auto batch = static_cast<std::uint32_t>(wc.wr_id);
      while (!ring_.HasRoom(1)) RetireForwarded();
      std::uint8_t* first = recv_pool_.Packet(batch, 0);
      const std::uint64_t t3 = session_.clock().Now();
      const std::uint64_t turnaround_ns = session_.clock().TicksToNs(t3 - t2);
      std::memcpy(first + kTurnaroundOffset, &turnaround_ns, sizeof(turnaround_ns));
      PostSend(batch, false);
      ++forwarded_;
    }
    // Every pass, so that freed batches go back to the receive queue at once: on UC a
    // message that finds no RECV is lost.
    RetireForwarded();
    if ((spins & kStopCheckMask) == 0) {
      if (stop_.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) return;
      if (session_.clock().Now() >= deadline) Fail("--timeout ", o_.timeout_s, " s passed while forwarding");
    }
  }
}

void SgbatchRun::FillForValidation(std::uint32_t batch, std::uint64_t seq) {
  for (std::uint32_t j = 0; j < k_; ++j) {
    const std::uint32_t skip = j == 0 ? kStampHeaderBytes : 0;
    FillPattern(send_pool_.Packet(batch, j) + skip, size_ - skip, static_cast<std::uint32_t>(seq * k_ + j));
  }
}

std::uint64_t SgbatchRun::CountBadBytes(std::uint32_t batch, std::uint64_t seq) const {
  std::uint64_t bad = 0;
  for (std::uint32_t j = 0; j < k_; ++j) {
    const std::uint32_t skip = j == 0 ? kStampHeaderBytes : 0;
    bad += PatternMismatches(recv_pool_.Packet(batch, j) + skip, size_ - skip, static_cast<std::uint32_t>(seq * k_ + j));
  }
  return bad;
}

ResultRow SgbatchRun::Generate() {
  const TscClock& clock = session_.clock();
  const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.duration_s * 1e9));
  const std::uint64_t iterations = o_.duration_s > 0 ? 0 : IterationsOrDefault(o_, 100'000);
  const std::uint64_t deadline = DeadlineTicks(session_);
  const std::uint32_t bytes = k_ * size_;
  ResultRow row = LatencyRow(size_, size_, "one_way");
  std::uint64_t next_seq = 0, expected_seq = 0;
  const auto send_next = [&] {
    const auto batch = static_cast<std::uint32_t>(next_seq % window_);
    std::uint8_t* first = send_pool_.Packet(batch, 0);
    if (o_.validate) FillForValidation(batch, next_seq);
    while (!ring_.HasRoom(1)) ReapSends(send_cq_.get(), &ring_, "sending gathered packets");
    std::memcpy(first + kSeqOffset, &next_seq, sizeof(next_seq));
    const std::uint64_t t1 = session_.clock().Now();
    std::memcpy(first + kStampOffset, &t1, sizeof(t1));
    PostSend(batch, false);
    ++next_seq;
  };
  const std::uint64_t start = session_.clock().Now();
  for (std::uint32_t i = 0; i < window_; ++i) send_next();
  MeasuredInterval interval(start, warmup_ticks, duration_ticks, iterations);
  std::uint64_t measured_wrs = 0, now = start;
  ibv_wc completions[kPollBatch];
  while (expected_seq < next_seq) {
    const int n = ibv_poll_cq(recv_cq_.get(), kPollBatch, completions);
    if (n < 0) Fail("ibv_poll_cq failed on the generator's RECV CQ");
    now = session_.clock().Now();
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving forwarded packets");
      const auto batch = static_cast<std::uint32_t>(wc.wr_id);
      const std::uint8_t* first = recv_pool_.Packet(batch, 0);
      std::uint64_t t1, turnaround_ns, seq;
      std::memcpy(&t1, first + kStampOffset, sizeof(t1));
      std::memcpy(&turnaround_ns, first + kTurnaroundOffset, sizeof(turnaround_ns));
      std::memcpy(&seq, first + kSeqOffset, sizeof(seq));
      if (seq != expected_seq || wc.byte_len != bytes) {
        Fail("forwarded message ", seq, " of ", wc.byte_len, " bytes; expected message ", expected_seq, " of ", bytes,
             " bytes (", o_.connection, " delivers in order)");
      }
      ++expected_seq;
      if (o_.validate) {
        const std::uint64_t bad = CountBadBytes(batch, seq);
        ++checked_;
        bad_bytes_ += bad;
        bad_messages_ += bad != 0;
      }
      PostRecv(batch);
      if (interval.counting()) {
        row.latency_ns->Record(OneWayNs(clock.TicksToNs(now - t1), turnaround_ns));
        ++measured_wrs;
      }
      if (!interval.stopping()) send_next();
    }
    ReapSends(send_cq_.get(), &ring_, "sending gathered packets");
    interval.Update(now, measured_wrs * k_, clock, row);
    if (now >= deadline) {
      Fail("--timeout ", o_.timeout_s, " s passed with ", next_seq - expected_seq,
           " messages not forwarded back (lost on UC, or the forwarder stopped?)");
    }
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
  }
  AddWireFigures(row, row.duration_s > 0 ? static_cast<double>(measured_wrs) / row.duration_s : 0.0);
  return row;
}

// The rate of WRs, and of bytes on the wire: each message of k x size bytes travels as
// ceil(k x size / MTU) packets, each with kRoceHeaderBytesPerPacket of headers.
void SgbatchRun::AddWireFigures(ResultRow& row, double wrs_per_s) const {
  const std::uint32_t bytes = k_ * size_;
  const std::uint32_t mtu = MtuBytes(session_.address().mtu);
  const std::uint64_t wire_packets = DivideRoundUp(bytes, mtu);
  row.extra["packets_per_wr"] = k_;
  row.extra["wr_mops"] = wrs_per_s / 1e6;
  row.extra["mtu_bytes"] = mtu;
  row.extra["roce_header_bytes_per_packet"] = kRoceHeaderBytesPerPacket;
  row.extra["wire_packets_per_wr"] = wire_packets;
  row.extra["wire_gbps"] = wrs_per_s * static_cast<double>(bytes + wire_packets * kRoceHeaderBytesPerPacket) * 8 / 1e9;
}

Report SgbatchRun::Run() {
  Setup();
  session_.Barrier("connected");
  Report report;
  if (session_.is_server()) {
    ServeBetweenBarriers(session_, 1, stop_, "/0", [&](int) { Forward(); });
    report.rows.push_back(ServedRow(size_, "forwarded_wrs", forwarded_));
    report.rows.back().extra["packets_per_wr"] = k_;
    report.validation = {{"enabled", o_.validate}, {"checked_by", "client"}};
  } else {
    session_.Barrier("start/0");
    report.rows.push_back(Generate());
    session_.Barrier("done/0");
    report.validation = {{"enabled", o_.validate}, {"checked_messages", checked_}, {"bad_bytes", bad_bytes_},
                         {"bad_messages", bad_messages_}, {"ok", bad_bytes_ == 0 && bad_messages_ == 0}};
  }
  session_.Barrier("finished");
  return report;
}

}  // namespace

void CheckSgbatch(Options& options) {
  if (!options.verb.empty()) Fail("--verb ", options.verb, " does not apply to sgbatch: it forwards with SEND/RECV");
  if (options.connection != "RC" && options.connection != "UC") {
    Fail("-c ", options.connection, " with sgbatch: the forwarding study uses RC or UC (a gathered batch spans packets)");
  }
  if (options.peers != 1) Fail("--peers ", options.peers, " with sgbatch: two hosts forward to each other (1)");
  if (options.sge < 1 || options.sge > kMaxPacketsPerWr) {
    Fail("--sge ", options.sge, " with sgbatch: packets per WR (k) must be 1..", kMaxPacketsPerWr);
  }
  if (options.all || options.sizes.size() > 1) {
    Fail("sgbatch takes one --size per run (the receiver's scatter list is cut for it); sweep sizes across runs");
  }
  if (options.sizes.empty()) options.sizes.push_back(64);
  if (options.sizes[0] < kStampHeaderBytes) {
    Fail("--size ", options.sizes[0], " with sgbatch: a packet carries a ", kStampHeaderBytes,
         "-byte timestamp header, so at least ", kStampHeaderBytes, " bytes");
  }
  if (options.threads != 1 || options.qp != 1 || options.post_list != 1 || options.header_only) {
    Fail("--threads, --qp, --post_list and --header-only do not apply to sgbatch: one forwarder, one QP, "
         "batching by --sge");
  }
  if (options.direction != "inbound") Fail("--direction ", options.direction, " does not apply to sgbatch");
  DefaultSizes(options, 64);
}

Report RunSgbatch(Session& session) { return SgbatchRun(session).Run(); }

}  // namespace rdmalab::bench
