#include "softnic/tool/shared_view.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "softnic/tool/private_view.h"

namespace softnic {
namespace {

constexpr const char* kRecordName = "view";
constexpr const char* kRecordMagic = "softnic-view";
constexpr int kRecordVersion = 1;
// Building a view takes milliseconds; a run holding the lock longer than this is stuck.
constexpr auto kLockTimeout = std::chrono::seconds(10);
constexpr auto kLockPoll = std::chrono::milliseconds(5);
// Field 22 of /proc/PID/stat, counted from field 3 (the first after the command's ')').
constexpr int kStartTimeFieldAfterCommand = 22 - 3;

// When `pid` started (clock ticks since boot); 0 if there is no such process.
unsigned long long StartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t command_end = stat.rfind(')');
  if (command_end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(command_end + 1));
  std::string field;
  for (int i = 0; i <= kStartTimeFieldAfterCommand; ++i) {
    if (!(fields >> field)) return 0;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

std::string NamespacePath(pid_t pid, const char* kind) {
  return "/proc/" + (pid == 0 ? std::string("self") : std::to_string(pid)) + "/ns/" + kind;
}

// The inode of `pid`'s namespace of `kind` (0 for this process); 0 if it cannot be seen.
unsigned long long NamespaceInode(pid_t pid, const char* kind) {
  struct stat info;
  return stat(NamespacePath(pid, kind).c_str(), &info) == 0 ? info.st_ino : 0;
}

struct Kind {
  const char* name;
  int clone_flag;
};
// The user namespace first: joining the others needs the capabilities held there.
constexpr Kind kKindsInJoinOrder[] = {{"user", CLONE_NEWUSER}, {"net", CLONE_NEWNET}, {"mnt", CLONE_NEWNS}};
constexpr size_t kKinds = std::size(kKindsInJoinOrder);

void CloseAll(const int (&fds)[kKinds]) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace

std::string ViewFlags(const ViewContents& contents) {
  return std::string(contents.device_nodes ? " --device-nodes" : "") + (contents.netdevs ? " --netdevs" : "");
}

FabricViewRecord::~FabricViewRecord() {
  if (fd_ >= 0) close(fd_);
}

bool FabricViewRecord::Lock(const std::string& fabric_directory, bool exclusive, std::string* error) {
  path_ = fabric_directory + "/" + kRecordName;
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return FailWithErrno(error, "open " + path_);
  const auto deadline = std::chrono::steady_clock::now() + kLockTimeout;
  while (flock(fd_, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return FailWithErrno(error, "flock " + path_);
    if (std::chrono::steady_clock::now() > deadline) {
      *error = "another softnic run has held " + path_ + " for over " +
               std::to_string(std::chrono::seconds(kLockTimeout).count()) + " s; is it stuck?";
      return false;
    }
    std::this_thread::sleep_for(kLockPoll);
  }
  if (!Load()) {
    // Unreadable or from another softnic version: start afresh, as if no view existed.
    members_.clear();
  }
  return true;
}

bool FabricViewRecord::Load() {
  std::ifstream in(path_);
  std::string magic;
  int version = 0;
  if (!(in >> magic >> version) || magic != kRecordMagic || version != kRecordVersion) return false;
  std::string word;
  if (!(in >> word) || word != "contents" || !(in >> contents_.device_nodes >> contents_.netdevs)) return false;
  if (!(in >> word) || word != "namespaces" || !(in >> namespaces_.user >> namespaces_.net >> namespaces_.mnt)) {
    return false;
  }
  Member member;
  while (in >> word >> member.pid >> member.start_time) {
    if (word != "member") return false;
    members_.push_back(member);
  }
  members_.erase(std::remove_if(members_.begin(), members_.end(), [this](const Member& m) { return !IsLive(m); }),
                 members_.end());
  return true;
}

bool FabricViewRecord::IsLive(const Member& member) const {
  if (member.start_time == 0 || StartTime(member.pid) != member.start_time) return false;
  const unsigned long long recorded[] = {namespaces_.user, namespaces_.net, namespaces_.mnt};
  for (size_t k = 0; k < kKinds; ++k) {
    if (recorded[k] != 0 && NamespaceInode(member.pid, kKindsInJoinOrder[k].name) != recorded[k]) return false;
  }
  // Read again: the pid may have been reused while its namespaces were looked at.
  return StartTime(member.pid) == member.start_time;
}

ViewState FabricViewRecord::Read() const {
  ViewState state;
  state.exists = !members_.empty();
  state.contents = contents_;
  for (const Member& m : members_) state.members.push_back(m.pid);
  return state;
}

bool FabricViewRecord::Join(const ViewContents& wanted, bool* joined, std::string* error) {
  *joined = false;
  if (members_.empty()) return true;
  std::string pids;
  for (const Member& m : members_) pids += " " + std::to_string(m.pid);
  const ViewContents missing{wanted.device_nodes && !contents_.device_nodes, wanted.netdevs && !contents_.netdevs};
  if (missing.device_nodes || missing.netdevs) {
    *error = "this fabric's view, which every `softnic run` of it shares, holds" + ViewFlags(contents_) +
             " (made by its first run); it cannot add" + ViewFlags(missing) +
             " while its processes run (pids" + pids + "): ask for what it holds, or wait until they exit";
    return false;
  }
  const unsigned long long recorded[] = {namespaces_.user, namespaces_.net, namespaces_.mnt};
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return FailWithErrno(error, "getcwd");
  for (const Member& member : members_) {
    int fds[kKinds];
    std::fill(std::begin(fds), std::end(fds), -1);
    bool usable = true;
    for (size_t k = 0; k < kKinds && usable; ++k) {
      if (recorded[k] == 0 || recorded[k] == NamespaceInode(0, kKindsInJoinOrder[k].name)) continue;  // in it already
      fds[k] = open(NamespacePath(member.pid, kKindsInJoinOrder[k].name).c_str(), O_RDONLY | O_CLOEXEC);
      struct stat info;
      usable = fds[k] >= 0 && fstat(fds[k], &info) == 0 && info.st_ino == recorded[k];
    }
    // The namespaces opened are the member's only if it is the same process after the opens.
    usable = usable && StartTime(member.pid) == member.start_time;
    for (size_t k = 0; k < kKinds && usable; ++k) {
      if (fds[k] >= 0 && setns(fds[k], kKindsInJoinOrder[k].clone_flag) != 0) {
        const std::string what = std::string("setns into the ") + kKindsInJoinOrder[k].name + " namespace of pid " +
                                 std::to_string(member.pid) + ", a member of this fabric's view";
        const int saved = errno;
        CloseAll(fds);
        errno = saved;
        return FailWithErrno(error, what);
      }
    }
    CloseAll(fds);
    if (!usable) continue;
    // Entering a mount namespace moves the process to its root directory.
    if (chdir(cwd) != 0) return FailWithErrno(error, std::string("chdir ") + cwd + " in the view");
    *joined = true;
    return true;
  }
  members_.clear();  // every member went away while we looked: build a fresh view
  return true;
}

bool FabricViewRecord::AddSelf(const ViewContents& contents, std::string* error) {
  if (members_.empty()) {
    contents_ = contents;
    // Only a user other than root builds its view in a user namespace of its own.
    namespaces_.user = geteuid() != 0 ? NamespaceInode(0, "user") : 0;
    namespaces_.net = contents.netdevs ? NamespaceInode(0, "net") : 0;
    namespaces_.mnt = NamespaceInode(0, "mnt");
  }
  const Member self{getpid(), StartTime(getpid())};
  if (std::none_of(members_.begin(), members_.end(), [&](const Member& m) { return m.pid == self.pid; })) {
    members_.push_back(self);
  }
  std::ostringstream text;
  text << kRecordMagic << " " << kRecordVersion << "\n"
       << "contents " << contents_.device_nodes << " " << contents_.netdevs << "\n"
       << "namespaces " << namespaces_.user << " " << namespaces_.net << " " << namespaces_.mnt << "\n";
  for (const Member& m : members_) text << "member " << m.pid << " " << m.start_time << "\n";
  const std::string bytes = text.str();
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())) {
    return FailWithErrno(error, "writing " + path_);
  }
  return true;
}

}  // namespace softnic
