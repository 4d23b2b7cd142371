// The real store (memcached, redis-server) as a child process of the server role: found
// on PATH or named by --server-bin, pinned to the server's CPUs, its output kept for
// error messages, killed when this object goes (every exit path, exceptions included)
// and, through PR_SET_PDEATHSIG, when this process dies without unwinding.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "kv/tcp/socket.h"

namespace rdmalab::kv::tcp {

// The program to start: `given` (a path, or a name looked up on PATH) or, when empty,
// `default_name` on PATH. Fails naming what was looked for, and where.
std::string FindProgram(const std::string& given, const std::string& default_name);

class ChildServer {
 public:
  ChildServer(std::string program, std::vector<std::string> arguments, const std::vector<int>& cpus);
  ~ChildServer();
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  // Returns once a connection to `endpoint` succeeds; fails when the child exits first or
  // `timeout_ms` passes, naming the command and the child's last line of output.
  void WaitUntilAccepting(const Endpoint& endpoint, int timeout_ms);
  // Fails when the child has exited, naming its status and last line of output.
  void CheckRunning(const char* when);
  const std::string& program() const { return program_; }
  std::string CommandLine() const;

 private:
  bool Exited();  // reaps the child without waiting
  [[noreturn]] void FailExited(const char* when);
  std::string LastOutputLine() const;

  std::string program_;
  std::vector<std::string> arguments_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  FileDescriptor output_;  // the child's stdout and stderr (a memfd)
};

}  // namespace rdmalab::kv::tcp
