// What `softnic run --device-nodes` and `--netdevs` build: a private mount namespace in
// which a directory of the host (/dev, /sys) is shown with extra entries, for the program
// run and nobody else. Nothing is written to the host's file systems: the scratch tmpfs
// that holds the extra entries is mounted over /tmp only while the view is built and
// detached before the program starts (the overlays keep it alive), so /tmp is the host's
// again and nothing is left behind when the program exits.
#pragma once

#include <string>

namespace softnic {

class PrivateView {
 public:
  // Enters a private mount namespace and mounts the scratch tmpfs. Needs CAP_SYS_ADMIN.
  bool Begin(std::string* error);

  // A path inside the scratch tmpfs, valid until End().
  std::string Scratch(const std::string& relative) const;

  // Mounts at `target` an overlay of `lower` with `upper` (a scratch directory) on top; the
  // mounts that were below `target` (/dev/shm, /sys/fs/cgroup, ...) are put back on top of
  // it, so the program sees them as before.
  bool Overlay(const std::string& target, const std::string& lower, const std::string& upper,
               std::string* error);

  // Detaches the scratch tmpfs; /tmp is the host's again.
  bool End(std::string* error);

 private:
  int overlays_ = 0;
};

// Sets `error` to `what: strerror(errno)` and returns false.
bool FailWithErrno(std::string* error, const std::string& what);

}  // namespace softnic
