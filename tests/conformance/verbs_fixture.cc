#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace conformance {

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::vector<std::string> ListDeviceNames() {
  std::vector<std::string> names;
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return names;
  for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

}  // namespace

bool IsSoftnicName(const std::string& name) { return name.rfind("softnic", 0) == 0; }

int GidIndexFromEnv() { return std::atoi(EnvOr("RDMALAB_GID_INDEX", "0").c_str()); }

const std::vector<DevicePair>& DevicePairs() {
  static const std::vector<DevicePair> pairs = [] {
    std::vector<DevicePair> result;
    const std::vector<std::string> names = ListDeviceNames();
    const std::string only = EnvOr("RDMALAB_DEVICE", "");
    const std::string peer = EnvOr("RDMALAB_PEER_DEVICE", "");
    auto peer_of = [&](const std::string& local) {
      if (!peer.empty()) return peer;
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == local) return names[(i + 1) % names.size()];
      return local;
    };
    if (!only.empty()) {
      result.push_back({only, peer_of(only)});
    } else {
      for (const std::string& name : names) result.push_back({name, peer_of(name)});
    }
    if (result.empty()) result.push_back({"", ""});  // one parameter that skips
    return result;
  }();
  return pairs;
}

void PrintTo(const DevicePair& pair, std::ostream* out) { *out << pair.local << " -> " << pair.peer; }

std::string SanitizeName(const std::string& raw) {
  std::string out;
  for (char c : raw) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string DevicePairName(const DevicePair& pair) {
  if (pair.local.empty()) return "NoDevice";
  return SanitizeName(pair.local + "_" + pair.peer);
}

std::string QpTypeName(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    default: return "QPT" + std::to_string(type);
  }
}

std::string OpcodeName(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE: return "Write";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "WriteImm";
    case IBV_WR_SEND: return "Send";
    case IBV_WR_SEND_WITH_IMM: return "SendImm";
    case IBV_WR_RDMA_READ: return "Read";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "CmpSwap";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "FetchAdd";
    default: return "Op" + std::to_string(opcode);
  }
}

size_t MtuBytes(ibv_mtu mtu) { return size_t{128} << static_cast<int>(mtu); }

size_t Device::active_mtu_bytes() const { return MtuBytes(port_.active_mtu); }

std::unique_ptr<Device> Device::Open(const std::string& name, std::string* error) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    *error = "ibv_get_device_list failed: " + std::string(strerror(errno));
    return nullptr;
  }
  ibv_device* found = nullptr;
  for (int i = 0; i < count; ++i)
    if (name == ibv_get_device_name(list[i])) found = list[i];
  std::unique_ptr<Device> device(new Device());
  device->name_ = name;
  if (found != nullptr) device->ctx_.reset(ibv_open_device(found));
  ibv_free_device_list(list);
  if (found == nullptr) {
    *error = "device " + name + " is not in ibv_get_device_list (" + std::to_string(count) + " devices)";
    return nullptr;
  }
  if (!device->ctx_) {
    *error = "ibv_open_device(" + name + "): " + strerror(errno);
    return nullptr;
  }
  device->pd_.reset(ibv_alloc_pd(device->ctx_.get()));
  if (!device->pd_) {
    *error = "ibv_alloc_pd on " + name + ": " + strerror(errno);
    return nullptr;
  }
  if (int rc = ibv_query_device(device->ctx_.get(), &device->attr_); rc != 0) {
    *error = "ibv_query_device on " + name + ": " + strerror(rc);
    return nullptr;
  }
  if (int rc = ibv_query_port(device->ctx_.get(), 1, &device->port_); rc != 0) {
    *error = "ibv_query_port(" + name + ", 1): " + strerror(rc);
    return nullptr;
  }
  device->gid_index_ = GidIndexFromEnv();
  if (int rc = ibv_query_gid(device->ctx_.get(), 1, device->gid_index_, &device->gid_); rc != 0) {
    *error = "ibv_query_gid(" + name + ", port 1, index " + std::to_string(device->gid_index_) +
             "): " + strerror(rc) + " (set RDMALAB_GID_INDEX to a valid index)";
    return nullptr;
  }
  return device;
}

