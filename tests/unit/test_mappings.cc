// softnic's view of a process's mappings (softnic/verbs/mappings.h): the kernel's answer to
// PROCMAP_QUERY and the text of /proc/self/maps describe the same mappings, so the text
// parser, which only kernels before 6.11 use, stays right; a shared mapping split by
// mprotect reads as one piece of its backing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "softnic/verbs/mappings.h"

namespace softnic {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kBytes = 8 * kPageBytes;

void ExpectSame(const std::vector<Vma>& queried, const std::vector<Vma>& parsed) {
  ASSERT_EQ(queried.size(), parsed.size());
  for (size_t i = 0; i < queried.size(); ++i) {
    const Vma& q = queried[i];
    const Vma& p = parsed[i];
    EXPECT_EQ(q.start, p.start) << "mapping " << i;
    EXPECT_EQ(q.end, p.end) << "mapping " << i;
    EXPECT_EQ(q.first_end, p.first_end) << "mapping " << i;
    EXPECT_EQ(q.offset, p.offset) << "mapping " << i;
    EXPECT_EQ(q.device, p.device) << "mapping " << i;
    EXPECT_EQ(q.inode, p.inode) << "mapping " << i;
    EXPECT_EQ(q.shared, p.shared) << "mapping " << i;
    EXPECT_EQ(q.writable, p.writable) << "mapping " << i;
    EXPECT_EQ(q.path, p.path) << "mapping " << i;
  }
}

TEST(Mappings, QueryAndTextAgree) {
  // Side by side in one reservation: private anonymous, a SysV segment split by mprotect,
  // a memfd at a file offset, a read-only private view of the same memfd.
  auto* base = static_cast<uint8_t*>(mmap(nullptr, 4 * kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_EQ(mmap(base, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), base);
  int shmid = shmget(IPC_PRIVATE, kBytes, IPC_CREAT | 0600);
  ASSERT_GE(shmid, 0);
  ASSERT_EQ(shmat(shmid, base + kBytes, SHM_REMAP), base + kBytes);
  shmctl(shmid, IPC_RMID, nullptr);
  ASSERT_EQ(mprotect(base + kBytes, kPageBytes, PROT_READ), 0);
  int fd = memfd_create("mappings-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 2 * kBytes), 0);
  ASSERT_EQ(mmap(base + 2 * kBytes, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, kBytes),
            base + 2 * kBytes);
  ASSERT_EQ(mmap(base + 3 * kBytes, kBytes, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0), base + 3 * kBytes);

  auto begin = reinterpret_cast<uintptr_t>(base);
  std::vector<Vma> queried, parsed;
  if (!QueryMappings(begin, begin + 4 * kBytes, &queried)) GTEST_SKIP() << "the kernel has no PROCMAP_QUERY";
  ASSERT_TRUE(ParseMappings(begin, begin + 4 * kBytes, &parsed));
  ExpectSame(queried, parsed);
  // Through a descriptor the caller holds (registration keeps one), and it stays open.
  int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(maps, 0);
  for (int round = 0; round < 2; ++round) {
    std::vector<Vma> held;
    ASSERT_TRUE(QueryMappings(begin, begin + 4 * kBytes, &held, maps));
    ExpectSame(held, parsed);
  }
  close(maps);

  // The SysV segment's two lines (read-only first page, writable rest) stay two pieces.
  ASSERT_EQ(parsed.size(), 5u);
  EXPECT_FALSE(parsed[0].shared);
  EXPECT_EQ(parsed[1].inode, uint64_t(shmid));
  EXPECT_FALSE(parsed[1].writable);
  EXPECT_EQ(parsed[2].offset, kPageBytes);
  EXPECT_TRUE(parsed[3].shared);
  EXPECT_EQ(parsed[3].offset, kBytes);
  struct stat status;
  ASSERT_EQ(fstat(fd, &status), 0);
  EXPECT_EQ(parsed[3].inode, status.st_ino);
  EXPECT_EQ(parsed[3].device, status.st_dev);
  EXPECT_FALSE(parsed[4].shared);

  // MADV_DONTFORK on a middle page splits the segment's mapping into three lines the
  // kernel does not merge, with the same permissions: they read as one mapping, named
  // (for /proc/self/map_files) by its first line.
  ASSERT_EQ(mprotect(base + kBytes, kPageBytes, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(madvise(base + kBytes + kPageBytes, kPageBytes, MADV_DONTFORK), 0);
  queried.clear();
  parsed.clear();
  ASSERT_TRUE(QueryMappings(begin + kBytes, begin + 2 * kBytes, &queried));
  ASSERT_TRUE(ParseMappings(begin + kBytes, begin + 2 * kBytes, &parsed));
  ExpectSame(queried, parsed);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].start, begin + kBytes);
  EXPECT_EQ(parsed[0].first_end, begin + kBytes + kPageBytes);
  EXPECT_EQ(parsed[0].end, begin + 2 * kBytes);
  EXPECT_TRUE(parsed[0].shared && parsed[0].writable);

  shmdt(base + kBytes);
  munmap(base, 4 * kBytes);
  close(fd);
}

}  // namespace
}  // namespace softnic
