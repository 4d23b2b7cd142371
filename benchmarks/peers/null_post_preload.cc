// LD_PRELOAD shim: the ceiling a verbs benchmark tool (perftest) itself puts on a message
// rate. Every context the program opens keeps its provider for setup (devices, QPs,
// connection), but its post_send and poll_cq become the cheapest a provider could be:
// post_send remembers the wr_id of each signaled WR and returns, poll_cq hands those back
// as successful completions. No data moves. What the tool then reports is its own loop's
// rate: no provider, however fast, can make it report more.
//
// Only for message-rate tools whose correctness does not depend on the data (ib_write_bw,
// ib_read_bw, ib_atomic_bw on the client side, rdmalab-bench tput's WRITE client), and
// whose threads each post on their own QPs and poll their own CQ, as those do: a thread's
// polls return its own posts. Completions come only for WRs marked IBV_SEND_SIGNALED
// (those tools never set sq_sig_all).
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

// Signaled WRs posted and not yet polled, per thread. A tool never has more outstanding than
// its send queue holds, far below this. initial-exec TLS: an access costs what a global's
// does, so the ceiling stays the tool's loop alone.
constexpr uint32_t kMaxOutstanding = 1u << 13;
struct Outstanding {
  uint64_t wr_id[kMaxOutstanding];
  uint64_t posted;
  uint64_t polled;
};
thread_local Outstanding outstanding __attribute__((tls_model("initial-exec")));

int NullPostSend(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  for (; wr != nullptr; wr = wr->next) {
    if ((wr->send_flags & IBV_SEND_SIGNALED) == 0) continue;
    if (outstanding.posted - outstanding.polled == kMaxOutstanding) {
      *bad_wr = wr;
      return ENOMEM;
    }
    outstanding.wr_id[outstanding.posted++ % kMaxOutstanding] = wr->wr_id;
  }
  return 0;
}

int NullPollCq(ibv_cq*, int entries, ibv_wc* wc) {
  int polled = 0;
  for (; polled < entries && outstanding.polled != outstanding.posted; ++polled) {
    wc[polled] = ibv_wc{};
    wc[polled].wr_id = outstanding.wr_id[outstanding.polled++ % kMaxOutstanding];
    wc[polled].status = IBV_WC_SUCCESS;
    wc[polled].opcode = IBV_WC_RDMA_WRITE;
  }
  return polled;
}

using OpenDevice = ibv_context* (*)(ibv_device*);

}  // namespace

extern "C" ibv_context* ibv_open_device(ibv_device* device) {
  static auto real = reinterpret_cast<OpenDevice>(dlvsym(RTLD_NEXT, "ibv_open_device", "IBVERBS_1.1"));
  if (real == nullptr) {
    std::fprintf(stderr, "null_post_preload: no ibv_open_device@IBVERBS_1.1 after this library\n");
    std::abort();
  }
  ibv_context* context = real(device);
  if (context != nullptr) {
    context->ops.post_send = NullPostSend;
    context->ops.poll_cq = NullPollCq;
  }
  return context;
}
