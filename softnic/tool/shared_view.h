// One view per fabric: every `softnic run --netdevs` / `--device-nodes` of a fabric shows its
// program the same namespaces, so that programs started by separate runs (a server and its
// client) also meet over loopback TCP and on the devices' addresses, as libfabric's and
// rdma-core's programs do for their own setup.
//
// The first run builds the view; it and every run that joins it are recorded as members in
// the fabric directory's `view` file (pid, process start time, so that a reused pid is not
// taken for a member). A later run joins through /proc/PID/ns/* of a live member: the user
// namespace first where the view has one (its owner, the same uid, holds every capability
// there), then the network and mount namespaces. Nothing else holds the namespaces, so they
// end with the last process in them; the next run finds no live member and builds a fresh
// view. An flock on the record makes a run's look-up, build or join, and recording one step,
// so two runs starting at once never build two views.
//
// A view holds what its first run asked for. A later run asking for less joins it (and sees
// the rest too); one asking for something the view lacks fails, naming the view's members.
// Processes that members start are in the view but not recorded: once every recorded
// member has exited, the next run builds a new view even if such children still live.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace softnic {

struct ViewContents {
  bool device_nodes = false;
  bool netdevs = false;
};

// " --device-nodes --netdevs" as far as `contents` holds them.
std::string ViewFlags(const ViewContents& contents);

// The fabric's view as its record shows it: what it holds and its live members.
struct ViewState {
  bool exists = false;  // false: no live member, the next run builds a fresh view
  ViewContents contents;
  std::vector<pid_t> members;
};

class FabricViewRecord {
 public:
  ~FabricViewRecord();

  // Opens and locks the record in `fabric_directory` (exclusive, or shared to only read),
  // waiting at most a few seconds for another run that holds it.
  bool Lock(const std::string& fabric_directory, bool exclusive, std::string* error);

  // The view as recorded; members whose process is gone or has left the namespaces are
  // left out.
  ViewState Read() const;

  // Enters the view of a live member if there is one (`*joined` true), else leaves this
  // process as it is (`*joined` false). Fails if the view lacks something `wanted` asks for.
  bool Join(const ViewContents& wanted, bool* joined, std::string* error);

  // Records this process as a member: of the view it joined, or of the one it has just
  // built in its own namespaces with `contents`. The record then names the live members only.
  bool AddSelf(const ViewContents& contents, std::string* error);

 private:
  struct Member {
    pid_t pid = 0;
    unsigned long long start_time = 0;
  };
  // The namespaces a view was built in, by inode (0: the view has none of that kind).
  struct Namespaces {
    unsigned long long user = 0, net = 0, mnt = 0;
  };
  bool Load();
  bool IsLive(const Member& member) const;

  int fd_ = -1;
  std::string path_;
  ViewContents contents_;
  Namespaces namespaces_;
  std::vector<Member> members_;
};

}  // namespace softnic
