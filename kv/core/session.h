// rdmalab-kv's participant (rdma/session.h) with the options it was started with.
#pragma once

#include "kv/core/options.h"
#include "rdma/session.h"

namespace rdmalab::kv {

class Session : public Participant {
 public:
  explicit Session(Options options) : Participant(ParticipantConfigOf(options)), options_(std::move(options)) {}
  const Options& options() const { return options_; }

 private:
  Options options_;
};

}  // namespace rdmalab::kv
