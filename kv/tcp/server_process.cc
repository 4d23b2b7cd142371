#include "kv/tcp/server_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "rdma/clock.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {
namespace {

constexpr int kConnectRetryMs = 10;
constexpr std::size_t kOutputKeptBytes = 16 << 10;

bool IsExecutableFile(const std::string& path) {
  struct stat info{};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string SearchPath(const std::string& name, const std::string& path_list) {
  for (std::size_t at = 0; at <= path_list.size();) {
    std::size_t end = path_list.find(':', at);
    if (end == std::string::npos) end = path_list.size();
    const std::string directory = end > at ? path_list.substr(at, end - at) : ".";
    if (IsExecutableFile(directory + "/" + name)) return directory + "/" + name;
    at = end + 1;
  }
  return "";
}

}  // namespace

std::string FindProgram(const std::string& given, const std::string& default_name) {
  if (given.find('/') != std::string::npos) {
    if (IsExecutableFile(given)) return given;
    Fail("--server-bin ", given, ": ", access(given.c_str(), F_OK) == 0 ? "not an executable file" : "no such file",
         " (expected the path of ", default_name, ")");
  }
  const std::string name = given.empty() ? default_name : given;
  const char* path = std::getenv("PATH");
  const std::string path_list = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  const std::string found = SearchPath(name, path_list);
  if (found.empty()) {
    Fail(name, " not found on PATH (", path_list, "): install it (Debian: scripts/install-deps.sh) or give --server-bin PATH");
  }
  return found;
}

ChildServer::ChildServer(std::string program, std::vector<std::string> arguments, const std::vector<int>& cpus)
    : program_(std::move(program)), arguments_(std::move(arguments)) {
  output_ = FileDescriptor(memfd_create("rdmalab-kv-server-output", MFD_CLOEXEC));
  if (output_.get() < 0) FailErrno("memfd_create (for the output of " + program_ + ")", errno);
  FileDescriptor null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls are allowed (this process has other threads).
  std::vector<char*> argv;
  argv.push_back(program_.data());
  for (auto& argument : arguments_) argv.push_back(argument.data());
  argv.push_back(nullptr);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus) CPU_SET(cpu, &mask);
  const pid_t parent = getpid();
  const int output = output_.get(), input = null.get();
  pid_ = fork();
  if (pid_ < 0) FailErrno("fork (to start " + program_ + ")", errno);
  if (pid_ == 0) {
    // The signal comes when the forking thread ends: this is the main thread, which lives
    // as long as the process.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (!cpus.empty()) sched_setaffinity(0, sizeof(mask), &mask);
    dup2(input, STDIN_FILENO);
    dup2(output, STDOUT_FILENO);
    dup2(output, STDERR_FILENO);
    // Not the rendezvous connection, not softnic's descriptors: peers must see them close
    // when this process goes, even while the child is still being killed.
    close_range(3, ~0u, 0);
    execv(argv[0], argv.data());
    static constexpr char kExecFailed[] = "exec failed\n";
    (void)!write(STDERR_FILENO, kExecFailed, sizeof(kExecFailed) - 1);
    _exit(127);
  }
}

ChildServer::~ChildServer() {
  if (pid_ <= 0 || reaped_) return;
  // SIGKILL, not SIGTERM: the store holds nothing worth saving (persistence is off), and
  // a kill cannot be delayed by the child.
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

std::string ChildServer::CommandLine() const {
  std::string line = program_;
  for (const auto& argument : arguments_) line += " " + (argument.empty() ? std::string("''") : argument);
  return line;
}

bool ChildServer::Exited() {
  if (reaped_) return true;
  const pid_t got = waitpid(pid_, &status_, WNOHANG);
  if (got == pid_) reaped_ = true;
  return reaped_;
}

std::string ChildServer::LastOutputLine() const {
  std::string text(kOutputKeptBytes, '\0');
  const off_t size = lseek(output_.get(), 0, SEEK_END);
  const off_t from = size > static_cast<off_t>(text.size()) ? size - static_cast<off_t>(text.size()) : 0;
  const ssize_t got = pread(output_.get(), text.data(), text.size(), from);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  const std::size_t start = text.find_last_of('\n');
  return start == std::string::npos ? text : text.substr(start + 1);
}

void ChildServer::FailExited(const char* when) {
  const std::string how = WIFEXITED(status_) ? "exited with status " + std::to_string(WEXITSTATUS(status_))
                                             : "was killed by signal " + std::to_string(WTERMSIG(status_));
  const std::string last = LastOutputLine();
  Fail("`", CommandLine(), "` ", how, " ", when,
       last.empty() ? std::string(" (no output)") : "; its last output: '" + last + "'");
}

void ChildServer::CheckRunning(const char* when) {
  if (Exited()) FailExited(when);
}

void ChildServer::WaitUntilAccepting(const Endpoint& endpoint, int timeout_ms) {
  const std::uint64_t deadline = MonotonicNs() + std::uint64_t(timeout_ms) * 1'000'000;
  const std::string when = "before accepting connections on " + endpoint.host + ":" + std::to_string(endpoint.port);
  for (;;) {
    if (TryConnect(endpoint).get() >= 0) return;
    CheckRunning(when.c_str());
    if (MonotonicNs() >= deadline) {
      Fail("`", CommandLine(), "` did not accept connections on ", endpoint.host, ":", endpoint.port, " within ",
           timeout_ms, " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kConnectRetryMs));
  }
}

}  // namespace rdmalab::kv::tcp
