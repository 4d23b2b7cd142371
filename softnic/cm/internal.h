// softnic's librdmacm: the objects behind the public rdma_cm structs, and the messages two
// ids exchange. Connection management is control path only (setup and teardown); nothing
// here runs per work request.
//
// Addressing: device i of fabric F has the IPv4 address DeviceIpv4(F, i) (its RoCE GID
// follows it). A listener is a Unix SOCK_SEQPACKET socket in the fabric directory named by
// port and address (0.0.0.0 for a wildcard); connecting to it carries the CM exchange
// (REQ, REP, RTU, REJ, DREQ, DREP; SIDR REQ/REP for RDMA_PS_UDP). A peer that dies closes
// its socket, so the other side sees end-of-file at once: DISCONNECTED when connected,
// REJECTED while connecting; a peer that lives but never answers gives UNREACHABLE when
// the connect timeout passes.
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <deque>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace softnic::cm {

constexpr uint32_t kMessageMagic = 0x534e434d;  // "SNCM"
constexpr size_t kMaxPrivateDataBytes = 196;    // a REP's, the largest of IB CM's messages
constexpr size_t kMaxReqPrivateDataBytes = 56;  // rdma_cm's limit for a TCP port space REQ
constexpr int kConnectTimeoutMs = 30000;
// rdma_destroy_id waits this long for the program to acknowledge the id's events (librdmacm
// waits forever), then fails with EBUSY and says so.
constexpr int kDestroyAckWaitMs = 5000;
constexpr int kRejectNoListener = 8;    // IB_CM_REJ_INVALID_SERVICE_ID
constexpr int kRejectConsumer = 28;     // IB_CM_REJ_CONSUMER_DEFINED
constexpr uint32_t kDefaultUdQkey = 0x01234567;  // RDMA_UDP_QKEY
constexpr uint8_t kDefaultAckTimeout = 14;       // 4.096 us * 2^14 = 67 ms local ACK timeout
constexpr uint8_t kMaxAckTimeout = 31;           // the QP attribute's 5 bits
static_assert(kMaxReqPrivateDataBytes <= kMaxPrivateDataBytes);

enum class MessageType : uint8_t { kReq, kRep, kRtu, kRej, kDreq, kDrep, kSidrReq, kSidrRep };

// One CM message; the same struct each way, fields a type does not use are zero.
struct Message {
  uint32_t magic = kMessageMagic;
  MessageType type = MessageType::kReq;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t srq = 0;
  uint8_t private_data_len = 0;
  uint16_t lid = 0;
  int32_t status = 0;
  uint32_t qp_num = 0;
  uint32_t qkey = 0;
  uint8_t gid[16] = {};
  sockaddr_in src{};  // the sender's address and port
  sockaddr_in dst{};
  uint8_t private_data[kMaxPrivateDataBytes] = {};
};

enum class State {
  kIdle, kBound, kAddrResolved, kRouteResolved, kListening, kConnecting, kRequested,  // passive, before accept
  kAccepted, kEstablished, kDisconnecting, kClosed
};

struct Channel;

// A multicast group an id joined (multicast.cc).
struct Membership {
  in_addr_t address;   // the group's IPv4 address, network order
  ibv_gid mgid;
  uint16_t mlid;
  void* context;       // the join's, returned in MULTICAST_JOIN's param.ud.private_data
  bool attached;       // the id's QP is attached (a full member with a QP at join time)
};

// rdma_cm_id first, so the public pointer is the object's.
struct Id {
  rdma_cm_id id{};
  // Names the id in its channel's epoll set: an id destroyed after epoll_wait returned is
  // found missing, never taken for a new id that reuses its address.
  uint64_t serial = 0;
  Channel* owner = nullptr;         // the channel its events go to
  Id* listener = nullptr;           // a passive id's listener (its REQ has not come yet while kIdle)
  bool sync = false;                // created without a channel: its calls block (rdma_create_ep)
  // Atomic: the program's calls (rdma_accept, ...) and the thread that pumps the channel's
  // events (rdma_get_cm_event, often another thread, as rping's) both move it.
  std::atomic<State> state{State::kIdle};
  int device = -1;                  // softnic device index, -1 before binding/resolution
  int socket = -1;                  // listener, or the connection to the peer
  std::string listen_path;          // a listener's socket path, unlinked on destroy
  Message peer{};                   // the peer's REQ (passive) or REP (active)
  Message local{};                  // what this side sent: its resources and retry counts
  std::atomic<int64_t> deadline_ms{0};  // connect timeout (monotonic ms), 0: none
  ibv_qp_init_attr* ep_qp_init = nullptr;  // rdma_create_ep's QP attributes for rdma_get_request
  bool own_cqs = false;             // rdma_create_qp made the CQs and channels
  bool own_pd = false;
  uint8_t ack_timeout = kDefaultAckTimeout;  // RDMA_OPTION_ID_ACK_TIMEOUT, used at RTS
  int unacked_events = 0;  // delivered by rdma_get_cm_event, not yet acknowledged (AckMutex)
  std::vector<Membership> groups;  // multicast groups joined and not left
};

// An event and the private data it points into, so it lives until rdma_ack_cm_event.
struct Event {
  rdma_cm_event event{};
  // The id whose unacknowledged count this event holds once delivered: a connection
  // request's listener (the new id's own events come after), else the event's id.
  Id* charged = nullptr;
  uint8_t private_data[kMaxPrivateDataBytes] = {};
};

// rdma_event_channel first. fd is an epoll descriptor over `wake` and every id's socket,
// so a program can poll() it; events made without a message wait in `queue`.
struct Channel {
  rdma_event_channel channel{};
  int wake = -1;  // eventfd: readable while `queue` is not empty
  // Held while a message or timeout of one of the channel's ids is handled, and by the
  // program's calls that change an id's socket or membership (connect, accept, reject,
  // disconnect, destroy, migrate): a program's rdma_destroy_id and another thread pumping
  // the channel (rping's cm_thread) never meet inside one id. Never held while waiting.
  std::mutex pump;
  std::mutex mutex;  // queue and ids; taken after pump
  std::deque<Event*> queue;
  std::vector<Id*> ids;
};

inline Id* ToId(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* ToChannel(rdma_event_channel* channel) { return reinterpret_cast<Channel*>(channel); }

// The fabric's devices, opened once for the life of the process (rdma_get_devices).
struct Devices {
  std::vector<ibv_context*> contexts;
  std::vector<ibv_pd*> pds;       // one default PD per device, for rdma_create_qp(id, nullptr, ...)
  std::vector<in_addr_t> addresses;  // network order
  std::string directory;          // the fabric directory (listener sockets live there)
  bool ethernet = false;
};
// Null with errno set when softnic's libibverbs is not loaded or lists no device.
const Devices* GetDevices();
int DeviceOfAddress(in_addr_t address);  // -1 if no device has it

// events.cc
// `ud`, when given, is the event's param.ud (a multicast join's address and QKEY).
void Push(Channel* channel, Id* id, rdma_cm_event_type type, int status, const Message* message = nullptr,
          Id* listen_id = nullptr, const rdma_ud_param* ud = nullptr);
void Watch(Id* id);    // adds id->socket to its channel's epoll set, named by id->serial
void Unwatch(Id* id);
int64_t NowMs();
// Waits until every event delivered for `id` is acknowledged, at most timeout_ms; returns
// how many are still not.
int WaitForAcks(Id* id, int timeout_ms);

// ids.cc: a readable socket of `id` (a connection attempt on a listener, or a message).
void HandleReadable(Id* id);
void HandleTimeout(Id* id);
int WaitFor(Id* id, rdma_cm_event_type expected);  // sync ids: the event a call waits for

// multicast.cc: detaches the id's QP from every group it joined and forgets them.
void LeaveAllMulticast(Id* id);
// qp.cc
// RTR and RTS towards `remote` (the peer's REQ or REP) with the resources in id->local.
int MoveQpToRts(Id* id, const Message& remote, bool active);
void MoveQpToError(Id* id);

}  // namespace softnic::cm
