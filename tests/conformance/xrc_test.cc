// XRC: an XRC send QP on one device connects to an XRC receive QP on its peer; each WR names
// the SRQ there (ibv_get_srq_num) that takes a SEND's RECV and completes it in its own CQ.
// The rules a NIC enforces: the SRQ number must name an SRQ of the receive QP's XRC domain
// (another domain's SRQ, or a number naming no SRQ, is a NAK the requester sees as
// IBV_WC_REM_INV_REQ_ERR, and its QP goes to ERR); RDMA keys are checked against the SRQ's
// PD; the responder QP's access flags gate RDMA as on RC; a SEND with no RECV in the SRQ
// waits (RNR). Domains opened through one file are one domain (the kernel keys them by
// inode): O_EXCL on an existing one and no O_CREAT on a missing one fail. A domain in use
// cannot be closed. XRC QPs have no receive queue of their own.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr uint32_t kSrqDepth = 16;
constexpr size_t kSlotBytes = 256;
constexpr size_t kMessageBytes = 64;
constexpr uint64_t kAddend = 5;

using XrcdPtr = std::unique_ptr<ibv_xrcd, Destroyer<ibv_xrcd, ibv_close_xrcd>>;

// A file whose inode names XRC domains; removed with the test.
class DomainFile {
 public:
  DomainFile() {
    char path[] = "/tmp/rdmalab-xrcd-XXXXXX";
    fd_ = mkstemp(path);
    path_ = path;
  }
  ~DomainFile() {
    if (fd_ >= 0) {
      close(fd_);
      unlink(path_.c_str());
    }
  }
  int fd() const { return fd_; }
  // Another descriptor of the same file (a second opener).
  int Reopen() const { return open(path_.c_str(), O_RDONLY); }

 private:
  int fd_ = -1;
  std::string path_;
};

ibv_xrcd* OpenXrcd(ibv_context* ctx, int fd, int oflags) {
  ibv_xrcd_init_attr attr{};
  attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  attr.fd = fd;
  attr.oflags = oflags;
  return ibv_open_xrcd(ctx, &attr);
}

// An XRC SRQ of `xrcd` completing in `cq`, its RECVs in the PD `pd`.
ibv_srq* CreateXrcSrq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex attr{};
  attr.attr.max_wr = kSrqDepth;
  attr.attr.max_sge = 1;
  attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  attr.srq_type = IBV_SRQT_XRC;
  attr.pd = pd;
  attr.xrcd = xrcd;
  attr.cq = cq;
  return ibv_create_srq_ex(ctx, &attr);
}

uint32_t SrqNumber(ibv_srq* srq) {
  uint32_t number = 0;
  EXPECT_EQ(ibv_get_srq_num(srq, &number), 0);
  return number;
}

// One side's receive resources in one domain: the SRQ, its CQ, its RECV buffers.
struct Receiver {
  CqPtr cq;
  SrqPtr srq;
  uint32_t srqn = 0;
};

