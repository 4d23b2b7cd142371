// Fork support. On a hardware NIC, ibv_fork_init makes registered pages MADV_DONTFORK:
// otherwise, after fork(), copy-on-write gives the parent's next write to a pinned
// buffer a fresh page while the NIC keeps DMA-ing to the old one, and data is silently
// lost. softnic has neither pinning nor DMA: ibv_reg_mr moves a region's pages into a
// shared-memory object mapped MAP_SHARED, and peers reach it through that object.
// MAP_SHARED pages are never copied on write, so after fork() the parent's addresses
// and every peer's view still name the same memory. Hence IBV_FORK_UNNEEDED, the
// status rdma-core reports for kernels with copy-on-fork for pinned pages, and nothing
// to do per range. (The child shares, rather than loses, the registered pages.)
#include "softnic/abi/private_api.h"

extern "C" int ibv_fork_init(void) { return 0; }

extern "C" enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

extern "C" int ibv_dontfork_range(void*, size_t) { return 0; }

extern "C" int ibv_dofork_range(void*, size_t) { return 0; }
