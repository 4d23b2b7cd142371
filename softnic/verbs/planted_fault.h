// A performance fault planted in a narrow region of the workload, named by the environment
// variable SOFTNIC_PLANTED_FAULT, for testing anomaly search (`./run_all.py explore`) and for
// teaching: every work request of the region costs its poster `delay_ns` more, as a NIC
// with a slow path for that shape would. Nothing else changes: the WR is then posted as
// usual, completes as usual and is counted as usual.
//
//   SOFTNIC_PLANTED_FAULT='verb=send|send_imm,transport=UD,size=1024-4096,delay_ns=5000'
//
// keys (each but delay_ns optional; absent: any): verb (read, write, write_imm, send,
// send_imm, cas, faa; `|` between several), transport (RC, UC, UD), size (the WR's
// payload bytes, LO-HI inclusive or one value), post_list (WRs in the ibv_post_send
// call, LO-HI or one value), delay_ns (1 to 10^9, added per WR of the region).
//
// Free when unset: the variable is read once, at the first ibv_open_device, and only when
// it is set does a context get a post_send of its own (PlantedPostSend) that looks at the
// WRs before the provider's; otherwise the context's post_send is the provider's, and a
// post runs exactly the instructions it runs without this file. ibv_wr_* posts
// (wr_complete) are not planted.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace softnic {

// After InstallSendOps: when SOFTNIC_PLANTED_FAULT is set, routes `ops`'s post_send through
// the planted fault. False, with what is wrong and what would be valid in `error`, when it
// does not parse (the device does not open then).
bool InstallPlantedFault(ibv_context_ops* ops, std::string* error);

}  // namespace softnic
