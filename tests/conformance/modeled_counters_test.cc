// softnic's modeled PCIe/wire counters (`softnic counters --json`, "modeled") equal the
// PCIe/NIC model's per-op accounting (model/wr_accounting.h) times the op counts, for every
// opcode and transport, inline or not, signaled or not, WQE-by-MMIO or doorbell batches.
// The expected values are computed here from the WR shapes the test posts, not from
// anything softnic reports.
#include <map>

#include "model/wr_accounting.h"
#include "softnic_tool.h"

namespace conformance {
namespace {

namespace model = rdmalab::model;

constexpr uint32_t kWrsPerCase = 24;
constexpr uint32_t kShapeSlotsPerBlock = 12;  // softnic's kShapeSlots (fabric/layout.h)
constexpr size_t kBufferBytes = 64 * 1024;
// softnic reports them by the model's names (the names of rdmalab-bench's pcie.modeled).
constexpr const auto& kModeled = model::kModeledCounterFields;

uint64_t ModeledOf(const nlohmann::json& counters, const std::string& device, const std::string& name) {
  for (const nlohmann::json& entry : counters["devices"]) {
    if (entry.value("name", "") != device) continue;
    const nlohmann::json& values = entry["modeled"]["counters"];
    if (values.contains(name) && values[name].is_number_unsigned()) return values[name].get<uint64_t>();
  }
  return 0;
}

// One run: kWrsPerCase WRs of one shape, posted `list_length` at a time, every
// `signal_every`-th signaled.
struct Case {
  std::string name;
  ibv_qp_type type;
  ibv_wr_opcode opcode;
  uint32_t bytes;
  uint32_t sges = 1;
  bool inline_data = false;
  uint32_t signal_every = 1;
  uint32_t list_length = 1;
  bool wr_api = false;  // post through ibv_wr_* (one ibv_wr_complete per list)
};


model::Opcode ModelOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return model::Opcode::kWrite;
    case IBV_WR_RDMA_READ: return model::Opcode::kRead;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return model::Opcode::kCas;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return model::Opcode::kFaa;
    default: return model::Opcode::kSend;
  }
}

