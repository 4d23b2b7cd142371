// rdmalab-kv as the program core runs it (rdma/program.h): the system table's entries, and
// the parts of its JSON document (schema kv/schema/rdmalab-kv.schema.json, the same
// environment block as rdmalab-bench's) and table that are its own.
#pragma once

#include "kv/core/systems.h"
#include "rdma/program.h"

namespace rdmalab::kv {

extern const ProgramSpec<Options, Session, System, Report> kProgram;

}  // namespace rdmalab::kv
