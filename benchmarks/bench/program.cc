#include "benchmarks/bench/program.h"

#include <cstdio>

#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

// The mode a run uses, with every check of the options made before a resource is touched.
const Mode& Resolve(Options& options) {
  FindMode(options.mode);  // an unknown mode fails first, whatever the stack
  const Mode& mode = ModeFor(options);
  if (options.events && (options.mode != "lat" || options.stack != "rdma")) {
    Fail("-e/--events applies to lat over RDMA only (mode ", options.mode, ", --stack ", options.stack,
         "): other modes and the socket stacks always poll");
  }
  if (options.rdma_cm && options.stack != "rdma") {
    Fail("-R/--rdma_cm connects QPs: it applies to --stack rdma only (not ", options.stack, ")");
  }
  if (options.rdma_cm && options.connection == "UD") {
    Fail("-R/--rdma_cm with -c UD: -R connects RC and UC QPs (UD needs no connection)");
  }
  if (options.distribution != "none" && (options.mode != "tput" || options.stack != "rdma")) {
    Fail("--distribution ", options.distribution, " applies to mode tput over RDMA (--verb read), not mode ",
         options.mode, " --stack ", options.stack);
  }
  mode.check(options);
  return mode;
}

JoinSpec Join(const Options& options, const Mode& mode) {
  const bool node_roles = mode.node_roles(options);
  return {"rdmalab-bench " + options.mode + (node_roles ? " with --direction alltoall" : ""), node_roles,
          SymmetricConfigJson(BenchCommandLine(), options)};
}

Report Run(const Mode& mode, Session& session) { return mode.run(session); }

nlohmann::json Fields(const Session& session, const Report& report) {
  return {{"mode", session.options().mode},
          {"config", ConfigJson(BenchCommandLine(), session.options())},
          {"pcie", {{"modeled", report.pcie_modeled}, {"measured", nullptr}}}};
}

std::string Heading(const Session& session) {
  const Options& o = session.options();
  const std::string what = o.mode == "echo"        ? o.request + " " + o.connection + " / " + o.response + " " +
                                                      o.response_connection
                           : o.mode == "sequencer" ? o.design
                           : o.mode == "sgbatch"   ? std::to_string(o.sge) + " packets per SEND " + o.connection
                                                   : o.verb + " " + o.connection;
  char line[256];
  std::snprintf(line, sizeof(line), "# rdmalab-bench %s  %s/%d  device %s  %s\n", o.mode.c_str(),
                session.role().c_str(), session.index(), session.device().name().c_str(), what.c_str());
  return line;
}

std::string PeerLabel(const ResultRow& row) { return std::to_string(row.size_bytes) + " B"; }

std::string ValidationLine(const nlohmann::json& validation) {
  return std::string("# validation: ") + (validation.value("ok", false) ? "ok" : "FAILED") + "\n";
}

}  // namespace

const ProgramSpec<Options, Session, Mode, Report> kProgram = {
    "rdmalab-bench", "rdmalab-bench/1", "the run's own check failed (validation)", BenchCommandLine, Resolve, Join,
    Run, Fields, Heading, PeerLabel, ValidationLine,
};

}  // namespace rdmalab::bench
