#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

namespace conformance {

namespace {

std::map<std::string, HelperFn>& Registry() {
  static std::map<std::string, HelperFn> registry;
  return registry;
}

constexpr const char* kHelperFlag = "--conformance-helper";
constexpr int kHelperFd = 100;  // the socketpair end, at a fixed number in every helper

}  // namespace

Channel::~Channel() { close(fd_); }

bool Channel::Send(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = send(fd_, bytes, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool Channel::Recv(void* data, size_t size, std::chrono::milliseconds timeout) {
  auto* bytes = static_cast<uint8_t*>(data);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (size > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = recv(fd_, bytes, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool Channel::Readable() {
  pollfd pfd{fd_, POLLIN, 0};
  return poll(&pfd, 1, 0) > 0;
}

bool Channel::SendVector(const std::vector<uint64_t>& values) {
  const uint64_t count = values.size();
  return SendValue(count) && Send(values.data(), count * sizeof(uint64_t));
}

bool Channel::RecvVector(std::vector<uint64_t>* values, std::chrono::milliseconds timeout) {
  uint64_t count = 0;
  if (!RecvValue(&count, timeout)) return false;
  values->resize(count);
  return Recv(values->data(), count * sizeof(uint64_t), timeout);
}

namespace {

// One byte with room for one descriptor beside it (SCM_RIGHTS). Not copyable: it points
// into itself.
struct FdMessage {
  uint8_t byte = 0;
  iovec payload{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  FdMessage() {
    header.msg_iov = &payload;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

}  // namespace

bool Channel::SendFd(int fd) {
  FdMessage message;
  cmsghdr* header = CMSG_FIRSTHDR(&message.header);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  return sendmsg(fd_, &message.header, MSG_NOSIGNAL) == 1;
}

int Channel::RecvFd(std::chrono::milliseconds timeout) {
  pollfd pfd{fd_, POLLIN, 0};
  if (poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return -1;
  FdMessage message;
  if (recvmsg(fd_, &message.header, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* header = CMSG_FIRSTHDR(&message.header);
  if (header == nullptr || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return fd;
}

std::unique_ptr<Child> Child::Spawn(const std::string& name, const std::vector<std::string>& args,
                                    std::string* error) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    *error = std::string("socketpair: ") + strerror(errno);
    return nullptr;
  }
  std::vector<std::string> argv_strings = {"conformance-helper", kHelperFlag, name, std::to_string(kHelperFd),
                                           std::to_string(getpid())};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // posix_spawn, not fork + exec: the parent is suspended until the exec, so the child
  // reads argv before the parent can touch it. (After fork, a provider may share rather
  // than copy pages that were once registered, e.g. softnic's MAP_SHARED regions, and
  // heap memory reused from them.)
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], kHelperFd);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    *error = std::string("posix_spawn(/proc/self/exe): ") + strerror(rc);
    close(fds[0]);
    return nullptr;
  }
  std::unique_ptr<Child> child(new Child());
  child->pid_ = pid;
  child->channel_ = std::make_unique<Channel>(fds[0]);
  return child;
}

Child::~Child() {
  if (!reaped_) {
    Kill();
    Wait(std::chrono::milliseconds(5000));
  }
}

void Child::Kill() {
  if (!reaped_) kill(pid_, SIGKILL);
}

std::optional<int> Child::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      reaped_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return -WTERMSIG(status);
      return -1;
    }
    if (got < 0) {
      reaped_ = true;
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

HelperRegistration::HelperRegistration(const char* name, HelperFn fn) { Registry()[name] = fn; }

int HelperFail(const std::string& what) {
  std::cerr << "conformance helper (pid " << getpid() << "): " << what << std::endl;
  return 1;
}

std::optional<int> RunHelperIfRequested(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != kHelperFlag) return std::nullopt;
  if (argc < 5) return HelperFail("usage: --conformance-helper NAME FD PARENT_PID [ARGS...]");
  // A crashed test run leaves no helper behind.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != static_cast<pid_t>(std::atoi(argv[4]))) return HelperFail("the test process is gone");
  const auto it = Registry().find(argv[2]);
  if (it == Registry().end()) return HelperFail(std::string("unknown helper ") + argv[2]);
  Channel channel(std::atoi(argv[3]));
  const std::vector<std::string> args(argv + 5, argv + argc);
  return it->second(channel, args);
}

}  // namespace conformance
