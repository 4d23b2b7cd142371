#include "kv/core/program.h"

namespace rdmalab::kv {
namespace {

const System& Resolve(Options& options) {
  const System& system = FindSystem(options.system);
  system.check(options);
  return system;
}

JoinSpec Join(const Options& options, const System& system) {
  return {std::string("rdmalab-kv --system ") + system.name, false, SymmetricConfigJson(KvCommandLine(), options)};
}

Report Run(const System& system, Session& session) {
  return session.is_server() ? system.server(session) : system.client(session);
}

nlohmann::json Fields(const Session& session, const Report& report) {
  nlohmann::json fields = {{"mode", "kv"},
                           {"system", session.options().system},
                           {"config", ConfigJson(KvCommandLine(), session.options())},
                           {"server", report.server}};
  if (!report.cut_short.empty()) fields["cut_short"] = {{"reason", report.cut_short}};
  return fields;
}

std::string Heading(const Session& session) {
  const Options& o = session.options();
  return "# rdmalab-kv " + o.system + "  " + session.role() + "/" + std::to_string(session.index()) + "  device " +
         session.device().name() + "  " + std::to_string(o.value_size) + " B values, PUT " +
         std::to_string(static_cast<int>(o.put_fraction * 100 + 0.5)) + "%, " + o.distribution + ", W " +
         std::to_string(o.window) + "\n";
}

std::string PeerLabel(const ResultRow&) { return "clients"; }

std::string ValidationLine(const nlohmann::json& validation) {
  return "# values checked: " + std::to_string(validation.value("checked", 0)) +
         (validation.value("ok", false) ? ", all right" : ", WRONG VALUES: " + validation.dump()) + "\n";
}

}  // namespace

const ProgramSpec<Options, Session, System, Report> kProgram = {
    "rdmalab-kv", "rdmalab-kv/1", "wrong values returned", KvCommandLine, Resolve, Join,
    Run, Fields, Heading, PeerLabel, ValidationLine,
};

}  // namespace rdmalab::kv
