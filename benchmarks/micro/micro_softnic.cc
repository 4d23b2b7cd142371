// CPU cost per work request of the verbs data path: ibv_post_send (RC RDMA WRITE,
// 32 B, inline or through an lkey, one signaled WR per kBatchWrs) plus the ibv_poll_cq that retires it,
// on an RC QP connected to a second QP in the same process (device 0 -> device 1,
// or one device in loopback when only one exists); and a SEND+RECV pair (BM_SendRecv, RC
// and UD): the send, the receiver's poll of its completion and its re-post of the RECV.
//
// Links against the system libibverbs; run with LD_LIBRARY_PATH=build/lib/softnic to
// measure softnic (run_micro.sh). One iteration is one batch of kBatchWrs WRs, so the
// cost per WR is the counter sec_per_wr (printed with its unit, e.g. 40.6ns);
// items_per_second is WRs per second.
//
// Environment: RDMALAB_MICRO_DEVICES="devA,devB" picks the devices (default: the first
// two), RDMALAB_MICRO_GID_INDEX the GID index on Ethernet link layers (default 0).

#include <infiniband/verbs.h>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kWrApiBytes = 32;
constexpr uint32_t kBatchWrs = 16;           // exactly one signaled WR per batch
constexpr uint32_t kMaxSignaledInFlight = 4;  // batches outstanding before we wait
constexpr uint32_t kSqDepth = 128;
constexpr uint32_t kCqDepth = 64;
constexpr uint32_t kRqDepth = 32;
constexpr uint32_t kUdQkey = 0x11111111;
constexpr uint32_t kMaxInlineBytes = 256;  // the largest inline payload measured
constexpr size_t kBufBytes = 4096;
static_assert(kSqDepth >= kBatchWrs * kMaxSignaledInFlight,
              "unsignaled slots are freed only when a later signaled WR completes");
static_assert(kCqDepth >= kMaxSignaledInFlight);
static_assert(kMaxInlineBytes <= kBufBytes);

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

std::vector<std::string> wanted_devices() {
  const char* env = std::getenv("RDMALAB_MICRO_DEVICES");
  std::vector<std::string> names;
  if (!env) return names;
  std::string s = env;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) names.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  DeviceList() {
    list = ibv_get_device_list(&count);
    if (!list) fail("ibv_get_device_list", errno);
    if (count == 0) throw std::runtime_error("no RDMA device (is LD_LIBRARY_PATH=build/lib/softnic set?)");
  }
  ~DeviceList() { ibv_free_device_list(list); }
  ibv_device* find(const std::string& name) const {
    for (int i = 0; i < count; ++i)
      if (name == ibv_get_device_name(list[i])) return list[i];
    std::string have;
    for (int i = 0; i < count; ++i) have += std::string(i ? ", " : "") + ibv_get_device_name(list[i]);
    throw std::runtime_error("RDMALAB_MICRO_DEVICES names '" + name + "'; devices present: " + have);
  }
};

enum class Api { kPostSend, kWrEx };

