// rdmalab-kv's participant (rdma/session.h) with the options it was started with.
#pragma once

#include "kv/core/options.h"
#include "rdma/program.h"

namespace rdmalab::kv {

using Session = ProgramSession<Options>;

}  // namespace rdmalab::kv
