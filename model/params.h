// The model's tables, each declared once: the point parameters (name, type, unit, range or
// choices, default, effect on a prediction, help), the modes (summary, the parameters each
// takes, its prediction) and the key-value systems. PointFromJson reads points through them,
// `rdmalab-model --describe` prints them (rdmalab-describe/1), and the CLI's help lists them.
// Adding a mode is one row of Modes() plus its prediction function; adding a parameter is one
// row of Params() plus what it sets in the point.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/analytic.h"

namespace rdmalab::model {

// A point while its parameters are read: the Point, plus the raw values that PointFromJson
// combines once all are known (a verb needs its connection, inline_size needs the size).
struct PointDraft {
  Point p;
  std::string verb, connection;  // empty: the mode's default (write, faa for atomics, send for sgbatch; RC)
  std::string request = "write", response = "send", response_connection;
  int64_t inline_size = -1;  // -1: not given (no payload goes inline by size)
  bool header_only = false;
  std::vector<std::string> optimizations;
  int64_t clients_per_process = -1;  // kv's clients; -1: not given
  uint32_t client_threads = 1;       // kv's threads: client threads per client process
  bool unkeyed = false;              // distribution: none (tput's own window slot), whatever keys says
};

enum class ParamType { kInteger, kNumber, kBoolean, kString };
// modeled: changes the prediction. none: accepted because a binary takes it, changes nothing
// (its help says why). not_modeled: accepted; some values answer "not modeled: <reason>".
enum class Effect { kModeled, kNone, kNotModeled };

struct ParamDef {
  const char* name;  // the one spelling: YAML key, rdmalab-bench/kv's JSON name, the model point's key
  ParamType type;
  const char* unit;  // nullptr: unitless
  double min, max;   // integer and number only, inclusive
  std::vector<std::string> choices;  // string only; empty: any string
  nlohmann::json default_value;      // null: chosen by the mode or point (the help says how)
  Effect effect;
  const char* help;
  // Sets the draft from a value already checked against type, range and choices.
  void (*apply)(PointDraft&, const nlohmann::json&);
  bool list = false;  // a comma-separated string or JSON array of choices is accepted
  // Set by the harness, never by an experiment (rdmalab-describe/1 scope "coordinator"); the
  // model accepts it as the binaries do.
  bool coordinator = false;
};

struct ModeDef {
  const char* name;
  const char* summary;
  std::vector<std::string> params;  // every parameter the mode takes, each a row of Params()
  Prediction (*predict)(const Point&, const Profile&);
};

struct SystemDef {
  const char* name;  // a choice of params.system (rdmalab-kv's spelling)
  const char* summary;
  std::vector<std::string> params;  // the kv parameters this system reads
};

const std::vector<ParamDef>& Params();
const std::vector<ModeDef>& Modes();
const std::vector<SystemDef>& Systems();
const ParamDef* FindParam(const std::string& name);          // nullptr when none
const ModeDef& FindMode(const std::string& name);            // throws ModelError listing the modes
bool ModeTakes(const ModeDef& mode, const std::string& param);
std::vector<std::string> ModeNames();
std::vector<std::string> SystemNames();
const std::vector<std::string>& Designs();  // the choices of params.design

// Reads one parameter into the draft: the error names the parameter, the value, the mode and
// what would be valid (the nearest names for an unknown one).
void ApplyParam(PointDraft& draft, const ModeDef& mode, const std::string& name, const nlohmann::json& value);

// rdmalab-describe/1 (program rdmalab-model).
nlohmann::ordered_json DescribeJson();
// The parameter list of the CLI's help: name, type and range, effect, one line each.
std::string ParamsHelp();

}  // namespace rdmalab::model