// One side: context, PD, CQ, MR, RC QP on port 1.
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_ex* qpx = nullptr;
  std::unique_ptr<char[]> buf{new char[kBufBytes]()};
  ibv_port_attr port{};
  ibv_gid gid{};
  int gid_index = -1;

  ibv_qp_type type = IBV_QPT_RC;

  Side(ibv_device* dev, Api api, ibv_qp_type qp_type = IBV_QPT_RC) : type(qp_type) {
    ctx = ibv_open_device(dev);
    if (!ctx) fail(std::string("ibv_open_device ") + ibv_get_device_name(dev), errno);
    pd = ibv_alloc_pd(ctx);
    if (!pd) fail("ibv_alloc_pd", errno);
    cq = ibv_create_cq(ctx, kCqDepth, nullptr, nullptr, 0);
    if (!cq) fail("ibv_create_cq", errno);
    mr = ibv_reg_mr(pd, buf.get(), kBufBytes,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) fail("ibv_reg_mr", errno);
    if (int rc = ibv_query_port(ctx, 1, &port)) fail("ibv_query_port", rc);
    if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
      const char* g = std::getenv("RDMALAB_MICRO_GID_INDEX");
      gid_index = g ? std::atoi(g) : 0;
      if (int rc = ibv_query_gid(ctx, 1, gid_index, &gid)) fail("ibv_query_gid", rc);
    }
    create_qp(api);
  }

  void create_qp(Api api) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = type;
    a.sq_sig_all = 0;
    a.cap.max_send_wr = kSqDepth;
    a.cap.max_recv_wr = kRqDepth;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = kMaxInlineBytes;
    a.pd = pd;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    if (api == Api::kWrEx) {
      a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
    }
    qp = ibv_create_qp_ex(ctx, &a);
    if (!qp) fail(api == Api::kWrEx ? "ibv_create_qp_ex (with send_ops_flags)" : "ibv_create_qp_ex", errno);
    if (api == Api::kWrEx) {
      qpx = ibv_qp_to_qp_ex(qp);
      if (!qpx) throw std::runtime_error("ibv_qp_to_qp_ex returned NULL");
    }
  }

  void connect(const Side& peer) {
    if (type == IBV_QPT_UD) return connect_ud();
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail("ibv_modify_qp to INIT", rc);

    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = port.active_mtu;
    a.dest_qp_num = peer.qp->qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    a.ah_attr.dlid = peer.port.lid;
    if (gid_index >= 0) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = peer.gid;
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
      a.ah_attr.grh.hop_limit = 1;
    }
    if (int rc = ibv_modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      fail("ibv_modify_qp to RTR", rc);

    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    if (int rc = ibv_modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      fail("ibv_modify_qp to RTS", rc);
  }

  void connect_ud() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kUdQkey;
    if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
      fail("ibv_modify_qp to INIT (UD)", rc);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE)) fail("ibv_modify_qp to RTR (UD)", rc);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) fail("ibv_modify_qp to RTS (UD)", rc);
  }

  ibv_ah* address_of(const Side& peer) const {
    ibv_ah_attr a{};
    a.port_num = 1;
    a.dlid = peer.port.lid;
    if (gid_index >= 0) {
      a.is_global = 1;
      a.grh.dgid = peer.gid;
      a.grh.sgid_index = static_cast<uint8_t>(gid_index);
      a.grh.hop_limit = 1;
    }
    ibv_ah* ah = ibv_create_ah(pd, &a);
    if (!ah) fail("ibv_create_ah", errno);
    return ah;
  }

  ~Side() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

struct Pair {
  std::unique_ptr<Side> a, b;
  explicit Pair(Api api, ibv_qp_type type = IBV_QPT_RC) {
    DeviceList devs;
    std::vector<std::string> names = wanted_devices();
    ibv_device* da = names.size() > 0 ? devs.find(names[0]) : devs.list[0];
    ibv_device* db = names.size() > 1 ? devs.find(names[1]) : devs.list[devs.count > 1 ? 1 : 0];
    a = std::make_unique<Side>(da, api, type);
    b = std::make_unique<Side>(db, api, type);
    a->connect(*b);
    b->connect(*a);
  }
};

