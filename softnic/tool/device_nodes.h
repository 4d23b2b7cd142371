// `softnic run --device-nodes`: the program sees /dev/infiniband/uverbsN for each softnic
// device, in a mount namespace of its own. Programs that check for the kernel's uverbs
// character device before using a verbs device (UCX's uct_ib: stat() must show a character
// device it may read and write) then accept softnic's. Nothing opens the nodes (softnic's
// libibverbs never does): each is the host's /dev/null bound there, since a user namespace
// may not make device nodes.
#pragma once

#include <cstdint>
#include <string>

#include "softnic/tool/private_view.h"

namespace softnic {

// Shows /dev as the real /dev plus infiniband/uverbs0..device_count-1 in `view`; the mounts
// under /dev (shm, pts, ...) stay visible. False with `error` set on failure.
bool ShowUverbsDeviceNodes(PrivateView& view, uint32_t device_count, std::string* error);

}  // namespace softnic
