// The one entry point of every prediction, and the edge of the model's scope: a point that
// asks for something the model does not represent is refused with the reason (NotModeled),
// so no figure ever shows a guess dressed as a prediction.
#include "model/params.h"

namespace rdmalab::model {
namespace {

void RequireModeled(const Point& pt) {
  if (pt.stack == "raw")
    throw NotModeled("raw-packet QPs carrying UDP frames: the model covers RDMA transports");
  if (pt.stack != "rdma")
    throw NotModeled("kernel " + std::string(pt.stack == "udp" ? "UDP" : "TCP") +
                     " sockets: the model covers RDMA NICs and PCIe, not the kernel network stack");
  if (pt.events)
    throw NotModeled("completion events (a completion channel, interrupts, wake-ups): the model polls");
  if (pt.all_sizes) throw NotModeled("a size sweep in one run (all): a point has one size; sweep `size` instead");
  if (pt.mode == "kv" && (pt.system == "redis" || pt.system == "memcached"))
    throw NotModeled(pt.system + " over TCP: the kernel TCP stack and the server's event loop are not modeled");
  if (pt.numa != "near")
    throw NotModeled("far NUMA memory: the model has one memory and no inter-socket link");
  if (pt.page_offset_B != 0)
    throw NotModeled("buffer offset within a page: the model does not split DMAs at page or translation "
                     "boundaries");
  if (pt.buffers != 1)
    throw NotModeled("reuse of " + std::to_string(pt.buffers) +
                     " memory blocks: the model has no CPU or NIC cache of buffer contents");
  if (pt.counter_stride_B != 8)
    throw NotModeled("counters " + std::to_string(pt.counter_stride_B) +
                     " bytes apart: the model spreads counters over the lock buckets as 8-byte words");
  if (pt.mode == "kv" && pt.store != "emulated")
    throw NotModeled("store " + pt.store + ": the full stores' checksummed tables and probing are not modeled "
                     "(the emulated designs are)");
  if (pt.corrupt)
    throw NotModeled("corrupted keys (a checksum test): the model predicts runs whose data is intact");
}

}  // namespace

Prediction Predict(const Point& pt, const Profile& prof) {
  RequireModeled(pt);
  return FindMode(pt.mode).predict(pt, prof);
}

}  // namespace rdmalab::model