Buffer Buffer::Make(ibv_pd* pd, size_t size, unsigned access, std::string* error) {
  Buffer buffer;
  const size_t rounded = (size + 4095) / 4096 * 4096;
  buffer.mem_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
  if (!buffer.mem_) {
    *error = "aligned_alloc(" + std::to_string(rounded) + ") failed";
    return Buffer();
  }
  std::memset(buffer.mem_.get(), 0, rounded);
  buffer.size_ = size;
  buffer.mr_.reset(ibv_reg_mr(pd, buffer.mem_.get(), size, static_cast<int>(access)));
  if (!buffer.mr_) {
    *error = "ibv_reg_mr(" + std::to_string(size) + " bytes, access 0x" + std::to_string(access) +
             "): " + strerror(errno);
    return Buffer();
  }
  return buffer;
}

ibv_sge Sge(const Buffer& buffer, size_t offset, size_t length) {
  return ibv_sge{buffer.addr() + offset, static_cast<uint32_t>(length), buffer.lkey()};
}

std::unique_ptr<Endpoint> Endpoint::Create(Device& device, const QpConfig& config, int* err,
                                           std::string* error) {
  std::unique_ptr<Endpoint> ep(new Endpoint(device));
  ep->type_ = config.type;
  ep->send_cq_ = config.send_cq;
  ep->recv_cq_ = config.recv_cq;
  if (ep->send_cq_ == nullptr) {
    ep->own_send_cq_.reset(ibv_create_cq(device.ctx(), config.cq_entries, nullptr, config.channel, 0));
    ep->send_cq_ = ep->own_send_cq_.get();
  }
  if (ep->recv_cq_ == nullptr) {
    ep->own_recv_cq_.reset(ibv_create_cq(device.ctx(), config.cq_entries, nullptr, config.channel, 0));
    ep->recv_cq_ = ep->own_recv_cq_.get();
  }
  if (ep->send_cq_ == nullptr || ep->recv_cq_ == nullptr) {
    *err = errno;
    *error = "ibv_create_cq(" + std::to_string(config.cq_entries) + ") on " + device.name() + ": " + strerror(errno);
    return nullptr;
  }
  ibv_qp_init_attr init{};
  init.send_cq = ep->send_cq_;
  init.recv_cq = ep->recv_cq_;
  init.srq = config.srq;
  init.qp_type = config.type;
  init.sq_sig_all = config.sq_sig_all ? 1 : 0;
  init.cap.max_send_wr = config.send_wr;
  init.cap.max_recv_wr = config.srq != nullptr ? 0 : config.recv_wr;
  init.cap.max_send_sge = config.send_sge;
  init.cap.max_recv_sge = config.srq != nullptr ? 0 : config.recv_sge;
  init.cap.max_inline_data = config.inline_bytes;
  if (config.send_ops_flags != 0) {
    ibv_qp_init_attr_ex init_ex{};
    init_ex.send_cq = init.send_cq;
    init_ex.recv_cq = init.recv_cq;
    init_ex.srq = init.srq;
    init_ex.cap = init.cap;
    init_ex.qp_type = init.qp_type;
    init_ex.sq_sig_all = init.sq_sig_all;
    init_ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init_ex.pd = device.pd();
    init_ex.send_ops_flags = config.send_ops_flags;
    ep->qp_.reset(ibv_create_qp_ex(device.ctx(), &init_ex));
    init.cap = init_ex.cap;
  } else {
    ep->qp_.reset(ibv_create_qp(device.pd(), &init));
  }
  if (!ep->qp_) {
    *err = errno != 0 ? errno : EINVAL;
    std::ostringstream out;
    out << "ibv_create_qp(" << QpTypeName(config.type) << ", send_wr " << config.send_wr << ", recv_wr "
        << config.recv_wr << ", send_sge " << config.send_sge << ", recv_sge " << config.recv_sge
        << ", inline " << config.inline_bytes << ") on " << device.name() << ": " << strerror(*err);
    *error = out.str();
    return nullptr;
  }
  ep->cap_ = init.cap;
  *err = 0;
  return ep;
}