class Xrc : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_GE(file_.fd(), 0) << "mkstemp: " << strerror(errno);
    xrcd_.reset(OpenXrcd(peer().ctx(), file_.fd(), O_CREAT));
    if (!xrcd_ && IsUnsupported(errno)) GTEST_SKIP() << "ibv_open_xrcd: " << strerror(errno);
    ASSERT_TRUE(xrcd_ != nullptr) << "ibv_open_xrcd: " << strerror(errno);
    ASSERT_NO_FATAL_FAILURE(MakeReceiver(&first_, xrcd_.get()));
    ASSERT_NO_FATAL_FAILURE(MakeBuffer(&send_buf_, local(), 4096));
    ASSERT_NO_FATAL_FAILURE(MakeBuffer(&recv_buf_, peer(), kSrqDepth * kSlotBytes));
    ASSERT_NO_FATAL_FAILURE(Connect(kAllRemoteAccess));
  }

  void MakeReceiver(Receiver* out, ibv_xrcd* xrcd) {
    out->cq.reset(ibv_create_cq(peer().ctx(), 64, nullptr, nullptr, 0));
    ASSERT_TRUE(out->cq != nullptr) << strerror(errno);
    out->srq.reset(CreateXrcSrq(peer().ctx(), peer().pd(), xrcd, out->cq.get()));
    ASSERT_TRUE(out->srq != nullptr) << "ibv_create_srq_ex(IBV_SRQT_XRC): " << strerror(errno);
    out->srqn = SrqNumber(out->srq.get());
  }

  // A send QP on the local device connected to a receive QP of the first domain whose
  // access flags are `access`; the send QP's masks are perftest's (the kernel drops the
  // responder attributes an XRC send QP has no use for).
  void Connect(unsigned access) {
    send_qp_.reset();
    recv_qp_.reset();
    send_cq_.reset(ibv_create_cq(local().ctx(), 64, nullptr, nullptr, 0));
    ASSERT_TRUE(send_cq_ != nullptr);
    ibv_qp_init_attr_ex init{};
    init.qp_type = IBV_QPT_XRC_RECV;
    init.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    init.xrcd = xrcd_.get();
    recv_qp_.reset(ibv_create_qp_ex(peer().ctx(), &init));
    ASSERT_TRUE(recv_qp_ != nullptr) << "ibv_create_qp_ex(IBV_QPT_XRC_RECV): " << strerror(errno);
    init = ibv_qp_init_attr_ex{};
    init.qp_type = IBV_QPT_XRC_SEND;
    init.comp_mask = IBV_QP_INIT_ATTR_PD;
    init.pd = local().pd();
    init.send_cq = send_cq_.get();
    init.cap.max_send_wr = 32;
    init.cap.max_send_sge = 1;
    send_qp_.reset(ibv_create_qp_ex(local().ctx(), &init));
    ASSERT_TRUE(send_qp_ != nullptr) << "ibv_create_qp_ex(IBV_QPT_XRC_SEND): " << strerror(errno);
    ASSERT_NO_FATAL_FAILURE(ToRts(recv_qp_.get(), peer(), local(), send_qp_->qp_num, access));
    ASSERT_NO_FATAL_FAILURE(ToRts(send_qp_.get(), local(), peer(), recv_qp_->qp_num, 0));
  }

  void ToRts(ibv_qp* qp, Device& here, Device& there, uint32_t remote_qpn, unsigned access) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = here.port_num();
    attr.qp_access_flags = access;
    ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
    QpInfo remote;
    remote.qpn = remote_qpn;
    remote.lid = there.port().lid;
    remote.mtu = static_cast<uint8_t>(there.port().active_mtu);
    remote.roce = there.roce() ? 1 : 0;
    remote.gid = there.gid();
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = std::min(here.port().active_mtu, there.port().active_mtu);
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = kStartPsn;
    attr.ah_attr = AhAttr(here, remote, false);
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 1;  // 0.01 ms
    ASSERT_EQ(ibv_modify_qp(qp, &attr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = kStartPsn;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;  // forever
    attr.max_rd_atomic = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &attr,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              0);
  }

  int Post(ibv_wr_opcode opcode, uint32_t srqn, uint64_t wr_id, ibv_sge sge, uint64_t remote_addr = 0,
           uint32_t rkey = 0) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.qp_type.xrc.remote_srqn = srqn;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = remote_addr;
      wr.wr.atomic.rkey = rkey;
      wr.wr.atomic.compare_add = kAddend;
    } else {
      wr.wr.rdma.remote_addr = remote_addr;
      wr.wr.rdma.rkey = rkey;
    }
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(send_qp_.get(), &wr, &bad);
  }

  void SendAndExpect(uint32_t srqn, uint8_t tag, ibv_wc_status status) {
    std::memset(send_buf_.data(), tag, kMessageBytes);
    ASSERT_EQ(Post(IBV_WR_SEND, srqn, tag, Sge(send_buf_, 0, kMessageBytes)), 0);
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), status, &wc));
    EXPECT_EQ(wc.wr_id, tag);
  }

  void PostSlot(const Receiver& receiver, uint32_t slot) {
    ASSERT_EQ(PostSrqRecv(receiver.srq.get(), {Sge(recv_buf_, slot * kSlotBytes, kSlotBytes)}, 100 + slot), 0);
  }

  DomainFile file_;
  XrcdPtr xrcd_;           // closed after everything in it (declared before)
  Buffer send_buf_, recv_buf_;
  Receiver first_;
  CqPtr send_cq_;
  QpPtr recv_qp_, send_qp_;  // destroyed first
};

