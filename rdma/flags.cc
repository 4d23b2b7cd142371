#include "rdma/flags.h"

namespace rdmalab {
namespace {

struct NoOptions : ParticipantOptions {};

const char* TypeName(ParamType type) {
  switch (type) {
    case ParamType::kInteger:
      return "integer";
    case ParamType::kNumber:
      return "number";
    case ParamType::kBoolean:
      return "boolean";
    case ParamType::kString:
      return "string";
  }
  return "string";
}

// A bound as JSON: integers print without a fraction.
nlohmann::ordered_json Bound(ParamType type, double value) {
  if (type == ParamType::kInteger) return static_cast<long long>(value);
  return value;
}

}  // namespace

long long ParseInteger(const std::string& flag, const std::string& value, long long min, long long max) {
  try {
    std::size_t used = 0;
    const long long parsed = std::stoll(value, &used, 0);
    if (used == value.size() && parsed >= min && parsed <= max) return parsed;
  } catch (const std::logic_error&) {
  }
  Fail("bad value '", value, "' for --", flag, ": expected an integer in [", min, ", ", max, "]");
}

double ParseNumber(const std::string& flag, const std::string& value, double min, double max) {
  try {
    std::size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used == value.size() && parsed >= min && parsed <= max) return parsed;
  } catch (const std::logic_error&) {
  }
  Fail("bad value '", value, "' for --", flag, ": expected a number in [", min, ", ", max, "]");
}

std::string OneOf(const std::string& flag, const std::string& value, const std::vector<std::string>& valid) {
  std::string list;
  for (const auto& choice : valid) {
    if (value == choice) return value;
    list += (list.empty() ? "" : ", ") + choice;
  }
  Fail("bad value '", value, "' for --", flag, ": valid values are ", list);
}

bool ParseSwitch(const std::string& flag, const std::string& value) {
  if (value.empty() || value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  Fail("bad value '", value, "' for --", flag, ": a switch takes no value, or true/false");
}

std::vector<std::uint32_t> ParseIntegers(const std::string& flag, const std::string& value, long long min,
                                         long long max) {
  std::vector<std::uint32_t> values;
  std::stringstream stream(value);
  std::string token;
  while (std::getline(stream, token, ',')) {
    values.push_back(static_cast<std::uint32_t>(ParseInteger(flag, token, min, max)));
  }
  if (values.empty()) Fail("bad value '", value, "' for --", flag, ": expected an integer, or a comma-separated list");
  return values;
}

std::string FlagKey(const char* name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

bool SameFlagName(const std::string& a, const std::string& b) {
  std::string x = a, y = b;
  std::replace(x.begin(), x.end(), '_', '-');
  std::replace(y.begin(), y.end(), '_', '-');
  return x == y;
}

std::vector<std::string> ParticipantParamNames() {
  std::vector<std::string> names;
  for (const auto& flag : JoinFlags<NoOptions>({})) names.push_back(FlagKey(flag.name));
  for (const auto& flag : RunControlFlags<NoOptions>()) names.push_back(FlagKey(flag.name));
  return names;
}

nlohmann::json ShownDefault(const ValueSpec& value, const nlohmann::json& field) {
  if ((field.is_string() && field.get<std::string>().empty()) || (field.is_array() && field.empty())) return nullptr;
  if (field.is_number() && (value.type == ParamType::kInteger || value.type == ParamType::kNumber)) {
    const double number = field.get<double>();
    if (number < value.min || number > value.max) return nullptr;
  }
  return field;
}

nlohmann::ordered_json ParamJson(const char* name, char short_name, const char* unit, const Reach& reach, const char* help,
                         const ValueSpec& value, const nlohmann::json& field, const std::vector<std::string>& roles) {
  static const char* const kRoleNames[] = {"server", "client", "node"};
  std::vector<std::string> readers;
  for (unsigned bit = 0; bit < 3; ++bit) {
    const bool has = std::find(roles.begin(), roles.end(), kRoleNames[bit]) != roles.end();
    if (has && (reach.roles & (1u << bit)) != 0) readers.push_back(kRoleNames[bit]);
  }
  nlohmann::ordered_json param = {{"name", FlagKey(name)}, {"flag", std::string("--") + name}};
  if (short_name != 0) param["short"] = std::string("-") + short_name;
  param["type"] = TypeName(value.type);
  param["list"] = value.list;
  param["unit"] = unit != nullptr ? nlohmann::ordered_json(unit) : nlohmann::ordered_json(nullptr);
  if (value.type == ParamType::kInteger || value.type == ParamType::kNumber) {
    param["min"] = Bound(value.type, value.min);
    param["max"] = Bound(value.type, value.max);
  }
  if (!value.choices.empty()) param["choices"] = value.choices;
  param["default"] = ShownDefault(value, field);
  param["symmetric"] = reach.symmetric;
  param["roles"] = readers;
  param["scope"] = reach.scope == Scope::kCoordinator ? "coordinator" : "experiment";
  param["help"] = help;
  return param;
}

std::string HelpLine(const char* name, char short_name, const char* value_hint, bool symmetric, const char* help,
                     const nlohmann::json& shown_default) {
  std::string spelling = short_name ? std::string("-") + short_name + ", " : "    ";
  spelling += std::string("--") + name;
  if (value_hint) spelling += std::string(value_hint[0] == '[' ? "" : " ") + value_hint;
  char line[160];
  std::snprintf(line, sizeof(line), "  %-34s ", spelling.c_str());
  std::string out = std::string(line) + help;
  if (!shown_default.is_null()) {
    out += " [default " + (shown_default.is_string() ? shown_default.get<std::string>() : shown_default.dump()) + "]";
  }
  return out + (symmetric ? " (both sides)" : "") + "\n";
}

}  // namespace rdmalab