Endpoint::~Endpoint() { qp_.reset(); }

QpInfo Endpoint::info() const {
  QpInfo info;
  info.qpn = qp_ ? qp_->qp_num : 0;
  info.lid = device_.port().lid;
  info.mtu = static_cast<uint8_t>(device_.port().active_mtu);
  info.roce = device_.roce() ? 1 : 0;
  info.gid = device_.gid();
  return info;
}

ibv_ah_attr AhAttr(const Device& local, const QpInfo& remote, bool force_global) {
  ibv_ah_attr ah{};
  ah.port_num = local.port_num();
  ah.dlid = remote.lid;
  if (local.roce() || remote.roce || force_global) {
    ah.is_global = 1;
    ah.grh.dgid = remote.gid;
    ah.grh.sgid_index = static_cast<uint8_t>(local.gid_index());
    ah.grh.hop_limit = 1;
  }
  return ah;
}

int ModifyToInit(Endpoint& ep, const ConnectConfig& config) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = ep.device().port_num();
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (ep.type() == IBV_QPT_UD) {
    attr.qkey = kQkey;
    mask |= IBV_QP_QKEY;
  } else {
    attr.qp_access_flags = config.access;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  return ibv_modify_qp(ep.qp(), &attr, mask);
}

int ModifyToRtr(Endpoint& ep, const QpInfo& remote, const ConnectConfig& config) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (ep.type() != IBV_QPT_UD) {
    attr.path_mtu = std::min(ep.device().port().active_mtu, static_cast<ibv_mtu>(remote.mtu));
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.ah_attr = AhAttr(ep.device(), remote, config.global);
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (ep.type() == IBV_QPT_RC) {
      attr.max_dest_rd_atomic = static_cast<uint8_t>(std::clamp(ep.device().attr().max_qp_rd_atom, 1, 16));
      attr.min_rnr_timer = config.min_rnr_timer;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  return ibv_modify_qp(ep.qp(), &attr, mask);
}

int ModifyToRts(Endpoint& ep, const ConnectConfig& config) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = kStartPsn;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (ep.type() == IBV_QPT_RC) {
    attr.timeout = config.timeout;
    attr.retry_cnt = config.retry_cnt;
    attr.rnr_retry = config.rnr_retry;
    attr.max_rd_atomic = static_cast<uint8_t>(std::clamp(ep.device().attr().max_qp_rd_atom, 1, 16));
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return ibv_modify_qp(ep.qp(), &attr, mask);
}

int Connect(Endpoint& ep, const QpInfo& remote, const ConnectConfig& config) {
  if (int rc = ModifyToInit(ep, config); rc != 0) return rc;
  if (int rc = ModifyToRtr(ep, remote, config); rc != 0) return rc;
  return ModifyToRts(ep, config);
}

ibv_qp_state QueryState(ibv_qp* qp) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) != 0) return static_cast<ibv_qp_state>(-1);
  return attr.qp_state;
}

int PostSend(ibv_qp* qp, const SendSpec& spec, bool* bad_is_wr) {
  std::vector<ibv_sge> sges = spec.sges;
  ibv_send_wr wr{};
  wr.wr_id = spec.wr_id;
  wr.sg_list = sges.empty() ? nullptr : sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  wr.opcode = spec.opcode;
  wr.send_flags = spec.flags;
  wr.imm_data = htonl(spec.imm_host);
  switch (spec.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      wr.wr.rdma.remote_addr = spec.remote_addr;
      wr.wr.rdma.rkey = spec.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      wr.wr.atomic.remote_addr = spec.remote_addr;
      wr.wr.atomic.rkey = spec.rkey;
      wr.wr.atomic.compare_add = spec.compare_add;
      wr.wr.atomic.swap = spec.swap;
      break;
    default:
      break;
  }
  if (spec.ah != nullptr) {
    wr.wr.ud.ah = spec.ah;
    wr.wr.ud.remote_qpn = spec.remote_qpn;
    wr.wr.ud.remote_qkey = kQkey;
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, &wr, &bad);
  if (bad_is_wr != nullptr) *bad_is_wr = bad == &wr;
  return rc;
}

