#include "softnic/tool/private_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace softnic {
namespace {

// The scratch tmpfs goes over /tmp, which every system has, instead of over a directory
// of our own there: a directory made on the host would outlive the run.
constexpr const char* kScratchMount = "/tmp";
constexpr const char* kScratchSizeOption = "mode=0700,size=1m";

bool IsAtOrBelow(const std::string& path, const std::string& root) {
  return path == root || path.rfind(root + "/", 0) == 0;
}

// The outermost mount points strictly below `target`, from /proc/self/mounts; a bind of
// one of them with MS_REC brings the ones below it along.
std::vector<std::string> OutermostSubmounts(const std::string& target) {
  std::vector<std::string> mounts;
  std::ifstream in("/proc/self/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string source, point;
    fields >> source >> point;
    if (point.rfind(target + "/", 0) != 0) continue;
    bool covered = false;
    for (const std::string& kept : mounts) covered = covered || IsAtOrBelow(point, kept);
    if (!covered) mounts.push_back(point);
  }
  return mounts;
}

bool WriteProcFile(const std::string& path, const std::string& text, std::string* error);

// A user namespace in which this process keeps its uid and gid, with every capability.
bool EnterUserNamespace(std::string* error) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER) != 0) {
    return FailWithErrno(error, "unshare(CLONE_NEWUSER) as uid " + std::to_string(uid) +
                                    " (user namespaces may be off: sysctl kernel.unprivileged_userns_clone and "
                                    "user.max_user_namespaces must allow them, or run as root)");
  }
  // A process without CAP_SETGID outside may write gid_map only once setgroups is denied.
  return WriteProcFile("/proc/self/setgroups", "deny", error) &&
         WriteProcFile("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1", error) &&
         WriteProcFile("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1", error);
}

bool WriteProcFile(const std::string& path, const std::string& text, std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return FailWithErrno(error, "open " + path);
  const bool written = write(fd, text.data(), text.size()) == ssize_t(text.size());
  const int saved = errno;
  close(fd);
  errno = saved;
  return written || FailWithErrno(error, "writing '" + text + "' to " + path);
}

// One entry of a rebuilt directory: the same name, made in the new tmpfs, showing what it was.
bool RebuildEntry(const std::string& original, const std::string& shown, std::string* error) {
  struct stat info;
  if (lstat(original.c_str(), &info) != 0) return FailWithErrno(error, "lstat " + original);
  if (S_ISLNK(info.st_mode)) {
    char link[PATH_MAX];
    const ssize_t n = readlink(original.c_str(), link, sizeof(link) - 1);
    if (n < 0) return FailWithErrno(error, "readlink " + original);
    link[n] = '\0';
    if (symlink(link, shown.c_str()) != 0) return FailWithErrno(error, "symlink " + shown);
    return true;
  }
  if (!S_ISDIR(info.st_mode)) return BindOnNewFile(original, shown, MS_REC, error);
  if (mkdir(shown.c_str(), info.st_mode & 07777) != 0) return FailWithErrno(error, "mkdir " + shown);
  if (mount(original.c_str(), shown.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return FailWithErrno(error, "binding " + original + " on " + shown);
  }
  return true;
}

}  // namespace

bool BindOnNewFile(const std::string& source, const std::string& shown, unsigned long flags, std::string* error) {
  const int fd = open(shown.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return FailWithErrno(error, "creating " + shown);
  close(fd);
  if (mount(source.c_str(), shown.c_str(), nullptr, MS_BIND | flags, nullptr) != 0) {
    return FailWithErrno(error, "binding " + source + " on " + shown);
  }
  return true;
}

bool FailWithErrno(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

bool PrivateView::Begin(std::string* error) {
  if (geteuid() != 0 && !EnterUserNamespace(error)) return false;
  if (unshare(CLONE_NEWNS) != 0) return FailWithErrno(error, "unshare(CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return FailWithErrno(error, "making / private");
  if (mount("softnic", kScratchMount, "tmpfs", 0, kScratchSizeOption) != 0) {
    return FailWithErrno(error, std::string("tmpfs on ") + kScratchMount);
  }
  return true;
}

std::string PrivateView::Scratch(const std::string& relative) const {
  return std::string(kScratchMount) + "/" + relative;
}

bool PrivateView::Overlay(const std::string& target, const std::string& lower, const std::string& upper,
                          std::string* error) {
  const std::string base = Scratch("overlay" + std::to_string(overlays_++));
  const std::string work = base + "/work";
  const std::string keep = base + "/keep";
  for (const std::string& dir : {base, work, keep}) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailWithErrno(error, "mkdir " + dir);
  }
  // The overlay hides the mounts below `target`: park them, then put them back on top.
  const std::vector<std::string> submounts = OutermostSubmounts(target);
  for (size_t i = 0; i < submounts.size(); ++i) {
    const std::string parked = keep + "/" + std::to_string(i);
    if (mkdir(parked.c_str(), 0700) != 0 ||
        mount(submounts[i].c_str(), parked.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return FailWithErrno(error, "parking " + submounts[i]);
    }
  }
  const std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
  if (mount("softnic", target.c_str(), "overlay", 0, options.c_str()) != 0) {
    return FailWithErrno(error, "overlay on " + target + " (" + options + ")");
  }
  for (size_t i = 0; i < submounts.size(); ++i) {
    const std::string parked = keep + "/" + std::to_string(i);
    if (mount(parked.c_str(), submounts[i].c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return FailWithErrno(error, "restoring " + submounts[i]);
    }
  }
  return true;
}

std::string PrivateView::Original(const std::string& target) const {
  std::string name = target;
  for (char& c : name) c = c == '/' ? '_' : c;
  return Scratch("original" + name);
}

bool PrivateView::Rebuild(const std::string& target, std::string* error) {
  const std::string original = Original(target);
  if (mkdir(original.c_str(), 0700) != 0) return FailWithErrno(error, "mkdir " + original);
  if (mount(target.c_str(), original.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return FailWithErrno(error, "binding " + target + " aside");
  }
  if (mount("softnic", target.c_str(), "tmpfs", 0, "mode=0755") != 0) {
    return FailWithErrno(error, "tmpfs on " + target);
  }
  DIR* dir = opendir(original.c_str());
  if (dir == nullptr) return FailWithErrno(error, "opendir " + original);
  bool ok = true;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    ok = RebuildEntry(original + "/" + name, target + "/" + name, error);
    if (!ok) break;
  }
  closedir(dir);
  return ok;
}

bool PrivateView::End(std::string* error) {
  if (umount2(kScratchMount, MNT_DETACH) != 0) return FailWithErrno(error, std::string("detaching ") + kScratchMount);
  return true;
}

}  // namespace softnic
