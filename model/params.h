// The model's view of every parameter, mode and key-value system. Those of rdmalab-bench and
// rdmalab-kv are declared once, by the programs (their flag, mode and system tables), and
// reach the model through their --describe (programs.h); the model adds only its effect on a
// prediction and, where it deliberately predicts beyond what a program runs, a departure that
// its --describe states with the program's own values. Its own knobs (simulate, link, mode
// pcie, ...) are declared here. PointFromJson reads points through these tables and
// `rdmalab-model --describe` prints them (rdmalab-describe/1).
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
// modeled: changes the prediction. none: accepted because a program takes it, changes nothing
// (the note says why). not_modeled: accepted; some values answer "not modeled: <reason>".
enum class Effect { kModeled, kNone, kNotModeled };

// One parameter as a mode of the model takes it: the declaration (a program's, or the
// model's own) and the model's effect.
struct ParamDef {
  std::string name;     // the one spelling: YAML key, the programs' JSON name, the model point's key
  std::string program;  // who declares it: rdmalab-bench, rdmalab-kv or rdmalab-model
  ParamType type = ParamType::kString;
  bool list = false;             // a comma-separated string or JSON array of choices is accepted
  nlohmann::json unit;           // a string, or null: unitless
  double min = 0, max = 0;       // integer and number only, inclusive
  std::vector<std::string> choices;  // string only; empty: any string
  nlohmann::json default_value;  // null: chosen by the mode or point (the help says how)
  bool coordinator = false;      // set by the harness, never by an experiment (scope "coordinator")
  std::string help;
  Effect effect = Effect::kNone;
  std::string effect_note;  // how the model treats it, where the help does not say
  // Sets the draft from a value already checked against type, range and choices; nullptr:
  // the value changes no prediction.
  void (*apply)(PointDraft&, const nlohmann::json&) = nullptr;
  // Where the model departs from the program's declaration: {"program": the program's values
  // of the fields it changes, "why": ...}; null where it takes the declaration as it is.
  nlohmann::json departs;
};

struct ModeDef {
  std::string name;
  std::string summary;
  std::string program;  // who declares the mode: rdmalab-bench, rdmalab-kv or rdmalab-model
  const std::vector<ParamDef>* declarations;  // where its parameters are looked up first
  std::vector<std::string> params;            // every parameter it takes: the program's mode's, then model_adds
  std::vector<std::string> model_adds;        // the model's own or another mode's, beyond the program's
  Prediction (*predict)(const Point&, const Profile&);
};

struct SystemDef {
  std::string name;  // a choice of params.system (rdmalab-kv's spelling)
  std::string display;  // what figures call it
  std::string summary;
  std::string program;  // rdmalab-kv, or rdmalab-model for a bound the model draws alone
  std::vector<std::string> params;  // the kv parameters this system reads
};

const std::vector<ModeDef>& Modes();
const std::vector<SystemDef>& Systems();
const ParamDef* FindParam(const ModeDef& mode, const std::string& name);  // nullptr when the mode lacks it
const ParamDef* FindParam(const std::string& name);  // the first declaration of the name; nullptr when none
const ModeDef& FindMode(const std::string& name);    // throws ModelError listing the modes
bool ModeTakes(const ModeDef& mode, const std::string& param);
std::vector<std::string> ModeNames();
std::vector<std::string> SystemNames();
const std::vector<std::string>& Designs();  // the choices of params.design

// Sets every default the mode declares in the draft, before the point's own values.
void ApplyDefaults(PointDraft& draft, const ModeDef& mode);
// Reads one parameter into the draft: the error names the parameter, the value, the mode and
// what would be valid (the nearest names for an unknown one).
void ApplyParam(PointDraft& draft, const ModeDef& mode, const std::string& name, const nlohmann::json& value);

// rdmalab-describe/1 (program rdmalab-model).
nlohmann::ordered_json DescribeJson();
// The parameter list of the CLI's help: name, type and range, effect, one line each.
std::string ParamsHelp();

}  // namespace rdmalab::model
