// The one entry point of every prediction, and the edge of the model's scope: a point that
// asks for something the model does not represent is refused with the reason (NotModeled),
// so no figure ever shows a guess dressed as a prediction.
#include "model/analytic.h"

namespace rdmalab::model {
namespace {

void RequireModeled(const Point& pt) {
  if (pt.stack != "rdma")
    throw NotModeled("kernel " + std::string(pt.stack == "udp" ? "UDP" : "TCP") +
                     " sockets: the model covers RDMA NICs and PCIe, not the kernel network stack");
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
}

}  // namespace

Prediction Predict(const Point& pt, const Profile& prof) {
  RequireModeled(pt);
  if (pt.mode == "pcie")
    throw ModelError("mode pcie evaluates a formula (bytes), not a rate: use `predict`, which prints its value");
  if (pt.mode == "sequencer") return PredictSequencer(pt, prof);
  if (pt.mode == "kv") return PredictKv(pt, prof);
  return PredictVerb(pt, prof);
}

}  // namespace rdmalab::model
