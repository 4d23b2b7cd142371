// What `softnic run --device-nodes` and `--netdevs` build: a private mount namespace in
// which a directory of the host (/dev, /sys) is shown with extra entries, for the program
// run and nobody else. Nothing is written to the host's file systems: the scratch tmpfs
// that holds the extra entries is mounted over /tmp only while the view is built and
// detached before the program starts (the mounts made from it keep it alive), so /tmp is the
// host's again and nothing is left behind when the program exits.
//
// As root the namespaces are made directly. Any other user gets them inside a user
// namespace of its own in which it keeps its uid and gid (mapped to themselves): it holds
// the capabilities to build the view there, and loses them when the program is executed.
#pragma once

#include <string>

namespace softnic {

class PrivateView {
 public:
  // Enters a private mount namespace (first a user namespace, if not root) and mounts the
  // scratch tmpfs. False with `error` naming what refused, e.g. user namespaces switched
  // off by the kernel.unprivileged_userns_clone or user.max_user_namespaces sysctl.
  bool Begin(std::string* error);

  // A path inside the scratch tmpfs, valid until End().
  std::string Scratch(const std::string& relative) const;

  // Mounts at `target` an overlay of `lower` with `upper` (a scratch directory) on top; the
  // mounts that were below `target` (/dev/shm, /sys/fs/cgroup, ...) are put back on top of
  // it, so the program sees them as before.
  bool Overlay(const std::string& target, const std::string& lower, const std::string& upper,
               std::string* error);

  // Shows `target` as a new tmpfs holding every entry it had (directories and files bound
  // there, the mounts below them included; symbolic links copied), where entries may then be
  // added. Unlike Overlay it needs no copy of `target`'s own mount, which a user namespace
  // refuses for a mount with mounts of the outer namespace below it (/dev/shm under /dev).
  // The entries as they were stay reachable at Original(target) until End().
  bool Rebuild(const std::string& target, std::string* error);
  std::string Original(const std::string& target) const;

  // Detaches the scratch tmpfs; /tmp is the host's again.
  bool End(std::string* error);

 private:
  int overlays_ = 0;
};

// Binds `source` (a file, not a directory) on a new empty file `shown` that it creates.
bool BindOnNewFile(const std::string& source, const std::string& shown, unsigned long flags, std::string* error);

// Sets `error` to `what: strerror(errno)` and returns false.
bool FailWithErrno(std::string* error, const std::string& what);

}  // namespace softnic
