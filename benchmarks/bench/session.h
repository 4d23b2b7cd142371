// rdmalab-bench's participant (rdma/session.h) with the options it was started with.
#pragma once

#include "benchmarks/bench/options.h"
#include "rdma/session.h"

namespace rdmalab::bench {

class Session : public Participant {
 public:
  // `node_roles`: the mode has only peers of one role ("node").
  Session(Options options, bool node_roles);
  const Options& options() const { return options_; }

 private:
  Options options_;
};

}  // namespace rdmalab::bench