namespace {

// One receive WR over `sges`, handed to `post` (a QP's or an SRQ's post_recv).
template <typename Post>
int PostOneRecv(const std::vector<ibv_sge>& sges, uint64_t wr_id, Post&& post) {
  std::vector<ibv_sge> copy = sges;  // ibv_recv_wr takes a non-const SGE list
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = copy.data();
  wr.num_sge = static_cast<int>(copy.size());
  ibv_recv_wr* bad = nullptr;
  return post(&wr, &bad);
}

}  // namespace

int PostRecv(ibv_qp* qp, const std::vector<ibv_sge>& sges, uint64_t wr_id) {
  return PostOneRecv(sges, wr_id, [qp](ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); });
}

int PostSrqRecv(ibv_srq* srq, const std::vector<ibv_sge>& sges, uint64_t wr_id) {
  return PostOneRecv(sges, wr_id,
                     [srq](ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_srq_recv(srq, wr, bad); });
}

std::optional<ibv_wc> PollOne(ibv_cq* cq, std::chrono::milliseconds timeout, int* poll_error) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n > 0) return wc;
    if (n < 0) {
      if (poll_error != nullptr) *poll_error = n;
      return std::nullopt;
    }
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::yield();
  }
}

std::vector<ibv_wc> PollMany(ibv_cq* cq, size_t n, std::chrono::milliseconds timeout) {
  std::vector<ibv_wc> out;
  const auto deadline = Clock::now() + timeout;
  while (out.size() < n) {
    ibv_wc wc{};
    const int got = ibv_poll_cq(cq, 1, &wc);
    if (got < 0) break;
    if (got > 0) {
      out.push_back(wc);
      continue;
    }
    if (Clock::now() > deadline) break;
    std::this_thread::yield();
  }
  return out;
}

bool StaysEmpty(ibv_cq* cq, std::chrono::milliseconds quiet, ibv_wc* unexpected) {
  std::optional<ibv_wc> wc = PollOne(cq, quiet);
  if (wc && unexpected != nullptr) *unexpected = *wc;
  return !wc;
}

std::string Describe(const ibv_wc& wc) {
  std::ostringstream out;
  out << "wr_id " << wc.wr_id << ", status " << ibv_wc_status_str(wc.status) << " (" << wc.status << "), opcode "
      << wc.opcode << ", byte_len " << wc.byte_len << ", qp_num " << wc.qp_num << ", wc_flags 0x" << std::hex
      << wc.wc_flags << ", vendor_err 0x" << wc.vendor_err;
  return out.str();
}

std::optional<ibv_async_event> WaitAsyncEvent(ibv_context* ctx, ibv_event_type type,
                                              std::chrono::milliseconds timeout) {
  const int flags = fcntl(ctx->async_fd, F_GETFL);
  fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{ctx->async_fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    ibv_async_event event{};
    if (ibv_get_async_event(ctx, &event) != 0) continue;
    const ibv_async_event copy = event;
    ibv_ack_async_event(&event);
    if (copy.event_type == type) return copy;
  }
}

bool IsUnsupported(int err) { return err == EOPNOTSUPP || err == ENOSYS || err == ENOTSUP; }

void ExpectCompletion(ibv_cq* cq, ibv_wc_status status, ibv_wc* out) {
  int poll_error = 0;
  std::optional<ibv_wc> wc = PollOne(cq, kCompletionTimeoutMs, &poll_error);
  ASSERT_EQ(poll_error, 0) << "ibv_poll_cq returned " << poll_error;
  ASSERT_TRUE(wc.has_value()) << "no completion within " << kCompletionTimeoutMs.count() << " ms (expected "
                              << ibv_wc_status_str(status) << ")";
  ASSERT_WC_STATUS(*wc, status);
  if (out != nullptr) *out = *wc;
}

