// Fork support. On a hardware NIC, ibv_fork_init makes registered pages MADV_DONTFORK:
// otherwise, after fork(), copy-on-write gives the parent's next write to a pinned
// buffer a fresh page while the NIC keeps DMA-ing to the old one, and data is silently
// lost. Current kernels instead copy pinned pages into the child at fork time, and
// rdma-core then reports IBV_FORK_UNNEEDED. softnic gives the same semantics: the parent
// keeps its shared-memory anchors (peers still reach them), and a fork handler
// (verbs/memory.cc) gives the child private copies before fork() returns. Nothing to do
// per range.
#include "softnic/abi/private_api.h"

extern "C" int ibv_fork_init(void) { return 0; }

extern "C" enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

extern "C" int ibv_dontfork_range(void*, size_t) { return 0; }

extern "C" int ibv_dofork_range(void*, size_t) { return 0; }
