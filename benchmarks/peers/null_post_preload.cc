// LD_PRELOAD shim: the ceiling a verbs benchmark tool (perftest) itself puts on a message
// rate. Every context the program opens keeps its provider for setup (devices, QPs,
// connection), but its post_send and poll_cq become the cheapest a provider could be:
// post_send remembers the wr_id of each signaled WR and returns, poll_cq hands those back
// as successful completions. No data moves. What the tool then reports is its own loop's
// rate: no provider, however fast, can make it report more.
//
// Only for message-rate tools whose correctness does not depend on the data (ib_write_bw,
// ib_read_bw, ib_atomic_bw on the client side). Single-threaded, like those tools, and
// completions come only for WRs marked IBV_SEND_SIGNALED (those tools never set sq_sig_all).
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

// Signaled WRs posted and not yet polled. A tool never has more outstanding than its send
// queue holds, far below this.
constexpr uint32_t kMaxOutstanding = 1u << 16;
uint64_t outstanding_wr_id[kMaxOutstanding];
uint64_t posted_count = 0;
uint64_t polled_count = 0;

int NullPostSend(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  for (; wr != nullptr; wr = wr->next) {
    if ((wr->send_flags & IBV_SEND_SIGNALED) == 0) continue;
    if (posted_count - polled_count == kMaxOutstanding) {
      *bad_wr = wr;
      return ENOMEM;
    }
    outstanding_wr_id[posted_count++ % kMaxOutstanding] = wr->wr_id;
  }
  return 0;
}

int NullPollCq(ibv_cq*, int entries, ibv_wc* wc) {
  int polled = 0;
  for (; polled < entries && polled_count != posted_count; ++polled) {
    wc[polled] = ibv_wc{};
    wc[polled].wr_id = outstanding_wr_id[polled_count++ % kMaxOutstanding];
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