TEST_P(Xrc, SendGoesToTheSrqItNames) {
  Receiver second;
  CONFORMANCE_SETUP(MakeReceiver(&second, xrcd_.get()));
  ASSERT_NE(first_.srqn, second.srqn);
  CONFORMANCE_SETUP(PostSlot(first_, 0));
  CONFORMANCE_SETUP(PostSlot(second, 1));
  ASSERT_NO_FATAL_FAILURE(SendAndExpect(second.srqn, 0x22, IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(SendAndExpect(first_.srqn, 0x11, IBV_WC_SUCCESS));
  for (auto [receiver, slot, tag] : {std::tuple{&first_, 0u, 0x11}, std::tuple{&second, 1u, 0x22}}) {
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectCompletion(receiver->cq.get(), IBV_WC_SUCCESS, &wc));
    EXPECT_EQ(wc.wr_id, 100 + slot) << "the RECV of the SRQ the WR named";
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.byte_len, kMessageBytes);
    EXPECT_EQ(wc.qp_num, recv_qp_->qp_num) << "qp_num names the XRC receive QP the message came to";
    EXPECT_EQ(recv_buf_.data()[slot * kSlotBytes], tag);
    EXPECT_EQ(recv_buf_.data()[slot * kSlotBytes + kMessageBytes - 1], tag);
    EXPECT_TRUE(StaysEmpty(receiver->cq.get(), std::chrono::milliseconds(20)));
  }
}

TEST_P(Xrc, SrqOfAnotherDomainIsRefused) {
  DomainFile other_file;
  XrcdPtr other(OpenXrcd(peer().ctx(), other_file.fd(), O_CREAT));
  ASSERT_TRUE(other != nullptr) << strerror(errno);
  Receiver foreign;
  CONFORMANCE_SETUP(MakeReceiver(&foreign, other.get()));
  CONFORMANCE_SETUP(PostSlot(foreign, 0));
  ASSERT_NO_FATAL_FAILURE(SendAndExpect(foreign.srqn, 0x33, IBV_WC_REM_INV_REQ_ERR));
  EXPECT_EQ(QueryState(send_qp_.get()), IBV_QPS_ERR) << "a NAK ends the send QP, as on RC";
  EXPECT_TRUE(StaysEmpty(foreign.cq.get())) << "the other domain's SRQ took nothing";
  EXPECT_EQ(recv_buf_.data()[0], 0) << "no byte landed";
}

TEST_P(Xrc, SrqNumberNamingNoSrqIsRefused) {
  Receiver gone;
  CONFORMANCE_SETUP(MakeReceiver(&gone, xrcd_.get()));
  const uint32_t stale = gone.srqn;
  gone.srq.reset();
  ASSERT_NO_FATAL_FAILURE(SendAndExpect(stale, 0x44, IBV_WC_REM_INV_REQ_ERR));
  EXPECT_EQ(QueryState(send_qp_.get()), IBV_QPS_ERR);
}

TEST_P(Xrc, SendWaitsForARecvInTheSrq) {
  std::memset(send_buf_.data(), 0x55, kMessageBytes);
  ASSERT_EQ(Post(IBV_WR_SEND, first_.srqn, 1, Sge(send_buf_, 0, kMessageBytes)), 0);
  EXPECT_TRUE(StaysEmpty(send_cq_.get(), std::chrono::milliseconds(50))) << "completed with no RECV posted";
  CONFORMANCE_SETUP(PostSlot(first_, 0));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(first_.cq.get(), IBV_WC_SUCCESS));
  EXPECT_EQ(recv_buf_.data()[0], 0x55);
}

// WRITE, READ and FETCH_AND_ADD through the receive QP, keys checked against the PD of
// the SRQ the WR names.
TEST_P(Xrc, RdmaKeysBelongToTheSrqsPd) {
  Buffer target;
  CONFORMANCE_SETUP(MakeBuffer(&target, peer(), 4096));
  std::memset(send_buf_.data(), 0x66, kMessageBytes);
  ASSERT_EQ(Post(IBV_WR_RDMA_WRITE, first_.srqn, 1, Sge(send_buf_, 0, kMessageBytes), target.addr(), target.rkey()), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), IBV_WC_SUCCESS));
  EXPECT_EQ(target.data()[kMessageBytes - 1], 0x66);
  target.data()[128] = 0x77;
  ASSERT_EQ(Post(IBV_WR_RDMA_READ, first_.srqn, 2, Sge(send_buf_, 256, 1), target.addr() + 128, target.rkey()), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), IBV_WC_SUCCESS));
  EXPECT_EQ(send_buf_.data()[256], 0x77);
  ASSERT_EQ(Post(IBV_WR_ATOMIC_FETCH_AND_ADD, first_.srqn, 3, Sge(send_buf_, 512, 8), target.addr() + 1024,
                 target.rkey()),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), IBV_WC_SUCCESS));
  uint64_t sum = 0;
  std::memcpy(&sum, target.data() + 1024, sizeof(sum));
  EXPECT_EQ(sum, kAddend);
  EXPECT_TRUE(StaysEmpty(first_.cq.get(), std::chrono::milliseconds(20))) << "RDMA takes no RECV";

  // The same region registered on another PD of the peer: the SRQ's PD does not hold it.
  PdPtr other_pd(ibv_alloc_pd(peer().ctx()));
  ASSERT_TRUE(other_pd != nullptr);
  MrPtr foreign(ibv_reg_mr(other_pd.get(), target.data(), 4096, kAllRemoteAccess));
  ASSERT_TRUE(foreign != nullptr) << strerror(errno);
  ASSERT_EQ(Post(IBV_WR_RDMA_WRITE, first_.srqn, 4, Sge(send_buf_, 0, kMessageBytes), target.addr(), foreign->rkey),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(send_cq_.get(), IBV_WC_REM_ACCESS_ERR));
  EXPECT_EQ(QueryState(send_qp_.get()), IBV_QPS_ERR);
}

