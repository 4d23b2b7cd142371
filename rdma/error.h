// Errors of setup and teardown: one exception type whose message names the bad value and
// what would be valid. Hot paths never throw; they record an error code and return.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace rdmalab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the message from any streamable parts: Fail("QP ", qpn, " has no route").
template <typename... Parts>
[[noreturn]] void Fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

// What this host or its provider cannot do although the request is valid (one NUMA node
// but far memory asked for, fewer SGEs than asked): programs exit kExitUnsupported
// (rdma/program.h) so that a coordinator records the point as unsupported, not failed.
class Unsupported : public Error {
 public:
  using Error::Error;
};

template <typename... Parts>
[[noreturn]] void FailUnsupported(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Unsupported(message.str());
}

// errno-style failures of libibverbs calls: "ibv_create_qp(RC, depth 128): Cannot allocate memory".
[[noreturn]] void FailErrno(const std::string& what, int error_number);

}  // namespace rdmalab
