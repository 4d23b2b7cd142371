// Helper processes for multi-process tests. The test binary re-executes itself
// (/proc/self/exe --conformance-helper NAME FD ARGS...), so a child never inherits a
// device opened by the parent, on any provider. Parent and child talk over a socketpair;
// every receive has a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace conformance {

// One end of a stream socketpair carrying fixed-size messages.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool Send(const void* data, size_t size);
  // False on timeout, EOF or error.
  bool Recv(void* data, size_t size, std::chrono::milliseconds timeout);
  // True when a message (or EOF) is waiting.
  bool Readable();
  int fd() const { return fd_; }

  template <typename T>
  bool SendValue(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    return Send(&value, sizeof(value));
  }
  template <typename T>
  bool RecvValue(T* value, std::chrono::milliseconds timeout) {
    static_assert(std::is_trivially_copyable_v<T>);
    return Recv(value, sizeof(*value), timeout);
  }
  bool SendVector(const std::vector<uint64_t>& values);
  bool RecvVector(std::vector<uint64_t>* values, std::chrono::milliseconds timeout);
  // A file descriptor (SCM_RIGHTS); the receiver gets its own, or -1 on timeout or error.
  bool SendFd(int fd);
  int RecvFd(std::chrono::milliseconds timeout);

 private:
  int fd_;
};

class Child {
 public:
  // Starts helper `name` (registered with CONFORMANCE_HELPER) with `args`.
  static std::unique_ptr<Child> Spawn(const std::string& name, const std::vector<std::string>& args,
                                      std::string* error);
  ~Child();  // a child still running is killed and reaped

  Channel& channel() { return *channel_; }
  pid_t pid() const { return pid_; }
  void Kill();
  // Exit code, or -signal when killed by a signal; nullopt when still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::unique_ptr<Channel> channel_;
};

using HelperFn = int (*)(Channel& channel, const std::vector<std::string>& args);

struct HelperRegistration {
  HelperRegistration(const char* name, HelperFn fn);
};

// Runs the helper named in argv when argv[1] is --conformance-helper; returns its exit code.
std::optional<int> RunHelperIfRequested(int argc, char** argv);

// Sends `what` to stderr with the helper's name; returns 1 (a helper's failure exit code).
int HelperFail(const std::string& what);

}  // namespace conformance

#define CONFORMANCE_HELPER(name)                                                                   \
  static int name##_helper(::conformance::Channel&, const std::vector<std::string>&);              \
  static const ::conformance::HelperRegistration name##_registration(#name, name##_helper);        \
  static int name##_helper([[maybe_unused]] ::conformance::Channel& channel,                       \
                           [[maybe_unused]] const std::vector<std::string>& args)
