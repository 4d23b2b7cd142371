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

enum class Phase { kIdle, kBound, kListening, kConnecting, kConnected, kFailed, kClosed };

struct Completed {  // a receive slot holding data not yet read
  uint32_t slot;
  uint32_t length;
};

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

  uint8_t* SendSlot(uint64_t n) { return buffer + (n % kSendSlots) * kSlotBytes; }
  uint8_t* RecvSlot(uint32_t slot) { return buffer + (kSendSlots + slot) * kSlotBytes; }
};

// rsocket_setup.cc
Socket* Find(int fd);    // null with errno EBADF if fd is no rsocket
Socket* Lookup(int fd);  // null if fd is no rsocket; errno untouched
int Fail(int error_number);
int64_t NowMs();
// The next event of the socket's channel within timeout_ms (0: only one already there), or
// null. Acknowledging it is the caller's.
rdma_cm_event* NextEvent(Socket* s, int timeout_ms);
// Handles what the channel holds without blocking: connection results, DISCONNECTED, a
// listener's requests (kept in its backlog). Call with s->mutex held.
void PumpEvents(Socket* s);

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

}  // namespace softnic::cm::rs
