#include "rdma/flags.h"

namespace rdmalab {

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

double ParseSeconds(const std::string& flag, const std::string& value, double min) {
  try {
    std::size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used == value.size() && parsed >= min && parsed < 1e7) return parsed;
  } catch (const std::logic_error&) {
  }
  Fail("bad value '", value, "' for --", flag, ": expected seconds >= ", min);
}

std::string OneOf(const std::string& flag, const std::string& value, std::initializer_list<const char*> valid) {
  std::string list;
  for (const char* choice : valid) {
    if (value == choice) return value;
    list += (list.empty() ? "" : ", ") + std::string(choice);
  }
  Fail("bad value '", value, "' for --", flag, ": valid values are ", list);
}

bool ParseSwitch(const std::string& flag, const std::string& value) {
  if (value.empty() || value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  Fail("bad value '", value, "' for --", flag, ": a switch takes no value, or true/false");
}

std::vector<std::uint32_t> ParseSizes(const std::string& flag, const std::string& value) {
  std::vector<std::uint32_t> sizes;
  std::stringstream stream(value);
  std::string token;
  while (std::getline(stream, token, ',')) {
    sizes.push_back(static_cast<std::uint32_t>(ParseInteger(flag, token, 0, 1ll << 30)));
  }
  if (sizes.empty()) Fail("bad value '", value, "' for --", flag, ": expected bytes, or a comma-separated list");
  return sizes;
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

}  // namespace rdmalab