// A connected pair for `api`, or null with the benchmark skipped (no softnic device, say).
std::unique_ptr<Pair> PairOrSkip(benchmark::State& state, Api api) {
  try {
    return std::make_unique<Pair>(api);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

// Waits until at most `keep` signaled WRs are in flight. Returns false on a bad completion.
bool retire(ibv_cq* cq, uint32_t& in_flight, uint32_t keep, benchmark::State& state) {
  ibv_wc wc[kMaxSignaledInFlight];
  while (in_flight > keep) {
    int n = ibv_poll_cq(cq, kMaxSignaledInFlight, wc);
    if (n < 0) {
      state.SkipWithError("ibv_poll_cq returned an error");
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        state.SkipWithError((std::string("completion with status ") + ibv_wc_status_str(wc[i].status)).c_str());
        return false;
      }
    }
    in_flight -= static_cast<uint32_t>(n);
  }
  return true;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatchWrs);
  state.counters["sec_per_wr"] = benchmark::Counter(double(state.iterations()) * kBatchWrs,
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Counts one more signaled batch in flight and retires down to the window. False on a
// bad completion (the benchmark is then skipped with the reason).
bool signaled_batch_posted(ibv_cq* cq, uint32_t& in_flight, benchmark::State& state) {
  ++in_flight;
  return retire(cq, in_flight, kMaxSignaledInFlight - 1, state);
}

// Retires what is still in flight, then reports the per-WR cost.
void drain_and_report(ibv_cq* cq, uint32_t in_flight, benchmark::State& state) {
  retire(cq, in_flight, 0, state);
  report(state);
}

// Each iteration is one batch: kBatchWrs WRITEs of `bytes`, the last signaled;
// linked 0 = one ibv_post_send per WR, 1 = the batch as one linked list (one doorbell);
// inline 1 = the payload inline, 0 = gathered through the MR's lkey (what perftest posts
// on a device it does not know). The bytes sweep shows the cost of the copy.
void BM_PostSendWrite(benchmark::State& state) {
  const bool linked = state.range(0) != 0;
  const auto bytes = static_cast<uint32_t>(state.range(1));
  const bool inline_data = state.range(2) != 0;
  const std::unique_ptr<Pair> pair = PairOrSkip(state, Api::kPostSend);
  if (pair == nullptr) return;
  Side& s = *pair->a;
  ibv_sge sge[kBatchWrs];
  ibv_send_wr wr[kBatchWrs];
  for (uint32_t i = 0; i < kBatchWrs; ++i) {
    sge[i] = {reinterpret_cast<uintptr_t>(s.buf.get()), bytes, s.mr->lkey};
    wr[i] = {};
    wr[i].wr_id = i;
    wr[i].sg_list = &sge[i];
    wr[i].num_sge = 1;
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].send_flags = (inline_data ? IBV_SEND_INLINE : 0) | (i + 1 == kBatchWrs ? IBV_SEND_SIGNALED : 0);
    wr[i].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(pair->b->buf.get());
    wr[i].wr.rdma.rkey = pair->b->mr->rkey;
    wr[i].next = (linked && i + 1 < kBatchWrs) ? &wr[i + 1] : nullptr;
  }
  uint32_t in_flight = 0;
  for (auto _ : state) {
    ibv_send_wr* bad = nullptr;
    int rc = 0;
    if (linked) {
      rc = ibv_post_send(s.qp, &wr[0], &bad);
    } else {
      for (uint32_t i = 0; i < kBatchWrs && rc == 0; ++i) rc = ibv_post_send(s.qp, &wr[i], &bad);
    }
    if (rc != 0) {
      state.SkipWithError((std::string("ibv_post_send: ") + std::strerror(rc)).c_str());
      break;
    }
    if (!signaled_batch_posted(s.cq, in_flight, state)) break;
  }
  drain_and_report(s.cq, in_flight, state);
}
BENCHMARK(BM_PostSendWrite)
    ->ArgNames({"linked", "bytes", "inline"})
    ->Args({0, 32, 1})
    ->Args({0, 32, 0})
    ->Args({0, 8, 0})
    ->Args({1, 32, 1})
    ->Args({1, 8, 1})
    ->Args({1, 64, 1})
    ->Args({1, 128, 1})
    ->Args({1, 256, 1});

// The same batch through the extended API: ibv_wr_start / ibv_wr_rdma_write /
// ibv_wr_set_inline_data / ibv_wr_complete, one start..complete per batch.
void BM_WrApiWrite(benchmark::State& state) {
  const std::unique_ptr<Pair> pair = PairOrSkip(state, Api::kWrEx);
  if (pair == nullptr) return;
  Side& s = *pair->a;
  ibv_qp_ex* qpx = s.qpx;
  const uint64_t raddr = reinterpret_cast<uintptr_t>(pair->b->buf.get());
  const uint32_t rkey = pair->b->mr->rkey;
  uint32_t in_flight = 0;
  for (auto _ : state) {
    ibv_wr_start(qpx);
    for (uint32_t i = 0; i < kBatchWrs; ++i) {
      qpx->wr_id = i;
      qpx->wr_flags = IBV_SEND_INLINE | (i + 1 == kBatchWrs ? IBV_SEND_SIGNALED : 0);
      ibv_wr_rdma_write(qpx, rkey, raddr);
      ibv_wr_set_inline_data(qpx, s.buf.get(), kWrApiBytes);
    }
    if (int rc = ibv_wr_complete(qpx)) {
      state.SkipWithError((std::string("ibv_wr_complete: ") + std::strerror(rc)).c_str());
      break;
    }
    if (!signaled_batch_posted(s.cq, in_flight, state)) break;
  }
  drain_and_report(s.cq, in_flight, state);
}
BENCHMARK(BM_WrApiWrite);

// Each iteration is `recv_batch` SENDs of `bytes` (inline, one signaled per kBatchWrs) from
// A and, on B, one poll of their receive completions and the re-post of those RECVs as one
// list: with a batch of 1, one per call as perftest's ib_send_bw does; with more, as a
// receiver that is behind (rdmalab-bench's) does. The whole cost of a message on both sides,
// which callgrind counts per call. B's buffer holds the UD GRH in front of the payload.
void BM_SendRecv(benchmark::State& state) {
  const ibv_qp_type type = state.range(0) != 0 ? IBV_QPT_UD : IBV_QPT_RC;
  const auto bytes = static_cast<uint32_t>(state.range(1));
  const auto recv_batch = static_cast<uint32_t>(state.range(2));
  constexpr uint32_t kGrhBytes = 40;
  constexpr uint32_t kMaxRecvBatch = 16;
  static_assert(kMaxRecvBatch <= kRqDepth);
  std::unique_ptr<Pair> pair;
  ibv_ah* ah = nullptr;
  try {
    pair = std::make_unique<Pair>(Api::kPostSend, type);
    if (type == IBV_QPT_UD) ah = pair->a->address_of(*pair->b);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  Side& a = *pair->a;
  Side& b = *pair->b;
  const uint32_t recv_bytes = bytes + kGrhBytes;
  ibv_sge recv_sge{reinterpret_cast<uintptr_t>(b.buf.get()), recv_bytes, b.mr->lkey};
  ibv_recv_wr recvs[kMaxRecvBatch];
  for (uint32_t i = 0; i < kMaxRecvBatch; ++i) {
    recvs[i] = {};
    recvs[i].sg_list = &recv_sge;
    recvs[i].num_sge = 1;
    recvs[i].next = i + 1 < recv_batch ? &recvs[i + 1] : nullptr;
  }
  auto post_recvs = [&] {
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(b.qp, &recvs[0], &bad) == 0;
  };
  for (uint32_t i = 0; i < kRqDepth / recv_batch; ++i) {
    if (!post_recvs()) {
      state.SkipWithError("ibv_post_recv failed");
      ibv_destroy_ah(ah);
      return;
    }
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf.get()), bytes, a.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  if (ah != nullptr) {
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = b.qp->qp_num;
    wr.wr.ud.remote_qkey = kUdQkey;
  }
  uint32_t in_flight = 0;
  uint64_t sent = 0;
  ibv_wc wcs[kMaxRecvBatch];
  for (auto _ : state) {
    for (uint32_t i = 0; i < recv_batch; ++i) {
      wr.send_flags = IBV_SEND_INLINE | (++sent % kBatchWrs == 0 ? IBV_SEND_SIGNALED : 0);
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(a.qp, &wr, &bad)) {
        state.SkipWithError((std::string("ibv_post_send: ") + std::strerror(rc)).c_str());
        break;
      }
      if (sent % kBatchWrs == 0 && !signaled_batch_posted(a.cq, in_flight, state)) break;
    }
    if (state.error_occurred()) break;
    bool received = ibv_poll_cq(b.cq, int(recv_batch), wcs) == int(recv_batch);
    for (uint32_t i = 0; i < recv_batch && received; ++i) {
      received = wcs[i].status == IBV_WC_SUCCESS && wcs[i].byte_len == (ah ? recv_bytes : bytes);
    }
    if (!received) {
      state.SkipWithError("the receiver found fewer successful completions of the right length than were sent");
      break;
    }
    if (!post_recvs()) {
      state.SkipWithError("ibv_post_recv failed");
      break;
    }
  }
  retire(a.cq, in_flight, 0, state);
  state.SetItemsProcessed(int64_t(state.iterations() * recv_batch));
  state.counters["sec_per_pair"] = benchmark::Counter(double(state.iterations() * recv_batch),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (ah != nullptr) ibv_destroy_ah(ah);
}
BENCHMARK(BM_SendRecv)
    ->ArgNames({"ud", "bytes", "recv_batch"})
    ->Args({0, 32, 1})
    ->Args({1, 32, 1})
    ->Args({0, 32, 16})
    ->Args({1, 32, 16});

}  // namespace

BENCHMARK_MAIN();
