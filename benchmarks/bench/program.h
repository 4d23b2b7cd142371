// rdmalab-bench as the program core runs it (rdma/program.h): the mode table's entries, and
// the parts of its JSON document (schema benchmarks/schema/rdmalab-bench.schema.json) and
// table that are its own.
#pragma once

#include "benchmarks/bench/modes.h"
#include "rdma/program.h"

namespace rdmalab::bench {

extern const ProgramSpec<Options, Session, Mode, Report> kProgram;

}  // namespace rdmalab::bench