TEST_P(Xrc, ReceiveQpAccessFlagsGateRdma) {
  CONFORMANCE_SETUP(Connect(IBV_ACCESS_REMOTE_READ));
  Buffer target;
  CONFORMANCE_SETUP(MakeBuffer(&target, peer(), 4096));
  ASSERT_EQ(Post(IBV_WR_RDMA_WRITE, first_.srqn, 1, Sge(send_buf_, 0, kMessageBytes), target.addr(), target.rkey()), 0);
  std::optional<ibv_wc> wc = PollOne(send_cq_.get());
  ASSERT_TRUE(wc.has_value()) << "no completion for a WRITE the receive QP does not enable";
  if (local().softnic()) {
    EXPECT_WC_STATUS(*wc, IBV_WC_REM_INV_REQ_ERR);
  } else {
    EXPECT_TRUE(wc->status == IBV_WC_REM_INV_REQ_ERR || wc->status == IBV_WC_REM_ACCESS_ERR)
        << "got " << ibv_wc_status_str(wc->status);
  }
  EXPECT_EQ(target.data()[0], 0) << "no byte landed";
}

TEST_P(Xrc, DomainIsSharedThroughItsFile) {
  const int second_fd = file_.Reopen();
  ASSERT_GE(second_fd, 0) << strerror(errno);
  XrcdPtr again(OpenXrcd(peer().ctx(), second_fd, 0));
  close(second_fd);  // the domain outlives the descriptor it was opened through
  ASSERT_TRUE(again != nullptr) << "opening an existing domain needs no O_CREAT: " << strerror(errno);
  // An SRQ created through the second open is in the receive QP's domain.
  Receiver shared;
  CONFORMANCE_SETUP(MakeReceiver(&shared, again.get()));
  CONFORMANCE_SETUP(PostSlot(shared, 0));
  ASSERT_NO_FATAL_FAILURE(SendAndExpect(shared.srqn, 0x88, IBV_WC_SUCCESS));
  ASSERT_NO_FATAL_FAILURE(ExpectCompletion(shared.cq.get(), IBV_WC_SUCCESS));

  errno = 0;
  EXPECT_EQ(OpenXrcd(peer().ctx(), file_.fd(), O_CREAT | O_EXCL), nullptr) << "O_EXCL on an existing domain";
  EXPECT_EQ(errno, EINVAL);
  DomainFile fresh;
  errno = 0;
  EXPECT_EQ(OpenXrcd(peer().ctx(), fresh.fd(), 0), nullptr) << "no O_CREAT and no domain on the file";
  EXPECT_EQ(errno, EAGAIN);
}

TEST_P(Xrc, DomainInUseCannotBeClosed) {
  EXPECT_EQ(ibv_close_xrcd(xrcd_.get()), EBUSY) << "its SRQ and receive QP are still there";
  recv_qp_.reset();
  first_.srq.reset();
  EXPECT_EQ(ibv_close_xrcd(xrcd_.release()), 0);
}

TEST_P(Xrc, QpsHaveNoReceiveQueueOfTheirOwn) {
  EXPECT_NE(PostRecv(recv_qp_.get(), {Sge(recv_buf_, 0, kSlotBytes)}, 1), 0) << "XRC receive QP";
  EXPECT_NE(PostRecv(send_qp_.get(), {Sge(send_buf_, 0, kSlotBytes)}, 1), 0) << "XRC send QP";
  ibv_sge sge = Sge(recv_buf_, 0, kMessageBytes);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.qp_type.xrc.remote_srqn = first_.srqn;
  ibv_send_wr* bad = nullptr;
  EXPECT_NE(ibv_post_send(recv_qp_.get(), &wr, &bad), 0) << "an XRC receive QP has no send queue";
}

CONFORMANCE_INSTANTIATE(Xrc);

}  // namespace
}  // namespace conformance