bool IsAtomic(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
bool WithImm(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}
bool ConsumesRecv(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

model::WrShape ShapeOf(const Case& c, bool signaled) {
  model::WrShape wr;
  wr.op = ModelOpcode(c.opcode);
  wr.transport = c.type == IBV_QPT_UD ? model::Transport::kUd
                 : c.type == IBV_QPT_UC ? model::Transport::kUc : model::Transport::kRc;
  wr.payload_B = IsAtomic(c.opcode) ? 8 : c.bytes;
  wr.inline_data = c.inline_data;
  wr.signaled = signaled;
  wr.with_imm = WithImm(c.opcode);
  wr.header_only = wr.with_imm && c.bytes == 0;
  wr.sge = c.sges;
  return wr;
}

// A WR as the model accounts it, and whether it ends its post (the doorbell).
struct PostedWr {
  model::WrShape shape;
  bool ends_post;
};

class ModeledCounters : public SoftnicTest {
 protected:
  std::vector<PostedWr> WrsOf(const Case& c) {
    std::vector<PostedWr> wrs;
    for (uint32_t i = 0; i < kWrsPerCase; ++i) {
      wrs.push_back({ShapeOf(c, (i + 1) % c.signal_every == 0), (i + 1) % c.list_length == 0});
    }
    return wrs;
  }

  // The model's accounting of these WRs, per device name (requester on local(), responder
  // on peer(); one entry when they are the same device).
  std::map<std::string, model::ModeledCounters> Expected(const std::vector<PostedWr>& wrs) {
    model::DeviceModel device;
    device.wire.kind = local().roce() ? model::LinkKind::kRoceV2 : model::LinkKind::kIb;
    device.wire.mtu_B = static_cast<uint32_t>(local().active_mtu_bytes());
    model::ModeledCounters requester, responder;
    model::PostAccumulator post;
    for (const PostedWr& posted : wrs) {
      const model::WrShape& wr = posted.shape;
      post.Add(wr, device.wqe);
      model::AccountRequesterWr(device, wr, requester);
      model::AccountResponderWr(device, wr, responder);
      model::AccountWire(device, wr, requester, responder);
      if (posted.ends_post) post.Flush(device, requester);
    }
    std::map<std::string, model::ModeledCounters> expected;
    expected[local().name()] = requester;
    model::ModeledCounters& responder_device = expected[peer().name()];  // the same entry on one device
    for (const auto& [name, field] : kModeled) responder_device.*field += responder.*field;
    return expected;
  }

  void ExpectCountersMoved(const nlohmann::json& before, const nlohmann::json& after,
                           const std::vector<PostedWr>& wrs, const std::string& what) {
    for (const auto& [device, expected] : Expected(wrs)) {
      for (const auto& [name, field] : kModeled) {
        EXPECT_EQ(ModeledOf(after, device, name) - ModeledOf(before, device, name), expected.*field)
            << what << ": " << device << " " << name;
      }
    }
  }

  void PostList(const Case& c, uint32_t first, Buffer& local_buf, Buffer& remote_buf) {
    PostListOn(pair_, c, first, local_buf, remote_buf);
  }

  void PostListOn(Pair& pair, const Case& c, uint32_t first, Buffer& local_buf, Buffer& remote_buf) {
    std::vector<ibv_sge> sges(size_t{c.list_length} * c.sges);
    std::vector<ibv_send_wr> wrs(c.list_length);
    const uint32_t per_sge = c.bytes / c.sges;
    for (uint32_t k = 0; k < c.list_length; ++k) {
      const uint32_t index = first + k;
      for (uint32_t s = 0; s < c.sges; ++s) {
        uint32_t length = IsAtomic(c.opcode) ? 8 : s + 1 == c.sges ? c.bytes - per_sge * s : per_sge;
        sges[size_t{k} * c.sges + s] = Sge(local_buf, size_t{s} * 8192, length);
      }
      ibv_send_wr& wr = wrs[k];
      wr.wr_id = index;
      wr.sg_list = &sges[size_t{k} * c.sges];
      wr.num_sge = static_cast<int>(c.sges);
      wr.opcode = c.opcode;
      wr.send_flags = ((index + 1) % c.signal_every == 0 ? IBV_SEND_SIGNALED : 0) |
                      (c.inline_data ? IBV_SEND_INLINE : 0);
      wr.imm_data = htobe32(index);
      if (IsAtomic(c.opcode)) {
        wr.wr.atomic.remote_addr = remote_buf.addr();
        wr.wr.atomic.rkey = remote_buf.rkey();
        wr.wr.atomic.compare_add = 1;
      } else if (c.type == IBV_QPT_UD) {
        wr.wr.ud.ah = pair.a_to_b.get();
        wr.wr.ud.remote_qpn = pair.b->qp()->qp_num;
        wr.wr.ud.remote_qkey = kQkey;
      } else {
        wr.wr.rdma.remote_addr = remote_buf.addr();
        wr.wr.rdma.rkey = remote_buf.rkey();
      }
      wr.next = k + 1 < c.list_length ? &wrs[k + 1] : nullptr;
    }
    if (!c.wr_api) {
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(pair.a->qp(), wrs.data(), &bad), 0) << c.name << " WR " << first;
      return;
    }
    ibv_qp_ex* ex = ibv_qp_to_qp_ex(pair.a->qp());
    ASSERT_NE(ex, nullptr);
    ibv_wr_start(ex);
    for (const ibv_send_wr& wr : wrs) {
      ex->wr_id = wr.wr_id;
      ex->wr_flags = wr.send_flags;
      ibv_wr_rdma_write(ex, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr);
      ibv_wr_set_sge(ex, wr.sg_list[0].lkey, wr.sg_list[0].addr, wr.sg_list[0].length);
    }
    ASSERT_EQ(ibv_wr_complete(ex), 0) << c.name << " WR " << first;
  }

  void Run(const Case& c) {
    ASSERT_EQ(kWrsPerCase % c.list_length, 0u);
    ASSERT_EQ(kWrsPerCase % c.signal_every, 0u) << "the last WR must be signaled";
    QpConfig config{.type = c.type, .send_wr = kWrsPerCase, .recv_wr = kWrsPerCase, .send_sge = c.sges,
                    .recv_sge = 1, .inline_bytes = c.inline_data ? c.bytes : 0};
    if (c.wr_api) config.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
    QpConfig peer_config{.type = c.type, .send_wr = 4, .recv_wr = kWrsPerCase};
    CONFORMANCE_SETUP(MakePair(&pair_, config, {}, &peer_config));
    Buffer local_buf, remote_buf;
    CONFORMANCE_SETUP(MakeBuffer(&local_buf, local(), kBufferBytes));
    CONFORMANCE_SETUP(MakeBuffer(&remote_buf, peer(), kBufferBytes));
    if (ConsumesRecv(c.opcode)) {
      for (uint32_t i = 0; i < kWrsPerCase; ++i) ASSERT_EQ(PostRecv(pair_.b->qp(), {Sge(remote_buf, 0, kBufferBytes)}, i), 0);
    }
    nlohmann::json before, after;
    CONFORMANCE_SETUP(Counters(&before));
    for (uint32_t first = 0; first < kWrsPerCase; first += c.list_length) {
      ASSERT_NO_FATAL_FAILURE(PostList(c, first, local_buf, remote_buf));
    }
    for (const ibv_wc& wc : PollMany(pair_.a->send_cq(), kWrsPerCase / c.signal_every)) {
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << c.name << ": " << Describe(wc);
    }
    if (ConsumesRecv(c.opcode)) {
      ASSERT_EQ(PollMany(pair_.b->recv_cq(), kWrsPerCase).size(), size_t{kWrsPerCase}) << c.name;
    }
    CONFORMANCE_SETUP(Counters(&after));
    ExpectCountersMoved(before, after, WrsOf(c), c.name);
  }

  Pair pair_;
};

TEST_P(ModeledCounters, EqualTheModelsPerOpAccountingTimesTheOpCount) {
  const std::vector<Case> cases = {
      {"rc-write-inline-32B-signaled", IBV_QPT_RC, IBV_WR_RDMA_WRITE, 32, 1, true},
      {"rc-write-10000B-3sge-list4", IBV_QPT_RC, IBV_WR_RDMA_WRITE, 10000, 3, false, 4, 4},
      {"uc-write-64B-signal-every-8", IBV_QPT_UC, IBV_WR_RDMA_WRITE, 64, 1, false, 8},
      {"rc-write-imm-16B", IBV_QPT_RC, IBV_WR_RDMA_WRITE_WITH_IMM, 16},
      {"rc-read-100B-list3", IBV_QPT_RC, IBV_WR_RDMA_READ, 100, 1, false, 3, 3},
      {"rc-fetch-add", IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD, 8},
      {"rc-cmp-swap-list2", IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP, 8, 1, false, 2, 2},
      {"rc-send-200B-2sge", IBV_QPT_RC, IBV_WR_SEND, 200, 2},
      {"rc-send-header-only", IBV_QPT_RC, IBV_WR_SEND_WITH_IMM, 0},
      {"ud-send-inline-60B-list4", IBV_QPT_UD, IBV_WR_SEND, 60, 1, true, 4, 4},
      {"rc-write-wr-api-batch3", IBV_QPT_RC, IBV_WR_RDMA_WRITE, 64, 1, false, 3, 3, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_NO_FATAL_FAILURE(Run(c));
    pair_ = Pair{};
  }
}

// A QP's fast path keeps the counter slots of its last shape. Another QP of the same thread
// posting more shapes than a block has slots folds them and gives them other keys; the
// first QP's next WRs must count in their own shape again, not in a slot now another's.
TEST_P(ModeledCounters, StayExactWhenAnotherQpsShapesTakeTheSlotsAQpCounted) {
  const Case steady{"rc-write-inline-32B", IBV_QPT_RC, IBV_WR_RDMA_WRITE, 32, 1, true};
  constexpr uint32_t kSteadyWrs = 8;
  constexpr uint32_t kOtherShapes = 2 * kShapeSlotsPerBlock;
  QpConfig steady_config{.type = IBV_QPT_RC, .send_wr = kWrsPerCase, .recv_wr = 1, .inline_bytes = 32};
  QpConfig other_config{.type = IBV_QPT_RC, .send_wr = kWrsPerCase, .recv_wr = 1};
  Pair other;
  CONFORMANCE_SETUP(MakePair(&pair_, steady_config));
  CONFORMANCE_SETUP(MakePair(&other, other_config));
  Buffer local_buf, remote_buf;
  CONFORMANCE_SETUP(MakeBuffer(&local_buf, local(), kBufferBytes));
  CONFORMANCE_SETUP(MakeBuffer(&remote_buf, peer(), kBufferBytes));
  std::vector<PostedWr> posted;
  auto post_steady = [&] {
    for (uint32_t i = 0; i < kSteadyWrs; ++i) {
      ASSERT_NO_FATAL_FAILURE(PostList(steady, i, local_buf, remote_buf));
      posted.push_back({ShapeOf(steady, true), true});
    }
    ASSERT_EQ(PollMany(pair_.a->send_cq(), kSteadyWrs).size(), size_t{kSteadyWrs});
  };
  nlohmann::json before, after;
  CONFORMANCE_SETUP(Counters(&before));
  ASSERT_NO_FATAL_FAILURE(post_steady());
  for (uint32_t k = 0; k < kOtherShapes; ++k) {
    const Case shape{"rc-write-" + std::to_string(100 + k) + "B", IBV_QPT_RC, IBV_WR_RDMA_WRITE, 100 + k};
    ASSERT_NO_FATAL_FAILURE(PostListOn(other, shape, 0, local_buf, remote_buf));
    posted.push_back({ShapeOf(shape, true), true});
    ASSERT_EQ(PollMany(other.a->send_cq(), 1).size(), 1u) << shape.name;
  }
  ASSERT_NO_FATAL_FAILURE(post_steady());
  CONFORMANCE_SETUP(Counters(&after));
  ExpectCountersMoved(before, after, posted, "steady shape around " + std::to_string(kOtherShapes) + " others");
}

TEST_P(ModeledCounters, AreReportedWithTheDeviceTheyModel) {
  nlohmann::json doc;
  CONFORMANCE_SETUP(Counters(&doc));
  for (const nlohmann::json& device : doc["devices"]) {
    ASSERT_TRUE(device.contains("modeled")) << device.value("name", "?");
    EXPECT_NE(device["modeled"].value("device_model", "").find("Connect-IB"), std::string::npos);
    for (const auto& [name, field] : kModeled) {
      EXPECT_TRUE(device["modeled"]["counters"].contains(name)) << device.value("name", "?") << " lacks " << name;
    }
  }
}

CONFORMANCE_INSTANTIATE(ModeledCounters);

}  // namespace
}  // namespace conformance
