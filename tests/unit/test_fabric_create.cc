// softnic's fabric creation when processes start together: every process that creates or
// opens a fresh fabric at the same moment must end up in one and the same fabric. (Created
// in place, the fabric file was briefly unlocked and unfinished; a process starting beside
// its creator took it for a dead creator's leftover and replaced it, and the two handed out
// the same object ids: rdmalab-bench's three-process runs failed with ibv_open_device's
// EEXIST.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "softnic/fabric/fabric.h"
#include "softnic/fabric/layout.h"

namespace softnic {
namespace {

constexpr int kProcesses = 16;
constexpr int kRounds = 100;

// Each child waits on the pipe, attaches, counts itself in the header it mapped and exits 0;
// anything else exits non-zero.
int AttachAndCount(const std::string& fabric_name, int start_pipe) {
  char go;
  if (read(start_pipe, &go, 1) != 1) return 2;
  FabricOptions options;
  options.name = fabric_name;
  Fabric fabric;
  std::string error;
  if (!fabric.Attach(options, Fabric::Mode::kOpenOrCreate, &error)) {
    fprintf(stderr, "attach: %s\n", error.c_str());
    return 3;
  }
  fabric.header()->next_incarnation.fetch_add(1);
  return 0;
}

TEST(FabricCreate, ProcessesStartingTogetherShareOneFabric) {
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = "unit-create-" + std::to_string(getpid()) + "-" + std::to_string(round);
    int start[2];
    ASSERT_EQ(pipe(start), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
      pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        close(start[1]);
        _exit(AttachAndCount(name, start[0]));
      }
      children.push_back(child);
    }
    close(start[0]);
    const std::string go(kProcesses, 'g');  // releases every child at once
    ASSERT_EQ(write(start[1], go.data(), go.size()), kProcesses);
    close(start[1]);
    for (pid_t child : children) {
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round << ": a child failed";
    }
    FabricOptions options;
    options.name = name;
    Fabric fabric;
    std::string error;
    ASSERT_TRUE(fabric.Attach(options, Fabric::Mode::kOpenExisting, &error)) << error;
    EXPECT_EQ(fabric.header()->next_incarnation.load(), uint32_t{kProcesses})
        << "round " << round << ": some process counted itself in a fabric that was replaced";
    ASSERT_TRUE(RemoveFabric(name, &error)) << error;
  }
}

}  // namespace
}  // namespace softnic
