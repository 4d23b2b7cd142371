// softnic's rsockets: stream sockets over an RC QP that softnic's rdma_cm connects (design
// in README.md here). The objects behind an rsocket descriptor, the wire protocol between
// two of them, and the functions the entry points share.
//
// Protocol. Each side registers one buffer: kSendSlots send slots and kRecvSlots + kControlRecvs
// receive slots of kSlotBytes. Every message is a SEND_WITH_IMM from a send slot into the
// peer's next posted receive slot; the immediate says what it is (Kind) and returns the
// receive slots its sender re-posted since its last message (a credit grant). A side sends
// data only while it holds more than kControlRecvs credits, so control messages (grants, FIN,
// I/O maps) always find a receive; the QP's infinite RNR retry covers the rest. riowrite is
// an RDMA WRITE from a send slot into a region the peer announced with riomap.
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace softnic::cm::rs {

constexpr size_t kSlotBytes = 16 * 1024;
constexpr uint32_t kSendSlots = 64;
constexpr uint32_t kRecvSlots = 128;      // data receives a peer may fill
constexpr uint32_t kControlRecvs = 4;     // receives kept back for control messages
constexpr uint32_t kPostedRecvs = kRecvSlots + kControlRecvs;
// A receiver grants what it re-posted once this many are due (and always before it sleeps).
constexpr uint32_t kGrantBatch = kRecvSlots / 4;
constexpr uint32_t kMaxControlInFlight = 64;
constexpr uint32_t kSqDepth = 256;        // send slots plus control messages in flight
constexpr uint32_t kCqDepth = kSqDepth + kPostedRecvs;
constexpr uint32_t kInlineBytes = 64;     // messages up to this size go inline
constexpr int kSpinBeforeSleepUs = 20;    // poll the CQ this long before arming it and sleeping
// A caller that polls without sleeping (a non-blocking receive, rpoll's spin) looks at the CM
// channel at most this often: each look is a system call, and a SIDR request or connection
// request waiting this long is still answered well within the peer's timeout.
constexpr int64_t kEventLookIntervalNs = 50'000;
constexpr int kConnectWaitMs = 35000;     // above the CM's own 30 s connect timeout
constexpr int kCloseLingerMs = 2000;      // rclose waits this long for sends in flight
constexpr int kMaxDescriptors = 1 << 16;  // rsocket descriptors are the channel's fd, below this
constexpr uint32_t kConnectMagic = 0x52534f4b;  // "RSOK"
constexpr int kMaxIoMaps = 64;
static_assert(kGrantBatch >= 1 && kGrantBatch <= kRecvSlots);
static_assert(kSendSlots + kMaxControlInFlight < kSqDepth);
static_assert(kInlineBytes <= 256, "softnic's default max_inline_data");

// The immediate's top 4 bits; the low 28 carry the credit grant.
enum class Kind : uint32_t { kData = 0, kCredit = 1, kFin = 2, kIoMap = 3, kIoUnmap = 4 };
constexpr uint32_t kGrantMask = (1u << 28) - 1;
inline uint32_t Immediate(Kind kind, uint32_t grant) { return (static_cast<uint32_t>(kind) << 28) | grant; }

// REQ and REP private data: what the sender posted for its peer.
struct ConnectInfo {
  uint32_t magic = kConnectMagic;
  uint32_t posted_recvs = kPostedRecvs;
  uint32_t slot_bytes = kSlotBytes;
  uint32_t reserved = 0;
};
static_assert(sizeof(ConnectInfo) <= 56, "a REQ's private data");

// An I/O map message's payload, and a map either side keeps.
struct IoMap {
  int64_t offset = 0;
  uint64_t address = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  ibv_mr* mr = nullptr;  // local maps only
};

struct Completed {  // a receive slot holding data not yet read
  uint32_t slot;
  uint32_t length;
};

// Datagram rsockets (rsocket_dgram.cc): a UD QP per socket. A datagram carries a DgramHeader
// (the sender's address and port, for rrecvfrom and replies) before its payload. A sender
// learns a destination's QPN and QKEY by SIDR through the destination socket's rdma_cm
// listener (every bound datagram socket listens), and keeps an address handle for it.
struct DgramHeader {
  in_addr_t address;  // network order
  in_port_t port;     // network order
  uint16_t reserved;
};
constexpr size_t kDgramSlotBytes = 4096;  // softnic's path MTU: the most a UD message carries
constexpr size_t kDgramMaxPayloadBytes = kDgramSlotBytes - sizeof(DgramHeader);
constexpr size_t kGrhBytes = 40;          // in front of every UD receive
constexpr uint32_t kDgramSendSlots = 64;
constexpr uint32_t kDgramRecvSlots = 256;
constexpr int kDgramResolveWaitMs = 35000;  // above the CM's 30 s answer timeout
constexpr uint32_t kMaxDestinations = 1024;  // address handles a socket keeps

struct Destination {
  in_addr_t address;  // network order, as port
  in_port_t port;
  ibv_ah* ah;
  uint32_t qpn;
  uint32_t qkey;
};

struct Datagram {
  ibv_pd* pd = nullptr;
  ibv_qp* qp = nullptr;
  sockaddr_in self{};  // what peers send to and reply to
  sockaddr_in peer{};  // rconnect's default destination
  bool has_peer = false;
  std::vector<Destination> destinations;
  Completed ready[kDgramRecvSlots] = {};  // received, not yet read, in arrival order
  uint32_t ready_head = 0, ready_count = 0;

  uint8_t* RecvSlot(uint8_t* buffer, uint32_t slot) const {
    return buffer + kDgramSendSlots * kDgramSlotBytes + slot * (kGrhBytes + kDgramSlotBytes);
  }
};

enum class Phase { kIdle, kBound, kListening, kConnecting, kConnected, kFailed, kClosed };

struct Socket {
  int fd = -1;  // the channel's descriptor: the rsocket's number
  int domain = AF_INET;
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  Phase phase = Phase::kIdle;
  bool nonblocking = false;
  bool passive = false;  // made by raccept
  std::mutex mutex;  // one socket's state; never held while sleeping

  // Options kept so that programs read back what they set.
  int reuseaddr = 0, keepalive = 0, nodelay = 0, v6only = 0, sndbuf = static_cast<int>(kSendSlots * kSlotBytes),
      rcvbuf = static_cast<int>(kRecvSlots * kSlotBytes);
  int so_error = 0;
  int64_t rcvtimeo_ms = 0, sndtimeo_ms = 0;  // SO_RCVTIMEO, SO_SNDTIMEO; 0: wait as long as it takes
  int64_t next_event_look_ns = 0;  // MaybePumpEvents

  std::deque<rdma_cm_event*> backlog;  // a listener's CONNECT_REQUESTs not yet accepted

  // The connection's verbs.
  ibv_comp_channel* completions = nullptr;
  ibv_cq* cq = nullptr;
  uint8_t* buffer = nullptr;  // send slots, then receive slots
  size_t buffer_bytes = 0;
  ibv_mr* mr = nullptr;
  bool armed = false;  // the CQ is armed and its event not yet taken

  // Send side. Send slots are used and freed in order.
  uint64_t sends_posted = 0, sends_done = 0;  // slot-using WRs
  uint32_t controls_in_flight = 0;
  int64_t credits = 0;          // receives the peer has posted that we have not used
  uint32_t grant_due = 0;       // receives we re-posted and not yet told the peer
  bool grant_due_data = false;  // some of them held data (a sleeping reader grants those)
  bool fin_sent = false;

  // Receive side. Receives complete in the order posted, so slots fill round robin.
  Completed ready[kPostedRecvs] = {};
  uint32_t ready_head = 0, ready_count = 0;
  uint32_t read_offset = 0;  // bytes of ready[ready_head] already read
  bool fin_received = false;
  bool read_shut = false;
  bool gone = false;    // DISCONNECTED or an error completion: no more messages either way

  std::vector<IoMap> local_maps, remote_maps;

  std::unique_ptr<Datagram> dgram;  // SOCK_DGRAM only

  uint8_t* SendSlot(uint64_t n) { return buffer + (n % kSendSlots) * kSlotBytes; }
  uint8_t* RecvSlot(uint32_t slot) { return buffer + (kSendSlots + slot) * kSlotBytes; }
};

// rsocket_setup.cc
Socket* Find(int fd);    // null with errno EBADF if fd is no rsocket
Socket* Lookup(int fd);  // null if fd is no rsocket; errno untouched
// A connected datagram socket of this process (other than `except`) that listens on `self`,
// or null. Scans every descriptor: for a bind that found its port taken, never per message.
Socket* ConnectedDatagramOn(const sockaddr_in& self, const Socket* except);
int Fail(int error_number);
int64_t NowMs();
// An IPv4 or IPv6 socket address as the IPv4 address softnic's rdma_cm takes, and back into
// the socket's family (truncated to *length, as the kernel does).
int ToIpv4(const sockaddr* address, socklen_t length, sockaddr_in* out);
int FromIpv4(const sockaddr_in& in, int domain, sockaddr* out, socklen_t* length);
// The next event of the socket's channel within timeout_ms (0: only one already there), or
// null. Acknowledging it is the caller's.
rdma_cm_event* NextEvent(Socket* s, int timeout_ms);
// Handles what the channel holds without blocking: connection results, DISCONNECTED, a
// listener's requests (kept in its backlog). Call with s->mutex held.
void PumpEvents(Socket* s);
void MaybePumpEvents(Socket* s);  // PumpEvents, unless it ran within kEventLookIntervalNs

// The socket's completion channel (non-blocking) and a CQ of `depth` on it; -1 on failure.
int CreateCompletions(Socket* s, ibv_context* context, int depth);
// A QP's attributes on the socket's CQ: one SGE each way, kInlineBytes inline.
ibv_qp_init_attr SocketQpAttr(const Socket* s, ibv_qp_type type, uint32_t send_wrs, uint32_t recv_wrs);
// One RECV of `bytes` at `at` (the socket's MR), its wr_id the slot.
int PostSlotRecv(const Socket* s, ibv_qp* qp, uint32_t slot, const void* at, uint32_t bytes);

// rsocket_stream.cc (s->mutex held)
void Drain(Socket* s);                  // polls the CQ and acts on every completion
bool CanSend(const Socket* s);
bool CanReceive(const Socket* s);       // data, end of stream or an error to report
int PostRecv(Socket* s, uint32_t slot);
int SendControl(Socket* s, Kind kind, const void* payload, uint32_t length);
void FlushGrant(Socket* s);             // a credit message for grants due, if any
// Sleeps until a completion or a CM event may have changed the socket, or deadline_ms
// (monotonic; -1: none) passes. Unlocks `lock` while asleep. False on timeout.
bool Sleep(Socket* s, std::unique_lock<std::mutex>& lock, int64_t deadline_ms);
short Readiness(Socket* s, short events);  // rpoll's revents for one socket
template <class Ready>
bool WaitUntil(Socket* s, std::unique_lock<std::mutex>& lock, Ready ready, int64_t deadline_ms);

// rsocket_dgram.cc (s->mutex held, s->dgram set)
int DgramBind(Socket* s, const sockaddr_in& address);
int DgramConnect(Socket* s, const sockaddr_in& address);
ssize_t DgramSend(Socket* s, const iovec* iov, int iovcnt, int flags, const sockaddr_in* to,
                  std::unique_lock<std::mutex>& lock);
ssize_t DgramRecv(Socket* s, const iovec* iov, int iovcnt, int flags, sockaddr_in* from,
                  std::unique_lock<std::mutex>& lock);
void DgramDrain(Socket* s);
void AnswerSidr(Socket* s, rdma_cm_event* request);  // acknowledges it
short DgramReadiness(Socket* s);
void DgramTearDown(Socket* s);
int64_t NowNs();
// The deadline (monotonic ms) a blocking call with this socket timeout waits to; -1: none.
inline int64_t Deadline(int64_t timeout_ms) { return timeout_ms > 0 ? NowMs() + timeout_ms : -1; }

// Waits, spinning first, until ready() or the deadline (monotonic ms, -1: none); false on timeout.
template <class Ready>
bool WaitUntil(Socket* s, std::unique_lock<std::mutex>& lock, Ready ready, int64_t deadline_ms) {
  const int64_t spin_end = NowNs() + int64_t{kSpinBeforeSleepUs} * 1000;
  for (;;) {
    Drain(s);
    if (ready()) return true;
    if (NowNs() < spin_end) continue;
    if (!Sleep(s, lock, deadline_ms)) return ready();
  }
}

}  // namespace softnic::cm::rs
