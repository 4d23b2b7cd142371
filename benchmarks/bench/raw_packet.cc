// --stack raw: the RoCE study's Ethernet side (Fig. 6-8) through an IBV_QPT_RAW_PACKET QP,
// the closer stand-in for DPDK than --stack udp: whole Ethernet/IPv4/UDP frames go from user
// memory to the NIC and back with no kernel on the path. The client sends frames of --size
// UDP payload bytes, --io-batch per post list (one doorbell, DPDK's burst); a flow steering
// rule (ibv_create_flow: this host's MAC, IPv4 address and UDP port) hands the peer's frames
// to the QP's RECVs. The server forwards each received frame from the buffer it landed in,
// headers rewritten toward the client (DPDK l2fwd's zero copy), and re-posts the RECV when
// the SEND completes. One-way latency by --stack udp's symmetric timestamps.
//
// Raw-packet QPs exist on NICs whose provider implements them on an Ethernet port (mlx5,
// with CAP_NET_RAW); softnic and rxe refuse them. A refusal, an InfiniBand port or a GID that
// is not IPv4 makes the point unsupported (exit 3) with the reason, never a failure.
// This path has not run on hardware: this project's machines have no raw-packet NIC.
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "benchmarks/bench/datagram_window.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/raw_frame.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
constexpr std::uint8_t kIpProtocolUdp = 17;
constexpr std::uint8_t kIpTtl = 64;

json ToJson(const FrameAddress& a) {
  return {{"mac", std::vector<std::uint8_t>(a.mac.begin(), a.mac.end())}, {"ipv4", a.ipv4}, {"udp_port", a.udp_port}};
}

FrameAddress FrameAddressFromJson(const json& j) {
  FrameAddress a;
  const auto mac = j.at("mac").get<std::vector<std::uint8_t>>();
  std::copy(mac.begin(), mac.end(), a.mac.begin());
  a.ipv4 = j.at("ipv4").get<std::uint32_t>();
  a.udp_port = j.at("udp_port").get<std::uint16_t>();
  return a;
}

