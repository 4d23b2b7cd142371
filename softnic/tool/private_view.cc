#include "softnic/tool/private_view.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
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

}  // namespace

bool FailWithErrno(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

bool PrivateView::Begin(std::string* error) {
  if (unshare(CLONE_NEWNS) != 0) return FailWithErrno(error, "unshare(CLONE_NEWNS) (needs root)");
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

bool PrivateView::End(std::string* error) {
  if (umount2(kScratchMount, MNT_DETACH) != 0) return FailWithErrno(error, std::string("detaching ") + kScratchMount);
  return true;
}

}  // namespace softnic
