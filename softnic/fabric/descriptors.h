// Passing file descriptors between the processes of a fabric: how a peer gets hold of
// shared memory that has no name it could open itself (a memfd, a deleted file, a shared
// anonymous mapping). The owner publishes a descriptor under an object id of its own; a
// peer asks the owner's service for that id over a Unix socket in the fabric directory
// and receives a duplicate (SCM_RIGHTS). The directory is owner-only (mode 0700), so only
// the fabric's user can connect; the socket is named like the owner's objects, so it goes
// with them when the owner's slot is reclaimed.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace softnic {

constexpr int kDescriptorFetchTimeoutMs = 10000;

class DescriptorService {
 public:
  // Serves `fd` (which the service now owns) as `id`, an object id of this process (its
  // slot and incarnation name the socket). Starts the service on first use. False with
  // *error when the socket cannot be set up.
  bool Publish(const std::string& directory, uint64_t id, int fd, std::string* error);
  // Stops serving `id` and closes its descriptor; peers that fetched it keep theirs.
  void Withdraw(uint64_t id);
  // In a forked child: the parent's descriptors and serving thread are not ours.
  void ForgetAfterFork();

 private:
  void Serve(int listener);
  std::mutex mutex_;
  std::map<uint64_t, int> published_;
  bool started_ = false;
};

// Asks the process that published `id` for its descriptor: a new fd, or -1 with errno
// (ENOENT / ECONNREFUSED: the owner is gone; EIDRM: it no longer serves `id`; ETIMEDOUT).
int FetchDescriptor(const std::string& directory, uint64_t id, int timeout_ms);

}  // namespace softnic
