#include "benchmarks/bench/session.h"

namespace rdmalab::bench {
namespace {

ParticipantConfig ConfigOf(const Options& o, bool node_roles) {
  ParticipantConfig config;
  config.program = "rdmalab-bench " + o.mode + (node_roles ? " with --direction alltoall" : "");
  config.ib_dev = o.ib_dev;
  config.ib_port = o.ib_port;
  config.gid_index = o.gid_index;
  config.server_host = o.server_host;
  config.port = o.port;
  config.rendezvous = o.rendezvous;
  config.role = o.role;
  config.index = o.index;
  config.peers = o.peers;
  config.timeout_s = o.timeout_s;
  config.cpus = o.cpus;
  config.node_roles = node_roles;
  config.symmetric = SymmetricConfigJson(o);
  return config;
}

}  // namespace

Session::Session(Options options, bool node_roles)
    : Participant(ConfigOf(options, node_roles)), options_(std::move(options)) {}

}  // namespace rdmalab::bench
