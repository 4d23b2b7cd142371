// The message of the std::invalid_argument that kv's Check(config) throws, or "" when the
// config is valid: tests assert that it names the bad field and value.
#pragma once

#include <stdexcept>
#include <string>

namespace rdmalab::kv {

template <typename Config>
std::string CheckMessage(const Config& config) {
  try {
    Check(config);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

}  // namespace rdmalab::kv
