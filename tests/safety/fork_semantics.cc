// After fork(), registered memory behaves as on a modern kernel (pinned pages are copied
// into the child): parent and child each see only their own writes. On softnic this
// checks that registration's shared-memory anchors do not leak sharing into children.
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 3 * 4096 + 100;

int Fail(const char* what) {
  std::fprintf(stderr, "fork_semantics: %s\n", what);
  return 1;
}

bool All(const std::vector<char>& buffer, char value) {
  for (char c : buffer) {
    if (c != value) return false;
  }
  return true;
}

// Forks with `buffer` all 'A'; 0 when parent and child each saw only their own writes.
int ForkAndWrite(std::vector<char>& buffer, const char* when) {
  std::memset(buffer.data(), 'A', buffer.size());
  int parent_wrote[2], child_wrote[2];
  if (pipe(parent_wrote) || pipe(child_wrote)) return Fail("pipe");
  pid_t child = fork();
  if (child < 0) return Fail("fork");
  char token;
  if (child == 0) {
    close(parent_wrote[1]);
    close(child_wrote[0]);
    if (read(parent_wrote[0], &token, 1) != 1) std::_Exit(2);
    if (!All(buffer, 'A')) std::_Exit(3);  // the parent's later write leaked into the child
    std::memset(buffer.data(), 'C', buffer.size());
    if (write(child_wrote[1], "c", 1) != 1) std::_Exit(2);
    std::_Exit(0);
  }
  // Only the child holds these ends now: its death is end-of-file, never a hang.
  close(parent_wrote[0]);
  close(child_wrote[1]);
  std::memset(buffer.data(), 'B', buffer.size());
  if (write(parent_wrote[1], "p", 1) != 1) return Fail("pipe write");
  bool reported = read(child_wrote[0], &token, 1) == 1;
  close(parent_wrote[1]);
  close(child_wrote[0]);
  int status = 0;
  waitpid(child, &status, 0);
  std::fprintf(stderr, "fork_semantics: fork %s\n", when);
  if (!reported) {
    std::fprintf(stderr, "fork_semantics: child status %#x\n", status);
    return Fail("the child did not report back");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 3) return Fail("the child saw the parent's write after fork");
  if (WEXITSTATUS(status) != 0) return Fail("the child failed");
  if (!All(buffer, 'B')) return Fail("the child's write after fork reached the parent");
  return 0;
}

}  // namespace

int main() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) return Fail("no RDMA device");
  ibv_context* context = ibv_open_device(list[0]);
  ibv_pd* pd = context ? ibv_alloc_pd(context) : nullptr;
  if (pd == nullptr) return Fail("cannot open device / allocate PD");
  std::vector<char> buffer(kBufferBytes, 'A');
  ibv_mr* mr = ibv_reg_mr(pd, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) return Fail("ibv_reg_mr");
  if (ForkAndWrite(buffer, "while registered") != 0) return 1;
  ibv_dereg_mr(mr);
  // A deregistered buffer keeps the pages registration made shareable (for the next
  // registration of it); a fork must still copy them.
  if (ForkAndWrite(buffer, "after deregistration") != 0) return 1;
  ibv_dealloc_pd(pd);
  ibv_close_device(context);
  ibv_free_device_list(list);
  std::puts("fork_semantics: parent and child each see only their own writes to registered and deregistered memory");
  return 0;
}
