// A forked child opens devices of its own while the parent keeps its own, as on a NIC:
// rdma-core's rdma_cm tests open a context, then fork a passive and an active side that
// each open the device again. The children's objects must not collide with the parent's
// or with each other's, and the parent must go on creating objects after they exit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr int kChildren = 2;
constexpr int kCqDepth = 16;
constexpr std::chrono::milliseconds kChildTimeoutMs{30'000};
constexpr std::chrono::milliseconds kWaitPollMs{10};

// Exit status 0 when the child opened `name` and made a CQ on it (a ring and a FIFO object).
[[noreturn]] void ChildOpensDevice(const std::string& name) {
  std::string error;
  std::unique_ptr<Device> device = Device::Open(name, &error);
  if (device == nullptr) _exit(1);
  ibv_cq* cq = ibv_create_cq(device->ctx(), kCqDepth, nullptr, nullptr, 0);
  if (cq == nullptr) _exit(2);
  _exit(ibv_destroy_cq(cq) == 0 ? 0 : 3);
}

// The child's exit status, or -1 after killing it when it outlives the deadline.
int WaitChild(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + kChildTimeoutMs;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(kWaitPollMs);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ForkedChild : public testing::TestWithParam<DevicePair> {};

TEST_P(ForkedChild, ChildrenOpenTheirOwnDevicesAndTheParentGoesOn) {
  std::string error;
  std::unique_ptr<Device> parent = Device::Open(GetParam().local, &error);
  ASSERT_TRUE(parent != nullptr) << error;
  ibv_cq* before = ibv_create_cq(parent->ctx(), kCqDepth, nullptr, nullptr, 0);
  ASSERT_NE(before, nullptr) << strerror(errno);
  pid_t children[kChildren];
  for (pid_t& child : children) {
    child = fork();
    ASSERT_GE(child, 0) << strerror(errno);
    if (child == 0) ChildOpensDevice(GetParam().local);
  }
  for (pid_t child : children) EXPECT_EQ(WaitChild(child), 0) << "exit 1: open, 2: create CQ, 3: destroy CQ";
  std::unique_ptr<Device> again = Device::Open(GetParam().local, &error);
  ASSERT_TRUE(again != nullptr) << "the parent's open after its children: " << error;
  ibv_cq* after = ibv_create_cq(again->ctx(), kCqDepth, nullptr, nullptr, 0);
  ASSERT_NE(after, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_cq(after), 0);
  EXPECT_EQ(ibv_destroy_cq(before), 0);
}

// Registering heap memory moves its pages into a shared object; deregistering leaves them
// mapped so. A child forked afterwards must still get its own copy of those pages, or its
// heap and the parent's are one (rdma-core's tests: malloc aborts after test_mr).
TEST_P(ForkedChild, HeapOfADeregisteredMrIsNotSharedWithTheChild) {
  std::string error;
  std::unique_ptr<Device> parent = Device::Open(GetParam().local, &error);
  ASSERT_TRUE(parent != nullptr) << error;
  std::vector<char> heap(kCqDepth, 'p');
  ibv_mr* mr = ibv_reg_mr(parent->pd(), heap.data(), heap.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  ASSERT_EQ(ibv_dereg_mr(mr), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0) << strerror(errno);
  if (child == 0) {
    heap[0] = 'c';
    _exit(0);
  }
  ASSERT_EQ(WaitChild(child), 0);
  EXPECT_EQ(heap[0], 'p') << "the child's write to its heap reached the parent's";
}

// The same, when a shorter MR from the same address was registered and deregistered after
// a longer one: the longer one's pages beyond it are still mapped shared.
TEST_P(ForkedChild, PagesOfALongerDeregisteredMrAreNotSharedWithTheChild) {
  std::string error;
  std::unique_ptr<Device> parent = Device::Open(GetParam().local, &error);
  ASSERT_TRUE(parent != nullptr) << error;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  constexpr size_t kPages = 3;
  char* memory = static_cast<char*>(std::aligned_alloc(page, kPages * page));
  ASSERT_NE(memory, nullptr);
  std::memset(memory, 'p', kPages * page);
  for (size_t pages : {kPages, size_t{1}}) {
    ibv_mr* mr = ibv_reg_mr(parent->pd(), memory, pages * page, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr) << strerror(errno);
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0) << strerror(errno);
  if (child == 0) {
    memory[(kPages - 1) * page] = 'c';
    _exit(0);
  }
  ASSERT_EQ(WaitChild(child), 0);
  EXPECT_EQ(memory[(kPages - 1) * page], 'p') << "the child's write to the last page reached the parent's";
  std::free(memory);
}

CONFORMANCE_INSTANTIATE(ForkedChild);

}  // namespace
}  // namespace conformance
