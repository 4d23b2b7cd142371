#include "benchmarks/bench/session.h"

namespace rdmalab::bench {
namespace {

ParticipantConfig ConfigOf(const Options& o, bool node_roles) {
  ParticipantConfig config = ParticipantConfigFrom(
      o, "rdmalab-bench " + o.mode + (node_roles ? " with --direction alltoall" : ""), SymmetricConfigJson(o));
  config.node_roles = node_roles;
  return config;
}

}  // namespace

Session::Session(Options options, bool node_roles)
    : Participant(ConfigOf(options, node_roles)), options_(std::move(options)) {}

}  // namespace rdmalab::bench
