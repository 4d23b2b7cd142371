// --stack udp|tcp: the kernel-socket stand-ins of lat and tput, for the figures whose
// papers compare RDMA with a plain network stack. The session (rendezvous, barriers,
// deadline, report) is the one every mode uses; only the data path goes through sockets,
// so these loops make syscalls by nature.
//
// udp (roce Fig. 6-8, the Ethernet side of a software router): the client generates
// --size-byte datagrams, --io-batch per sendmmsg; the server forwards each batch it gets from
// recvmmsg straight back with one sendmmsg. Each datagram carries the client's t1; the
// server stamps its turnaround t3 - t2 into it, and the client takes the one-way latency
// ((t4 - t1) - (t3 - t2)) / 2, the symmetric timestamps of sgbatch. lat keeps one batch in
// flight; tput keeps --tx-depth datagrams in flight. A datagram the kernel dropped is counted
// as lost after DatagramWindow::kLossTimeoutMs without traffic, and the window moves on.
// tcp (nosql Fig. 18, the IPoIB stand-in): one connection; --verb write sends --size-byte
// requests answered by an 8-byte ack, --verb read 8-byte requests answered by --size bytes;
// --tx-depth requests in flight.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "benchmarks/bench/datagram_window.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/modes.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr int kMaxIoBatch = 1024;  // UIO_MAXIOV, the kernel's limit for one sendmmsg
constexpr int kPollMs = 1;         // how often a waiting loop looks at the deadline and the stop flag
constexpr std::uint32_t kUdpMaxPayloadBytes = 65507;
constexpr std::uint32_t kTcpAckBytes = 8;
constexpr int kSocketBufferBytes = 4 << 20;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int CheckedSocket(int type) {
  const int fd = socket(AF_INET, type, 0);
  if (fd < 0) Fail("socket(AF_INET, ", type == SOCK_DGRAM ? "SOCK_DGRAM" : "SOCK_STREAM", "): ", std::strerror(errno));
  const int bytes = kSocketBufferBytes;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));  // a hint: the kernel caps it, which is fine
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  return fd;
}

sockaddr_in Ipv4(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    Fail("address '", host, "' is not an IPv4 address (the socket stacks take dotted quads)");
  }
  return addr;
}

// This host's address on the path to `peer_host`: a connected UDP socket's local name (no packet is sent).
std::string LocalAddressToward(const std::string& peer_host) {
  Fd probe(CheckedSocket(SOCK_DGRAM));
  sockaddr_in to = Ipv4(peer_host, 9);
  if (connect(probe.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    Fail("no route from this host to ", peer_host, ": ", std::strerror(errno));
  }
  sockaddr_in me{};
  socklen_t len = sizeof(me);
  getsockname(probe.get(), reinterpret_cast<sockaddr*>(&me), &len);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &me.sin_addr, text, sizeof(text));
  return text;
}

// The host the peers reach this process on: the rendezvous' path under the coordinator, the
// server's host for a standalone client, any address for a standalone server.
std::string OwnAddress(const Options& o) {
  if (!o.rendezvous.empty()) return LocalAddressToward(o.rendezvous.substr(0, o.rendezvous.rfind(':')));
  if (!o.server_host.empty()) return LocalAddressToward(o.server_host);
  return "0.0.0.0";
}

sockaddr_in BoundAddress(int fd) {
  sockaddr_in me{};
  socklen_t len = sizeof(me);
  getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len);
  return me;
}

std::string Endpoint(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

// Publishes this side's socket, reads the peer's and connects to it (UDP) or returns it (TCP).
sockaddr_in ExchangeAddresses(Session& session, int fd, const std::string& own_host) {
  const Options& o = session.options();
  session.Put("socket", {{"host", own_host}, {"port", ntohs(BoundAddress(fd).sin_port)}});
  const json theirs = session.Get(session.is_server() ? "client/0" : "server/0", "socket");
  std::string host = theirs.at("host").get<std::string>();
  if (host == "0.0.0.0") host = o.server_host;  // a standalone server: the host the client was given
  return Ipv4(host, theirs.at("port").get<int>());
}

bool WaitReadable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  const int n = poll(&p, 1, timeout_ms);
  if (n < 0 && errno != EINTR) Fail("poll: ", std::strerror(errno));
  return n > 0;
}

