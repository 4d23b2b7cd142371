// Features a provider may leave out are either there or refused the same way every time,
// with EOPNOTSUPP, never EINVAL (which says the caller erred): memory windows (ibv_reg_mr
// with IBV_ACCESS_MW_BIND, ibv_alloc_mw), ibv_resize_cq. A context's cmd_fd is a descriptor
// a program can dup, as for importing the context into another process.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "verbs_fixture.h"

namespace conformance {
namespace {

constexpr size_t kBufferBytes = 4096;
constexpr int kCqEntries = 16;

class OptionalFeatures : public VerbsTest {};

TEST_P(OptionalFeatures, MemoryWindowsThereOrNotSupported) {
  void* memory = std::aligned_alloc(kBufferBytes, kBufferBytes);
  ASSERT_NE(memory, nullptr);
  errno = 0;
  MrPtr mr(ibv_reg_mr(local().pd(), memory, kBufferBytes,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND));
  const int reg_errno = errno;
  if (mr == nullptr) {
    EXPECT_EQ(reg_errno, EOPNOTSUPP) << "ibv_reg_mr(IBV_ACCESS_MW_BIND): " << strerror(reg_errno);
  }
  for (ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
    errno = 0;
    ibv_mw* mw = ibv_alloc_mw(local().pd(), type);
    if (mw == nullptr) {
      EXPECT_EQ(errno, EOPNOTSUPP) << "ibv_alloc_mw(type " << type << "): " << strerror(errno);
    } else {
      EXPECT_EQ(ibv_dealloc_mw(mw), 0);
    }
  }
  mr.reset();
  std::free(memory);
}

TEST_P(OptionalFeatures, ResizeCqThereOrAlwaysNotSupported) {
  CqPtr cq(ibv_create_cq(local().ctx(), kCqEntries, nullptr, nullptr, 0));
  ASSERT_TRUE(cq != nullptr) << strerror(errno);
  int refused = 0;
  const int sizes[] = {kCqEntries / 2, kCqEntries, 64 * kCqEntries};
  for (int entries : sizes) {
    const int rc = ibv_resize_cq(cq.get(), entries);
    if (rc == 0) {
      EXPECT_GE(cq->cqe, entries) << "ibv_resize_cq(" << entries << ") succeeded with a smaller CQ";
    } else {
      EXPECT_EQ(rc, EOPNOTSUPP) << "ibv_resize_cq(" << entries << "): " << strerror(rc);
      ++refused;
    }
  }
  EXPECT_TRUE(refused == 0 || refused == int(std::size(sizes)))
      << "ibv_resize_cq refused " << refused << " of " << std::size(sizes) << " sizes: implement it, or refuse each";
}

TEST_P(OptionalFeatures, CmdFdCanBeDuplicated) {
  const int fd = dup(local().ctx()->cmd_fd);
  ASSERT_GE(fd, 0) << "dup(cmd_fd " << local().ctx()->cmd_fd << "): " << strerror(errno);
  errno = 0;
  ibv_context* imported = ibv_import_device(fd);
  if (imported == nullptr) {
    EXPECT_EQ(errno, EOPNOTSUPP) << "ibv_import_device: " << strerror(errno);
    close(fd);
  } else {
    ibv_close_device(imported);  // owns fd
  }
}

CONFORMANCE_INSTANTIATE(OptionalFeatures);

}  // namespace
}  // namespace conformance