std::string ReadSysfsLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// This port's MAC, IPv4 address (from an IPv4-mapped RoCE v2 GID) and Ethernet MTU, from the
// GID's network device in sysfs, as rdma-core's tools find them.
FrameAddress OwnFrameAddress(const Session& session, std::uint16_t udp_port, std::uint32_t& mtu_bytes) {
  const Device& device = session.device();
  const PortAddress& port = session.address();
  static constexpr std::array<std::uint8_t, 12> kIpv4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (port.gid_index < 0 || !std::equal(kIpv4MappedPrefix.begin(), kIpv4MappedPrefix.end(), port.gid.begin())) {
    FailUnsupported("--stack raw on ", device.name(), ": GID index ", port.gid_index,
                    " is not an IPv4-mapped (RoCE v2) GID, so the port has no IPv4 address to put in frames; "
                    "pick one with -x");
  }
  FrameAddress own;
  std::memcpy(&own.ipv4, port.gid.data() + 12, 4);
  own.udp_port = udp_port;
  const std::string ports = "/sys/class/infiniband/" + device.name() + "/ports/" + std::to_string(device.port());
  const std::string netdev = ReadSysfsLine(ports + "/gid_attrs/ndevs/" + std::to_string(port.gid_index));
  const std::string mac_text = netdev.empty() ? "" : ReadSysfsLine("/sys/class/net/" + netdev + "/address");
  unsigned m[6];
  if (std::sscanf(mac_text.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) {
    FailUnsupported("--stack raw on ", device.name(), ": no network device with a MAC address for GID index ",
                    port.gid_index, " (", ports, "/gid_attrs/ndevs/", port.gid_index, " names '", netdev, "')");
  }
  for (int i = 0; i < 6; ++i) own.mac[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(m[i]);
  mtu_bytes = static_cast<std::uint32_t>(std::stoul(ReadSysfsLine("/sys/class/net/" + netdev + "/mtu")));
  return own;
}

}  // namespace

std::uint16_t Ipv4Checksum(const std::uint8_t* header) {
  std::uint32_t sum = 0;
  for (std::uint32_t i = 0; i < kIpv4HeaderBytes; i += 2) sum += (std::uint32_t{header[i]} << 8) | header[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return htons(static_cast<std::uint16_t>(~sum));
}

void WriteHeaders(std::uint8_t* frame, const FrameAddress& from, const FrameAddress& to, std::uint32_t payload_bytes) {
  const auto put16 = [](std::uint8_t* at, std::uint16_t host_value) {
    const std::uint16_t v = htons(host_value);
    std::memcpy(at, &v, 2);
  };
  std::memcpy(frame, to.mac.data(), 6);
  std::memcpy(frame + 6, from.mac.data(), 6);
  put16(frame + 12, kEtherTypeIpv4);
  std::uint8_t* ip = frame + kEthernetHeaderBytes;
  std::memset(ip, 0, kIpv4HeaderBytes);
  ip[0] = 0x45;  // version 4, 5 words of header
  put16(ip + 2, static_cast<std::uint16_t>(kIpv4HeaderBytes + kUdpHeaderBytes + payload_bytes));
  put16(ip + 6, 0x4000);
  ip[8] = kIpTtl;
  ip[9] = kIpProtocolUdp;
  std::memcpy(ip + 12, &from.ipv4, 4);
  std::memcpy(ip + 16, &to.ipv4, 4);
  const std::uint16_t checksum = Ipv4Checksum(ip);
  std::memcpy(ip + 10, &checksum, 2);
  std::uint8_t* udp = ip + kIpv4HeaderBytes;
  put16(udp, from.udp_port);
  put16(udp + 2, to.udp_port);
  put16(udp + 4, static_cast<std::uint16_t>(kUdpHeaderBytes + payload_bytes));
  put16(udp + 6, 0);
}

namespace {

using FlowPtr = std::unique_ptr<ibv_flow, VerbsDeleter<ibv_destroy_flow>>;

// Frames to `own` (MAC, IPv4 address, UDP port) go to `qp`. The rule is the attribute
// followed by its specs back to back, each `size` bytes long, as providers walk it.
FlowPtr SteerToQp(ibv_qp* qp, const Device& device, const FrameAddress& own) {
  ibv_flow_attr attr{};
  ibv_flow_spec_eth eth{};
  ibv_flow_spec_ipv4 ipv4{};
  ibv_flow_spec_tcp_udp udp{};
  attr.type = IBV_FLOW_ATTR_NORMAL;
  attr.size = sizeof(attr) + sizeof(eth) + sizeof(ipv4) + sizeof(udp);
  attr.num_of_specs = 3;
  attr.port = device.port();
  eth.type = IBV_FLOW_SPEC_ETH;
  eth.size = sizeof(eth);
  std::memcpy(eth.val.dst_mac, own.mac.data(), 6);
  std::memset(eth.mask.dst_mac, 0xff, 6);
  ipv4.type = IBV_FLOW_SPEC_IPV4;
  ipv4.size = sizeof(ipv4);
  ipv4.val.dst_ip = own.ipv4;
  ipv4.mask.dst_ip = 0xffffffff;
  udp.type = IBV_FLOW_SPEC_UDP;
  udp.size = sizeof(udp);
  udp.val.dst_port = htons(own.udp_port);
  udp.mask.dst_port = 0xffff;
  alignas(ibv_flow_attr) std::uint8_t rule[sizeof(attr) + sizeof(eth) + sizeof(ipv4) + sizeof(udp)];
  std::uint8_t* at = rule;
  for (const auto& [part, bytes] : {std::pair<const void*, std::size_t>{&attr, sizeof(attr)}, {&eth, sizeof(eth)},
                                    {&ipv4, sizeof(ipv4)}, {&udp, sizeof(udp)}}) {
    std::memcpy(at, part, bytes);
    at += bytes;
  }
  FlowPtr flow(ibv_create_flow(qp, reinterpret_cast<ibv_flow_attr*>(rule)));
  if (!flow) {
    FailUnsupported(device.name(), " refused the flow steering rule of a raw-packet QP (ibv_create_flow: ",
                    std::strerror(errno), ", errno ", errno, ")");
  }
  return flow;
}

class RawPacketRun {
 public:
  explicit RawPacketRun(Session& session)
      : session_(session), o_(session.options()), payload_(o_.sizes[0]), frame_(kFrameHeaderBytes + payload_),
        batch_(o_.io_batch), window_(o_.mode == "lat" ? batch_ : std::max(o_.tx_depth, batch_)) {
    // Both sides meet first: where the provider refuses, each then reports its own refusal
    // (a standalone server that refused before its client joined would leave the client
    // only a closed rendezvous to report).
    session_.Barrier("raw-joined");
    const Device& device = session_.device();
    if (!device.ethernet()) {
      FailUnsupported("--stack raw: ", device.name(), " port ", int(device.port()),
                      " is InfiniBand; raw-packet QPs carry Ethernet frames (use a RoCE/Ethernet port)");
    }
    const int depth = 2 * window_;
    send_cq_ = CreateCq(device, depth);
    recv_cq_ = CreateCq(device, depth);
    ibv_qp_init_attr init{};
    init.send_cq = send_cq_.get();
    init.recv_cq = recv_cq_.get();
    init.qp_type = IBV_QPT_RAW_PACKET;
    init.cap = {static_cast<std::uint32_t>(depth), static_cast<std::uint32_t>(depth), 1, 1, 0};
    qp_.reset(ibv_create_qp(session_.pd(), &init));
    if (!qp_) {
      FailUnsupported(device.name(), " refused an IBV_QPT_RAW_PACKET QP (ibv_create_qp: ", std::strerror(errno),
                      ", errno ", errno, "): its provider has no raw-packet QPs (mlx5 on an Ethernet port has "
                      "them, given CAP_NET_RAW)");
    }
    ToReadyToSend();
    std::uint32_t mtu_bytes = 0;
    own_ = OwnFrameAddress(session_, static_cast<std::uint16_t>(o_.port + (session_.is_server() ? 0 : 1)), mtu_bytes);
    if (frame_ - kEthernetHeaderBytes > mtu_bytes) {
      FailUnsupported("--stack raw --size ", payload_, ": the IPv4 packet of ", frame_ - kEthernetHeaderBytes,
                      " B exceeds the MTU of ", mtu_bytes, " B of ", device.name(), "'s network device");
    }
    flow_ = SteerToQp(qp_.get(), device, own_);
    frames_ = MakeRegion(session_, static_cast<std::size_t>(depth) * frame_);
    wrs_.resize(static_cast<std::size_t>(window_));
    sges_.resize(static_cast<std::size_t>(window_));
  }

  Report Run() {
    session_.Put("frame_address", ToJson(own_));
    peer_ = FrameAddressFromJson(session_.Get(session_.is_server() ? "client/0" : "server/0", "frame_address"));
    // Client: slots [0, window) send, [window, 2 window) receive; server: all receive and forward.
    const int first_recv = session_.is_server() ? 0 : window_;
    for (int slot = first_recv; slot < 2 * window_; ++slot) PostRecv(slot);
    WriteHeaders(reply_headers_.data(), own_, peer_, payload_);
    if (!session_.is_server()) {
      for (int slot = 0; slot < window_; ++slot) std::memcpy(Slot(slot), reply_headers_.data(), kFrameHeaderBytes);
    }
    Report report;
    report.rows.push_back(ForwardOrGenerate(session_, stop_, payload_, forwarded_, [&] { Forward(); },
                                            [&] { return Generate(); }));
    report.notes.push_back("Ethernet/IPv4/UDP frames through an IBV_QPT_RAW_PACKET QP (--stack raw), " +
                           std::to_string(batch_) + " per post list");
    session_.Barrier("finished");
    return report;
  }

 private:
  std::uint8_t* Slot(int slot) { return frames_.data() + static_cast<std::size_t>(slot) * frame_; }

  void ToReadyToSend() {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = session_.device().port();
    int error_number = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE | IBV_QP_PORT);
    for (const ibv_qp_state state : {IBV_QPS_RTR, IBV_QPS_RTS}) {
      if (error_number != 0) break;
      attr = {};
      attr.qp_state = state;
      error_number = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE);
    }
    if (error_number != 0) FailErrno("ibv_modify_qp of the raw-packet QP to RTS", error_number);
  }

  void PostRecv(int slot) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(Slot(slot)), frame_, frames_.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = static_cast<std::uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const int error_number = ibv_post_recv(qp_.get(), &wr, &bad);
    if (error_number != 0) FailErrno("ibv_post_recv on the raw-packet QP", error_number);
  }

  // Sends the frames of `slots` with one post list. The generator signals only the last,
  // whose wr_id says how many its completion retires; the forwarder (signal_each) signals
  // every one, wr_id = the slot to receive into again once the frame has left.
  void PostSends(const int* slots, int count, bool signal_each) {
    for (int i = 0; i < count; ++i) {
      sges_[static_cast<std::size_t>(i)] = {reinterpret_cast<std::uintptr_t>(Slot(slots[i])), frame_, frames_.mr->lkey};
      ibv_send_wr& wr = wrs_[static_cast<std::size_t>(i)];
      wr = {};
      wr.wr_id = signal_each ? static_cast<std::uint64_t>(slots[i]) : static_cast<std::uint64_t>(count);
      wr.sg_list = &sges_[static_cast<std::size_t>(i)];
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND;
      wr.send_flags = signal_each || i + 1 == count ? unsigned{IBV_SEND_SIGNALED} : 0u;
      wr.next = i + 1 < count ? &wrs_[static_cast<std::size_t>(i) + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    const int error_number = ibv_post_send(qp_.get(), wrs_.data(), &bad);
    if (error_number != 0) FailErrno("ibv_post_send of raw frames", error_number);
  }

  template <typename OnCompletion>
  void PollCq(ibv_cq* cq, const char* what, OnCompletion on_completion) {
    ibv_wc completions[kPollBatch];
    const int n = ibv_poll_cq(cq, kPollBatch, completions);
    if (n < 0) Fail("ibv_poll_cq failed on the raw-packet QP's ", what, " CQ");
    for (int i = 0; i < n; ++i) {
      if (completions[i].status != IBV_WC_SUCCESS) CompletionFailed(completions[i], what);
      on_completion(completions[i]);
    }
  }

  // Turns a batch of received frames around, as --stack udp's forwarder does: each carries
  // the time from the poll that found it (t2) to just before its SEND is posted (t3).
  void ForwardBatch(const int* slots, int count, std::uint64_t t2) {
    const TscClock& clock = session_.clock();
    const std::uint64_t turnaround_ns = clock.TicksToNs(clock.Now() - t2);
    for (int i = 0; i < count; ++i) {
      std::memcpy(Slot(slots[i]), reply_headers_.data(), kFrameHeaderBytes);
      std::memcpy(Slot(slots[i]) + kFrameHeaderBytes + kTurnaroundOffset, &turnaround_ns, sizeof(turnaround_ns));
    }
    PostSends(slots, count, true);
  }

  void Forward() {
    const TscClock& clock = session_.clock();
    std::vector<int> slots(static_cast<std::size_t>(batch_));
    while (!stop_.load(std::memory_order_relaxed) && !g_abort.load(std::memory_order_relaxed)) {
      int n = 0;
      std::uint64_t t2 = 0;
      PollCq(recv_cq_.get(), "forwarding frames", [&](const ibv_wc& wc) {
        if (n == 0) t2 = clock.Now();
        slots[static_cast<std::size_t>(n++)] = static_cast<int>(wc.wr_id);
        if (n == batch_) ForwardBatch(slots.data(), std::exchange(n, 0), t2);
      });
      if (n > 0) ForwardBatch(slots.data(), n, t2);
      PollCq(send_cq_.get(), "forwarding frames", [&](const ibv_wc& wc) {
        PostRecv(static_cast<int>(wc.wr_id));
        ++forwarded_;
      });
    }
  }

  ResultRow Generate() {
    const TscClock& clock = session_.clock();
    const std::uint64_t deadline = DeadlineTicks(session_);
    ResultRow row = OneWayRow(payload_);
    std::uint64_t measured = 0, unsent = 0;
    DatagramWindow window(clock, static_cast<std::uint64_t>(window_), clock.Now());
    MeasuredInterval interval = DatagramInterval(o_, clock, clock.Now());
    std::vector<int> slots(static_cast<std::size_t>(batch_));
    const auto batch = static_cast<std::uint64_t>(batch_);
    while (true) {
      // Whole batches while the window and the send queue have room for one (a slot's last
      // SEND has completed once fewer than window_ - batch_ are unsent).
      while (!interval.stopping() && window.HasRoom(batch) && unsent + batch <= static_cast<std::uint64_t>(window_)) {
        const std::uint64_t t1 = clock.Now();
        for (std::size_t i = 0; i < slots.size(); ++i) {
          slots[i] = static_cast<int>(window.next_seq() % static_cast<std::uint64_t>(window_));
          window.Stamp(Slot(slots[i]) + kFrameHeaderBytes, t1);
        }
        PostSends(slots.data(), batch_, false);
        unsent += batch;
      }
      if (interval.stopping() && window.Drained() && unsent == 0) break;
      PollCq(send_cq_.get(), "sending frames", [&](const ibv_wc& wc) { unsent -= wc.wr_id; });
      PollCq(recv_cq_.get(), "receiving frames", [&](const ibv_wc& wc) {
        const int slot = static_cast<int>(wc.wr_id);
        measured += window.Returned(Slot(slot) + kFrameHeaderBytes, clock.Now(), interval.counting(), *row.latency_ns);
        PostRecv(slot);
      });
      const std::uint64_t now = clock.Now();
      window.GiveUpIfSilent(now);
      interval.Update(now, measured, clock, row);
      if (now >= deadline) Fail("--timeout ", o_.timeout_s, " s passed with ", measured, " frames forwarded back");
      if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
    }
    row.extra["frame_bytes"] = frame_;
    window.Report(row, "raw", batch_);
    return row;
  }

  Session& session_;
  const Options& o_;
  const std::uint32_t payload_;
  const std::uint32_t frame_;
  const int batch_;
  const int window_;
  CqPtr send_cq_, recv_cq_;
  QpPtr qp_;
  FlowPtr flow_;
  FrameAddress own_, peer_;
  std::array<std::uint8_t, kFrameHeaderBytes> reply_headers_{};  // this side's headers toward the peer
  Region frames_;
  std::vector<ibv_send_wr> wrs_;
  std::vector<ibv_sge> sges_;
  std::atomic<bool> stop_{false};
  std::uint64_t forwarded_ = 0;
};

}  // namespace

Report RunRawPacket(Session& session) { return RawPacketRun(session).Run(); }

}  // namespace rdmalab::bench
