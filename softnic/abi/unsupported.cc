// Public verbs softnic does not implement. Each fails when called, the way rdma-core
// fails them on a provider without the feature, so that programs take their
// "not supported" branch: librdmacm, for one, calls ibv_query_ece/ibv_set_ece on every
// connection and goes on when they return EOPNOTSUPP.
#include <infiniband/verbs.h>

#include <cerrno>

// Import needs a kernel command FD shared between processes; softnic has none (its
// objects are shared through the fabric instead).
extern "C" struct ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;
  return nullptr;
}

extern "C" struct ibv_pd* ibv_import_pd(struct ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}

extern "C" struct ibv_mr* ibv_import_mr(struct ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}

extern "C" struct ibv_dm* ibv_import_dm(struct ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}

// Nothing was ever imported, so there is nothing to release.
extern "C" void ibv_unimport_pd(struct ibv_pd*) {}

extern "C" void ibv_unimport_mr(struct ibv_mr*) {}

extern "C" void ibv_unimport_dm(struct ibv_dm*) {}

// Enhanced Connection Establishment is a vendor option negotiation; softnic has no
// options to offer. Positive errno return, as rdma-core's dummy provider ops.
extern "C" int ibv_query_ece(struct ibv_qp*, struct ibv_ece*) {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

extern "C" int ibv_set_ece(struct ibv_qp*, struct ibv_ece*) {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

// A dma-buf names device memory (e.g. a GPU's); softnic registers only CPU memory.
extern "C" struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}

// RoCE address resolution through the kernel's neighbour table: softnic's RoCE-style
// link layer has no Ethernet underneath, so there is no MAC to resolve.
extern "C" int ibv_resolve_eth_l2_from_gid(struct ibv_context*, struct ibv_ah_attr*,
                                           uint8_t[ETHERNET_LL_SIZE], uint16_t*) {
  return EOPNOTSUPP;
}
