// Shared setup for the conformance suite: device parameters, RAII verbs objects, QP
// connection for RC/UC/UD over IB (LID) and RoCE (GID) link layers, bounded polling.
// Everything here goes through the public libibverbs API only, so the same binary runs
// on softnic, rxe or a real NIC.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conformance {

using Clock = std::chrono::steady_clock;
// Every wait is bounded: a broken provider fails a test instead of hanging it.
constexpr std::chrono::milliseconds kCompletionTimeoutMs{10'000};
// How long "nothing arrives" is watched before it is believed.
constexpr std::chrono::milliseconds kQuietTimeMs{200};
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kStartPsn = 0x1234;
constexpr size_t kGrhBytes = 40;
constexpr unsigned kAllRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// ---- device parameters -------------------------------------------------------------

// A test runs on `local`, its peer side on `peer` (may be the same device). Empty names
// mean "no device present": the test skips.
struct DevicePair {
  std::string local;
  std::string peer;
};

// Every device libibverbs lists (or env RDMALAB_DEVICE), each with its peer (env
// RDMALAB_PEER_DEVICE, else the next listed device, else itself).
const std::vector<DevicePair>& DevicePairs();
// gtest prints a parameter with this (instead of a byte dump).
void PrintTo(const DevicePair& pair, std::ostream* out);
std::string DevicePairName(const DevicePair& pair);
std::string SanitizeName(const std::string& raw);
inline std::string DeviceParamName(const testing::TestParamInfo<DevicePair>& info) {
  return DevicePairName(info.param);
}
std::string QpTypeName(ibv_qp_type type);
std::string OpcodeName(ibv_wr_opcode opcode);
int GidIndexFromEnv();
bool IsSoftnicName(const std::string& name);

// ---- RAII --------------------------------------------------------------------------

template <typename T, int (*Destroy)(T*)>
struct Destroyer {
  void operator()(T* object) const {
    if (object != nullptr) Destroy(object);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, Destroyer<ibv_context, ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, Destroyer<ibv_pd, ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, Destroyer<ibv_cq, ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, Destroyer<ibv_qp, ibv_destroy_qp>>;
using MrPtr = std::unique_ptr<ibv_mr, Destroyer<ibv_mr, ibv_dereg_mr>>;
using SrqPtr = std::unique_ptr<ibv_srq, Destroyer<ibv_srq, ibv_destroy_srq>>;
using AhPtr = std::unique_ptr<ibv_ah, Destroyer<ibv_ah, ibv_destroy_ah>>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, Destroyer<ibv_comp_channel, ibv_destroy_comp_channel>>;

// One opened device: context, a PD, and the attributes of port 1.
class Device {
 public:
  // Returns nullptr and fills *error when the device cannot be opened.
  static std::unique_ptr<Device> Open(const std::string& name, std::string* error);

  ibv_context* ctx() const { return ctx_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  const std::string& name() const { return name_; }
  const ibv_device_attr& attr() const { return attr_; }
  const ibv_port_attr& port() const { return port_; }
  const ibv_gid& gid() const { return gid_; }
  int gid_index() const { return gid_index_; }
  uint8_t port_num() const { return 1; }
  bool roce() const { return port_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  bool softnic() const { return IsSoftnicName(name_); }
  size_t active_mtu_bytes() const;

 private:
  std::string name_;
  ContextPtr ctx_;
  PdPtr pd_;
  ibv_device_attr attr_{};
  ibv_port_attr port_{};
  ibv_gid gid_{};
  int gid_index_ = 0;
};

size_t MtuBytes(ibv_mtu mtu);

// Registered memory owned by the test.
class Buffer {
 public:
  Buffer() = default;
  // Allocates `size` bytes (64-byte aligned, zeroed) and registers them on `pd`.
  static Buffer Make(ibv_pd* pd, size_t size, unsigned access, std::string* error);

  uint8_t* data() const { return mem_.get(); }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(mem_.get()); }
  size_t size() const { return size_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  ibv_mr* mr() const { return mr_.get(); }
  void Deregister() { mr_.reset(); }
  explicit operator bool() const { return mr_ != nullptr; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem_;
  size_t size_ = 0;
  MrPtr mr_;
};

ibv_sge Sge(const Buffer& buffer, size_t offset, size_t length);

// What one side tells the other to connect (trivially copyable: sent over pipes).
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = kStartPsn;
  uint16_t lid = 0;
  uint8_t mtu = IBV_MTU_1024;  // ibv_mtu of the port
  uint8_t roce = 0;
  ibv_gid gid{};
};

// Remote memory one side exposes (trivially copyable).
struct RemoteMr {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
  uint64_t length = 0;
};

struct QpConfig {
  ibv_qp_type type = IBV_QPT_RC;
  uint32_t send_wr = 64;
  uint32_t recv_wr = 64;
  uint32_t send_sge = 1;
  uint32_t recv_sge = 1;
  uint32_t inline_bytes = 0;
  int cq_entries = 256;
  ibv_srq* srq = nullptr;
  ibv_comp_channel* channel = nullptr;  // for both CQs when they are created here
  ibv_cq* send_cq = nullptr;            // use this CQ instead of creating one
  ibv_cq* recv_cq = nullptr;
  bool sq_sig_all = false;
  uint64_t send_ops_flags = 0;  // non-zero: created with ibv_create_qp_ex for the ibv_wr_* API
};

// A QP on one device with its CQs.
class Endpoint {
 public:
  // Returns nullptr and the errno-style reason in *err (with a description in *error).
  static std::unique_ptr<Endpoint> Create(Device& device, const QpConfig& config, int* err,
                                          std::string* error);
  ~Endpoint();

  Device& device() const { return device_; }
  ibv_qp* qp() const { return qp_.get(); }
  ibv_cq* send_cq() const { return send_cq_; }
  ibv_cq* recv_cq() const { return recv_cq_; }
  const ibv_qp_cap& cap() const { return cap_; }
  ibv_qp_type type() const { return type_; }
  QpInfo info() const;
  void DestroyQp() { qp_.reset(); }

 private:
  explicit Endpoint(Device& device) : device_(device) {}
  Device& device_;
  CqPtr own_send_cq_, own_recv_cq_;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  QpPtr qp_;
  ibv_qp_cap cap_{};
  ibv_qp_type type_ = IBV_QPT_RC;
};

struct ConnectConfig {
  uint8_t timeout = 14;  // 4.096 us * 2^timeout per try
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = retry forever
  uint8_t min_rnr_timer = 12;
  unsigned access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  bool global = false;  // force a GRH even on IB (RoCE always uses one)
};

// Address vector from `local` towards `remote` (LID on IB, GID with GRH on RoCE).
ibv_ah_attr AhAttr(const Device& local, const QpInfo& remote, bool force_global);
int ModifyToInit(Endpoint& ep, const ConnectConfig& config);
int ModifyToRtr(Endpoint& ep, const QpInfo& remote, const ConnectConfig& config);
int ModifyToRts(Endpoint& ep, const ConnectConfig& config);
// RESET -> INIT -> RTR -> RTS; for UD `remote` is ignored. Returns 0 or an errno value.
int Connect(Endpoint& ep, const QpInfo& remote, const ConnectConfig& config = {});
ibv_qp_state QueryState(ibv_qp* qp);

// ---- posting -----------------------------------------------------------------------

struct SendSpec {
  ibv_wr_opcode opcode = IBV_WR_SEND;
  std::vector<ibv_sge> sges;
  unsigned flags = IBV_SEND_SIGNALED;
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm_host = 0;  // converted to network order in the WR
  ibv_ah* ah = nullptr;
  uint32_t remote_qpn = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
};
// *bad_is_wr (when given) tells whether the provider pointed bad_wr at the WR.
int PostSend(ibv_qp* qp, const SendSpec& spec, bool* bad_is_wr = nullptr);
int PostRecv(ibv_qp* qp, const std::vector<ibv_sge>& sges, uint64_t wr_id);
int PostSrqRecv(ibv_srq* srq, const std::vector<ibv_sge>& sges, uint64_t wr_id);

// ---- polling -----------------------------------------------------------------------

// The next completion, or nullopt after `timeout`. A negative ibv_poll_cq return is
// reported through *poll_error when given (else it ends the wait like a timeout).
std::optional<ibv_wc> PollOne(ibv_cq* cq, std::chrono::milliseconds timeout = kCompletionTimeoutMs,
                              int* poll_error = nullptr);
// Up to n completions within `timeout`.
std::vector<ibv_wc> PollMany(ibv_cq* cq, size_t n, std::chrono::milliseconds timeout = kCompletionTimeoutMs);
// True when no completion arrives within `quiet` (the CQ is left as it was found otherwise:
// a completion that does arrive is returned through *unexpected).
bool StaysEmpty(ibv_cq* cq, std::chrono::milliseconds quiet = kQuietTimeMs, ibv_wc* unexpected = nullptr);
std::string Describe(const ibv_wc& wc);
// Waits for an async event of `type` (others are acknowledged and skipped).
std::optional<ibv_async_event> WaitAsyncEvent(ibv_context* ctx, ibv_event_type type,
                                              std::chrono::milliseconds timeout);

bool IsUnsupported(int err);

// gtest helpers (call through ASSERT_NO_FATAL_FAILURE):
// posts `spec` on `ep` and expects exactly one send completion with `status`.
void PostAndExpect(Endpoint& ep, const SendSpec& spec, ibv_wc_status status, ibv_wc* out = nullptr);
// expects the next completion on `cq` to carry `status`.
void ExpectCompletion(ibv_cq* cq, ibv_wc_status status, ibv_wc* out = nullptr);

// ---- fixture -----------------------------------------------------------------------

// Two connected endpoints: `a` on the local device, `b` on the peer device.
struct Pair {
  std::unique_ptr<Endpoint> a, b;
  AhPtr a_to_b, b_to_a;  // UD only
};

// Device-opening and pair-building used by every fixture (mixed into gtest fixtures).
class VerbsBase {
 protected:
  // Skips when the pair is empty; fails when a device cannot be opened.
  void OpenDevices(const DevicePair& pair);
  Device& local() { return *local_; }
  Device& peer() { return peer_ != nullptr ? *peer_ : *local_; }

  // Creates `a` (local) and `b` (peer) with `config` (b with `b_config` when given) and
  // connects them. Skips on "not supported", fails on any other error.
  void MakePair(Pair* pair, const QpConfig& config, const ConnectConfig& connect = {},
                const QpConfig* b_config = nullptr);
  void MakeEndpoint(std::unique_ptr<Endpoint>* out, Device& device, const QpConfig& config);
  void MakeBuffer(Buffer* out, Device& device, size_t size, unsigned access = kAllRemoteAccess);
  // An AH on `from` towards `to_info`.
  void MakeAh(AhPtr* out, Device& from, const QpInfo& to_info, bool force_global = false);

 private:
  std::unique_ptr<Device> local_, peer_;
};

class VerbsTest : public testing::TestWithParam<DevicePair>, protected VerbsBase {
 protected:
  void SetUp() override { OpenDevices(GetParam()); }
};

}  // namespace conformance

// Runs a setup helper that may fail or skip, and leaves the test if it did either.
#define CONFORMANCE_SETUP(expr)                       \
  do {                                                \
    ASSERT_NO_FATAL_FAILURE(expr);                    \
    if (::testing::Test::IsSkipped()) return;         \
  } while (0)

#define EXPECT_WC_STATUS(wc, expected)                                                          \
  EXPECT_EQ((wc).status, (expected)) << "got " << ibv_wc_status_str((wc).status) << ", expected " \
                                     << ibv_wc_status_str(expected) << " (" << ::conformance::Describe(wc) << ")"
#define ASSERT_WC_STATUS(wc, expected)                                                          \
  ASSERT_EQ((wc).status, (expected)) << "got " << ibv_wc_status_str((wc).status) << ", expected " \
                                     << ibv_wc_status_str(expected) << " (" << ::conformance::Describe(wc) << ")"

// Skips the test when `err` says the provider does not support `what`.
#define SKIP_IF_UNSUPPORTED(err, what)                                                        \
  do {                                                                                        \
    if (::conformance::IsUnsupported(err)) GTEST_SKIP() << what << " not supported: " << strerror(err); \
  } while (0)

#define CONFORMANCE_INSTANTIATE(suite) \
  INSTANTIATE_TEST_SUITE_P(Devices, suite, ::testing::ValuesIn(::conformance::DevicePairs()), \
                           ::conformance::DeviceParamName)

namespace conformance {

// ~4 ms per try (4.096 us * 2^10), two retries: well under the poll deadline.
constexpr ConnectConfig kShortRetry{.timeout = 10, .retry_cnt = 2, .rnr_retry = 2, .min_rnr_timer = 1};

// A test on one QP pair, a on local() and b on peer(), with a buffer on each side.
template <typename Base = VerbsTest>
class PairTest : public Base {
 protected:
  void SetUpBuffers(size_t remote_bytes = 4096) {
    CONFORMANCE_SETUP(this->MakeBuffer(&local_buf_, this->local(), 4096));
    CONFORMANCE_SETUP(this->MakeBuffer(&remote_buf_, this->peer(), remote_bytes));
  }
  void SetUpPair(ibv_qp_type type, const ConnectConfig& connect = {}, size_t remote_bytes = 4096) {
    CONFORMANCE_SETUP(this->MakePair(&pair_, {.type = type}, connect));
    CONFORMANCE_SETUP(SetUpBuffers(remote_bytes));
  }

  Pair pair_;
  Buffer local_buf_, remote_buf_;
};

}  // namespace conformance