void PostAndExpect(Endpoint& ep, const SendSpec& spec, ibv_wc_status status, ibv_wc* out) {
  const int rc = PostSend(ep.qp(), spec);
  ASSERT_EQ(rc, 0) << "ibv_post_send(" << OpcodeName(spec.opcode) << ") on " << QpTypeName(ep.type())
                   << ": " << strerror(rc);
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(ep.send_cq(), status, &wc));
  EXPECT_EQ(wc.wr_id, spec.wr_id);
  if (out != nullptr) *out = wc;
}

void VerbsBase::OpenDevices(const DevicePair& pair) {
  if (pair.local.empty()) {
    // Where a provider is expected (softnic in ctest), an empty list is a failure: a suite
    // that skips everything must not pass.
    if (EnvOr("RDMALAB_REQUIRE_DEVICE", "") == "1") {
      FAIL() << "no RDMA device: ibv_get_device_list lists none (RDMALAB_REQUIRE_DEVICE=1)";
    }
    GTEST_SKIP() << "no RDMA device: ibv_get_device_list lists none";
  }
  std::string error;
  local_ = Device::Open(pair.local, &error);
  ASSERT_TRUE(local_ != nullptr) << error;
  if (pair.peer != pair.local) {
    peer_ = Device::Open(pair.peer, &error);
    ASSERT_TRUE(peer_ != nullptr) << error;
  }
  if (local_->port().state != IBV_PORT_ACTIVE) GTEST_SKIP() << pair.local << " port 1 is not ACTIVE";
  if (peer().port().state != IBV_PORT_ACTIVE) GTEST_SKIP() << pair.peer << " port 1 is not ACTIVE";
}

void VerbsBase::MakeEndpoint(std::unique_ptr<Endpoint>* out, Device& device, const QpConfig& config) {
  int err = 0;
  std::string error;
  *out = Endpoint::Create(device, config, &err, &error);
  if (*out == nullptr && IsUnsupported(err)) GTEST_SKIP() << error;
  ASSERT_TRUE(*out != nullptr) << error;
}

void VerbsBase::MakeBuffer(Buffer* out, Device& device, size_t size, unsigned access) {
  std::string error;
  *out = Buffer::Make(device.pd(), size, access, &error);
  ASSERT_TRUE(static_cast<bool>(*out)) << error;
}

void VerbsBase::MakeAh(AhPtr* out, Device& from, const QpInfo& to_info, bool force_global) {
  ibv_ah_attr attr = AhAttr(from, to_info, force_global);
  out->reset(ibv_create_ah(from.pd(), &attr));
  ASSERT_TRUE(*out != nullptr) << "ibv_create_ah on " << from.name() << " (dlid " << to_info.lid
                               << ", global " << int(attr.is_global) << "): " << strerror(errno);
}

void VerbsBase::MakePair(Pair* pair, const QpConfig& config, const ConnectConfig& connect,
                         const QpConfig* b_config) {
  CONFORMANCE_SETUP(MakeEndpoint(&pair->a, local(), config));
  CONFORMANCE_SETUP(MakeEndpoint(&pair->b, peer(), b_config != nullptr ? *b_config : config));
  int rc = Connect(*pair->a, pair->b->info(), connect);
  ASSERT_EQ(rc, 0) << "connecting " << QpTypeName(config.type) << " QP on " << local().name() << ": " << strerror(rc);
  rc = Connect(*pair->b, pair->a->info(), connect);
  ASSERT_EQ(rc, 0) << "connecting " << QpTypeName(config.type) << " QP on " << peer().name() << ": " << strerror(rc);
  if (config.type == IBV_QPT_UD) {
    CONFORMANCE_SETUP(MakeAh(&pair->a_to_b, local(), pair->b->info(), connect.global));
    CONFORMANCE_SETUP(MakeAh(&pair->b_to_a, peer(), pair->a->info(), connect.global));
  }
}

}  // namespace conformance