class UdpRun {
 public:
  explicit UdpRun(Session& session)
      : session_(session), o_(session.options()), size_(o_.sizes[0]), batch_(o_.io_batch),
        window_(o_.mode == "lat" ? batch_ : std::max(o_.tx_depth, batch_)), fd_(CheckedSocket(SOCK_DGRAM)) {
    const std::string own = OwnAddress(o_);
    sockaddr_in me = Ipv4(own, 0);
    if (bind(fd_.get(), reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0) {
      Fail("bind UDP ", own, ": ", std::strerror(errno));
    }
    sockaddr_in peer = ExchangeAddresses(session_, fd_.get(), own);
    if (connect(fd_.get(), reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
      Fail("connect UDP: ", std::strerror(errno));
    }
    endpoints_ = {{"local", Endpoint(BoundAddress(fd_.get()))}, {"peer", Endpoint(peer)}};
    buffers_.assign(static_cast<std::size_t>(window_) * size_, 0);
    iov_.resize(batch_);
    msgs_.resize(batch_);
    for (int i = 0; i < batch_; ++i) msgs_[i].msg_hdr.msg_iov = &iov_[i], msgs_[i].msg_hdr.msg_iovlen = 1;
  }

  Report Run() {
    Report report;
    report.rows.push_back(ForwardOrGenerate(session_, stop_, size_, forwarded_, [&] { Forward(); },
                                            [&] { return Generate(); }));
    report.rows.back().extra["socket"] = endpoints_;
    report.notes.push_back("kernel UDP sockets (--stack udp), " + std::to_string(batch_) +
                           " datagrams per sendmmsg/recvmmsg; the RDMA device is not used for data");
    session_.Barrier("finished");
    return report;
  }

 private:
  std::uint8_t* Slot(std::uint64_t seq) { return buffers_.data() + (seq % window_) * size_; }

  // Points the first n message headers at n consecutive slots from `first_seq`.
  void Aim(std::uint64_t first_seq, int n) {
    for (int i = 0; i < n; ++i) iov_[i] = {Slot(first_seq + i), size_};
  }

  void Forward() {
    const TscClock& clock = session_.clock();
    while (!stop_.load(std::memory_order_relaxed) && !g_abort.load(std::memory_order_relaxed)) {
      if (!WaitReadable(fd_.get(), kPollMs)) continue;
      Aim(0, batch_);
      const int n = recvmmsg(fd_.get(), msgs_.data(), batch_, MSG_DONTWAIT, nullptr);
      const std::uint64_t t2 = clock.Now();
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        Fail("recvmmsg: ", std::strerror(errno));
      }
      for (int i = 0; i < n; ++i) iov_[i].iov_len = msgs_[i].msg_len;
      const std::uint64_t t3 = clock.Now();
      const std::uint64_t turnaround_ns = clock.TicksToNs(t3 - t2);
      for (int i = 0; i < n; ++i) std::memcpy(Slot(i) + kTurnaroundOffset, &turnaround_ns, sizeof(turnaround_ns));
      SendAll(n);
      forwarded_ += n;
    }
  }

  // sendmmsg may take fewer than n: the rest goes in further calls (a full socket buffer waits).
  void SendAll(int n) {
    for (int sent = 0; sent < n;) {
      const int k = sendmmsg(fd_.get(), msgs_.data() + sent, n - sent, 0);
      if (k < 0) {
        if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
        if (errno == ECONNREFUSED) return;  // the peer's socket closed at the end of the run
        Fail("sendmmsg: ", std::strerror(errno));
      }
      sent += k;
    }
  }

  ResultRow Generate() {
    const TscClock& clock = session_.clock();
    const std::uint64_t deadline = DeadlineTicks(session_);
    ResultRow row = OneWayRow(size_);
    std::uint64_t measured = 0;
    DatagramWindow window(clock, static_cast<std::uint64_t>(window_), clock.Now());
    MeasuredInterval interval = DatagramInterval(o_, clock, clock.Now());
    std::vector<std::uint8_t> landing(static_cast<std::size_t>(batch_) * size_);
    while (true) {
      // Send whole batches while the window has room for one.
      while (!interval.stopping() && window.HasRoom(static_cast<std::uint64_t>(batch_))) {
        const std::uint64_t first = window.next_seq();
        Aim(first, batch_);
        const std::uint64_t t1 = clock.Now();
        for (int i = 0; i < batch_; ++i) window.Stamp(Slot(first + static_cast<std::uint64_t>(i)), t1);
        SendAll(batch_);
      }
      if (interval.stopping() && window.Drained()) break;
      for (int i = 0; i < batch_; ++i) iov_[i] = {landing.data() + static_cast<std::size_t>(i) * size_, size_};
      const int n = WaitReadable(fd_.get(), kPollMs) ? recvmmsg(fd_.get(), msgs_.data(), batch_, MSG_DONTWAIT, nullptr) : 0;
      const std::uint64_t now = clock.Now();
      if (n < 0 && errno != EAGAIN && errno != EINTR) Fail("recvmmsg: ", std::strerror(errno));
      for (int i = 0; i < n; ++i) {
        const std::uint8_t* datagram = landing.data() + static_cast<std::size_t>(i) * size_;
        measured += window.Returned(datagram, now, interval.counting(), *row.latency_ns);
      }
      window.GiveUpIfSilent(now);  // the kernel dropped what is still out
      interval.Update(now, measured, clock, row);
      if (now >= deadline) Fail("--timeout ", o_.timeout_s, " s passed with ", measured, " datagrams forwarded back");
      if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
    }
    window.Report(row, "udp", batch_);
    return row;
  }

  Session& session_;
  const Options& o_;
  const std::uint32_t size_;
  const int batch_;
  const int window_;
  Fd fd_;
  std::vector<std::uint8_t> buffers_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
  std::atomic<bool> stop_{false};
  std::uint64_t forwarded_ = 0;
  json endpoints_;
};

// The peer closed: at the end of a run the client closes with requests still unanswered.
bool PeerGone(int error) { return error == ECONNRESET || error == EPIPE; }

// Writes all `bytes`; false when the peer closed first.
bool WriteAll(int fd, const std::uint8_t* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = send(fd, data, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (PeerGone(errno)) return false;
      Fail("TCP send: ", std::strerror(errno));
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly `bytes`; false when the peer closed first or `stop` was raised.
bool ReadAll(int fd, std::uint8_t* data, std::size_t bytes, const std::atomic<bool>& stop, const Session& session) {
  while (bytes > 0) {
    if (stop.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) return false;
    if (!WaitReadable(fd, kPollMs)) {
      session.RemainingMs("a TCP response");
      continue;
    }
    const ssize_t n = recv(fd, data, bytes, 0);
    if (n == 0 || (n < 0 && PeerGone(errno))) return false;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      Fail("TCP recv: ", std::strerror(errno));
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

class TcpRun {
 public:
  explicit TcpRun(Session& session)
      : session_(session), o_(session.options()), size_(o_.sizes[0]), write_(o_.verb != "read"),
        request_bytes_(write_ ? size_ : kTcpAckBytes), response_bytes_(write_ ? kTcpAckBytes : size_),
        request_(request_bytes_, 0x5a), response_(response_bytes_, 0xa5) {}

  Report Run() {
    const std::string own = OwnAddress(o_);
    Report report;
    if (session_.is_server()) {
      Fd listener(CheckedSocket(SOCK_STREAM));
      sockaddr_in me = Ipv4(own, 0);
      if (bind(listener.get(), reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0 || listen(listener.get(), 1) != 0) {
        Fail("bind/listen TCP ", own, ": ", std::strerror(errno));
      }
      ExchangeAddresses(session_, listener.get(), own);
      session_.Barrier("connected");
      while (!WaitReadable(listener.get(), kPollMs)) session_.RemainingMs("the client's TCP connection");
      sockaddr_in peer{};
      socklen_t len = sizeof(peer);
      Fd conn(accept(listener.get(), reinterpret_cast<sockaddr*>(&peer), &len));
      if (conn.get() < 0) Fail("accept: ", std::strerror(errno));
      endpoints_ = {{"local", Endpoint(BoundAddress(conn.get()))}, {"peer", Endpoint(peer)}};
      NoDelay(conn.get());
      ServeBetweenBarriers(session_, 1, stop_, "/0", [&](int) { Serve(conn.get()); });
      report.rows.push_back(ServedRow(size_, "served_requests", served_));
    } else {
      Fd conn(CheckedSocket(SOCK_STREAM));
      sockaddr_in me = Ipv4(own, 0);
      bind(conn.get(), reinterpret_cast<sockaddr*>(&me), sizeof(me));
      sockaddr_in server = ExchangeAddresses(session_, conn.get(), own);
      session_.Barrier("connected");
      if (connect(conn.get(), reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0) {
        Fail("TCP connect to the server: ", std::strerror(errno));
      }
      endpoints_ = {{"local", Endpoint(BoundAddress(conn.get()))}, {"peer", Endpoint(server)}};
      NoDelay(conn.get());
      session_.Barrier("start/0");
      report.rows.push_back(Generate(conn.get()));
      session_.Barrier("done/0");
    }
    report.rows.back().extra["socket"] = endpoints_;
    report.notes.push_back(std::string("kernel TCP socket (--stack tcp): ") + (write_ ? "write" : "read") +
                           " requests; the RDMA device is not used for data");
    session_.Barrier("finished");
    return report;
  }

 private:
  static void NoDelay(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }

  void Serve(int fd) {
    std::vector<std::uint8_t> in(request_bytes_);
    while (ReadAll(fd, in.data(), in.size(), stop_, session_) && WriteAll(fd, response_.data(), response_.size())) {
      ++served_;
    }
  }

  ResultRow Generate(int fd) {
    const TscClock& clock = session_.clock();
    const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.warmup_s * 1e9));
    const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.duration_s * 1e9));
    const std::uint64_t iterations = o_.duration_s > 0 ? 0 : IterationsOrDefault(o_, 100'000);
    const std::atomic<bool> never{false};
    ResultRow row;
    row.size_bytes = size_;
    row.payload_bytes_per_op = size_;
    std::vector<std::uint8_t> in(response_bytes_);
    const auto request = [&] {
      if (!WriteAll(fd, request_.data(), request_.size())) Fail("the server closed the TCP connection");
    };
    for (int i = 0; i < o_.tx_depth; ++i) request();
    MeasuredInterval interval(clock.Now(), warmup_ticks, duration_ticks, iterations);
    std::uint64_t completed = 0;
    while (!interval.stopping()) {
      if (!ReadAll(fd, in.data(), in.size(), never, session_)) Fail("the server closed the TCP connection");
      const std::uint64_t now = clock.Now();
      if (interval.counting()) ++completed;
      interval.Update(now, completed, clock, row);
      if (!interval.stopping()) request();
    }
    row.extra["stack"] = "tcp";
    row.extra["window"] = o_.tx_depth;
    return row;  // the requests still in flight are answered into a closing socket
  }

  Session& session_;
  const Options& o_;
  const std::uint32_t size_;
  const bool write_;
  const std::size_t request_bytes_, response_bytes_;
  std::vector<std::uint8_t> request_, response_;
  std::atomic<bool> stop_{false};
  std::uint64_t served_ = 0;
  json endpoints_;
};

}  // namespace

// Also --stack raw's (raw_packet.cc): the same datagrams as udp, as frames of a raw-packet QP.
void CheckSockets(Options& options) {
  if (options.mode != "lat" && options.mode != "tput") {
    Fail("--stack ", options.stack, " applies to lat and tput (the Ethernet and socket stand-ins), not ", options.mode);
  }
  if (options.peers != 1 || options.threads != 1 || options.qp != 1 || options.post_list != 1 || options.sge != 1 ||
      options.header_only || options.inline_size != 0 || options.direction != "inbound" || options.validate) {
    Fail("--stack ", options.stack, " runs one client and one server over one socket: --peers, --threads, --qp, "
         "--post_list, --sge, --header-only, --inline_size, --direction and --validate do not apply");
  }
  if (options.all || options.sizes.size() > 1) Fail("--stack ", options.stack, " takes one --size per run");
  DefaultSizes(options, 64);
  const std::uint32_t size = options.sizes[0];
  if (options.stack == "udp" || options.stack == "raw") {
    if (!options.verb.empty() && options.verb != "send") {
      Fail("--verb ", options.verb, " with --stack ", options.stack, ": datagrams are sends (send, or leave --verb out)");
    }
    if (size < kStampHeaderBytes || size > kUdpMaxPayloadBytes) {
      Fail("--size ", size, " with --stack ", options.stack, ": a datagram carries a ", kStampHeaderBytes, "-byte timestamp header and at most ",
           kUdpMaxPayloadBytes, " bytes, so ", kStampHeaderBytes, "..", kUdpMaxPayloadBytes);
    }
    if (options.io_batch < 1 || options.io_batch > kMaxIoBatch) {
      Fail("--io-batch ", options.io_batch, ": datagrams per sendmmsg/recvmmsg must be 1..", kMaxIoBatch);
    }
  } else {
    if (options.verb != "write" && options.verb != "read" && !options.verb.empty()) {
      Fail("--verb ", options.verb, " with --stack tcp: write (size-byte requests) or read (size-byte responses)");
    }
    if (options.io_batch != 1) Fail("--io-batch ", options.io_batch, " applies to --stack udp and raw only");
    if (size == 0) Fail("--size 0 with --stack tcp: a request moves at least one byte");
  }
}

Report RunSockets(Session& session) {
  return session.options().stack == "udp" ? UdpRun(session).Run() : TcpRun(session).Run();
}

}  // namespace rdmalab::bench
