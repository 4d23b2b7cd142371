// Protection domains and memory registration.
//
// Private pages under a region become shareable the first time a registration covers
// them: their contents are copied into a new "anchor" object which is then mapped over
// the same virtual range (MAP_FIXED | MAP_SHARED). The owner keeps its addresses and its
// data; a peer maps the same object once, when it first meets the key, and from then on
// reaches the memory with plain loads and stores. An anchor outlives the MRs that use it:
// a later registration of its pages, and every deregistration, changes no mapping at all,
// so MPI's and UCX's registration caches, which drop an entry when its pages are unmapped
// or remapped, keep theirs. The one remap goes straight to the kernel (syscall(2)), not
// through libc's mmap, which those caches' hooks (UCX's UCM, Open MPI's patcher, an
// LD_PRELOAD interposer) intercept: the pages keep their addresses, access and contents,
// so it is no event of the program's. Pages that are already shared (SysV shm, shared
// file, memfd and hugetlbfs mappings) stay where they are and peers map their backing
// (backing.cc): a copy would cut the owner off from every other process and mapping that
// shares them.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "softnic/fabric/object.h"
#include "softnic/verbs/backing.h"
#include "softnic/verbs/internal.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace softnic {
namespace {

constexpr uint32_t kSupportedAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                      IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE;

// Remote write and atomic access need local write too (IB spec, as every provider checks).
bool ValidAccess(unsigned access) {
  return (access & ~kSupportedAccess) == 0 &&
         (!(access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) || (access & IBV_ACCESS_LOCAL_WRITE));
}

// 0, or the errno that refuses `access`, with a warning that names `verb`: EOPNOTSUPP for
// memory-window binding, which softnic does not implement (ibv_alloc_mw fails alike).
int AccessError(unsigned access, const char* verb) {
  if (access & IBV_ACCESS_MW_BIND) {
    Warn("%s: access %#x has IBV_ACCESS_MW_BIND: softnic has no memory windows", verb, access);
    return EOPNOTSUPP;
  }
  if (ValidAccess(access)) return 0;
  Warn("%s: access %#x: valid are IBV_ACCESS_LOCAL_WRITE, _REMOTE_WRITE, _REMOTE_READ, _REMOTE_ATOMIC, "
       "_RELAXED_ORDERING and _OPTIONAL_RANGE, remote write or atomic only with local write",
       verb, access);
  return EINVAL;
}

uintptr_t PageDown(uintptr_t address) { return address & ~(uintptr_t{kPageBytes} - 1); }
uintptr_t PageUp(uintptr_t address) { return PageDown(address + kPageBytes - 1); }

// mmap(2) and mremap(2) without libc's wrappers, for the remaps of the program's own pages
// that keep its addresses and contents: memory hooks must not take them for the program's.
void* KernelMmap(uintptr_t at, size_t bytes, int prot, int flags, int fd) {
  return reinterpret_cast<void*>(syscall(SYS_mmap, at, bytes, long{prot}, long{flags}, long{fd}, 0L));
}
void* KernelMremap(uintptr_t from, size_t bytes, uintptr_t to) {
  return reinterpret_cast<void*>(syscall(SYS_mremap, from, bytes, bytes, long{MREMAP_MAYMOVE | MREMAP_FIXED}, to));
}

// Moves [start, end) into a new anchor object. Caller holds anchors_mutex.
bool CreateAnchor(Runtime* runtime, uintptr_t start, uintptr_t end, Anchor* anchor) {
  size_t bytes = end - start;
  uint64_t id = runtime->NewObjectId();
  int fd = CreateObject(runtime->directory(), id, bytes);
  if (fd < 0) return false;
  // Before the copy: a store to the range between the copy and the mapping would be lost.
  struct stat status;
  if (fstat(fd, &status) != 0) {
    int err = errno;
    close(fd);
    RemoveObject(runtime->directory(), id);
    errno = err;
    return false;
  }
  // pwrite reads the old pages through the kernel: a range that is not mapped fails with
  // EFAULT here instead of crashing the caller.
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pwrite(fd, reinterpret_cast<const void*>(start + done), bytes - done, off_t(done));
    if (n <= 0) {
      int err = n < 0 ? errno : EFAULT;
      close(fd);
      RemoveObject(runtime->directory(), id);
      errno = err;
      return false;
    }
    done += size_t(n);
  }
  void* map = KernelMmap(start, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED) {
    RemoveObject(runtime->directory(), id);
    errno = err;
    return false;
  }
  *anchor = Anchor{end, id, status.st_dev, status.st_ino, 0};
  return true;
}

constexpr int kNoMapsQuery = -2;  // Runtime::maps_fd once the kernel proved it has no PROCMAP_QUERY

// The mappings of [begin, end), through the process's own held /proc/self/maps. Caller
// holds anchors_mutex.
bool ReadOwnMappings(Runtime* runtime, uintptr_t begin, uintptr_t end, std::vector<Vma>* vmas) {
  const bool fresh = runtime->maps_fd == -1;
  if (fresh) runtime->maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (runtime->maps_fd >= 0 && QueryMappings(begin, end, vmas, runtime->maps_fd)) return true;
  if (fresh && runtime->maps_fd >= 0) {
    close(runtime->maps_fd);
    runtime->maps_fd = kNoMapsQuery;
  } else if (runtime->maps_fd != kNoMapsQuery) {
    // A descriptor that answered before and fails now was closed by the program, and its
    // number may name a file of the program's: forget it, never close it.
    runtime->maps_fd = -1;
  }
  vmas->clear();
  return ParseMappings(begin, end, vmas);
}

bool MapsObject(const Vma& vma, uint64_t device, uint64_t inode) {
  return vma.shared && vma.device == device && vma.inode == inode;
}

// Appends the parts of [start, end) that still map the object (device, inode).
bool ObjectParts(Runtime* runtime, uintptr_t start, uintptr_t end, uint64_t device, uint64_t inode,
                 std::vector<ForkCopy>* parts) {
  std::vector<Vma> vmas;
  if (!ReadOwnMappings(runtime, start, end, &vmas)) return false;
  for (const Vma& vma : vmas) {
    if (!MapsObject(vma, device, inode)) continue;
    uintptr_t from = std::max(vma.start, start), to = std::min(vma.end, end);
    if (!parts->empty() && parts->back().end == from) {
      parts->back().end = to;
    } else {
      parts->push_back(ForkCopy{from, to});
    }
  }
  return true;
}

// Ends the anchor at `it`, which no MR uses: its name goes, so no peer can map it any more,
// and what of its range still maps the object is remembered for fork. Caller holds
// anchors_mutex.
std::map<uintptr_t, Anchor>::iterator RetireAnchor(Runtime* runtime, std::map<uintptr_t, Anchor>::iterator it,
                                                    bool still_mapped) {
  const Anchor& anchor = it->second;
  RemoveObject(runtime->directory(), anchor.object_id);
  if (still_mapped) {
    runtime->retired_anchors.push_back(RetiredAnchor{it->first, anchor.end, anchor.device, anchor.inode});
  }
  return runtime->anchors.erase(it);
}

constexpr size_t kMinAnchorSweep = 64;

// Counts a registration that made anchors, and once as many came since the last sweep as
// anchors were left by it, retires the idle anchors whose range the program has unmapped or
// replaced (freed buffers) and forgets retired ranges no longer mapped: /dev/shm holds the
// pages of freed memory at most until then, at an amortized cost per registration that does
// not grow with the anchors. Caller holds anchors_mutex.
void SweepAnchors(Runtime* runtime) {
  if (++runtime->anchors_made < runtime->anchor_sweep_at) return;
  std::vector<ForkCopy> parts;
  for (auto it = runtime->anchors.begin(); it != runtime->anchors.end();) {
    const Anchor& anchor = it->second;
    parts.clear();
    if (anchor.references != 0 || !ObjectParts(runtime, it->first, anchor.end, anchor.device, anchor.inode, &parts)) {
      ++it;
    } else if (parts.size() == 1 && parts[0].start == it->first && parts[0].end == anchor.end) {
      ++it;
    } else {
      it = RetireAnchor(runtime, it, !parts.empty());
    }
  }
  std::erase_if(runtime->retired_anchors, [&](const RetiredAnchor& retired) {
    parts.clear();
    return ObjectParts(runtime, retired.start, retired.end, retired.device, retired.inode, &parts) && parts.empty();
  });
  runtime->anchors_made = 0;
  runtime->anchor_sweep_at = std::max(kMinAnchorSweep, runtime->anchors.size() + runtime->retired_anchors.size());
}

// Shared mappings of objects in the fabric directory that are no anchor of ours are retired
// anchors: the owner's private memory, which no one else maps any more and which moves into
// a new anchor like any private page.
bool IsPrivate(const Vma& vma, const std::string& directory) {
  return !vma.shared || (vma.path.size() > directory.size() && vma.path.compare(0, directory.size(), directory) == 0 &&
                         vma.path[directory.size()] == '/');
}

// A run of the registered pages and what holds it.
struct Piece {
  enum Kind : uint8_t { kAnchored, kPrivate, kShared } kind;
  uintptr_t start;
  uintptr_t end;
  const Vma* vma;  // kShared: the mapping it lies in
};

// Whether [start, end) maps the anchor's object throughout, by `vmas` (in address order).
bool AnchorMapped(const Anchor& anchor, uintptr_t start, uintptr_t end, const std::vector<Vma>& vmas) {
  uintptr_t covered = start;
  for (const Vma& vma : vmas) {
    if (vma.end <= covered) continue;
    if (vma.start > covered || !MapsObject(vma, anchor.device, anchor.inode)) return false;
    covered = vma.end;
    if (covered >= end) return true;
  }
  return false;
}

// Splits [page_begin, page_end) into runs that are anchored already, private (to be
// anchored; adjacent private mappings make one run) or shared. An anchor that no MR uses
// and whose pages the program has since unmapped or replaced is retired, and with
// `merge_idle` every anchor that no MR uses, so that its pages join one new anchor with
// their neighbours. Caller holds anchors_mutex.
bool PlanPieces(Runtime* runtime, uintptr_t page_begin, uintptr_t page_end, const std::vector<Vma>& vmas,
                bool merge_idle, std::vector<Piece>* pieces) {
  auto& anchors = runtime->anchors;
  size_t v = 0;
  for (uintptr_t cursor = page_begin; cursor < page_end;) {
    auto it = anchors.upper_bound(cursor);
    if (it != anchors.begin() && std::prev(it)->second.end > cursor) {
      auto at = std::prev(it);
      uintptr_t stop = std::min<uintptr_t>(at->second.end, page_end);
      if (at->second.references == 0 && (merge_idle || !AnchorMapped(at->second, cursor, stop, vmas))) {
        RetireAnchor(runtime, at, true);
        continue;
      }
      pieces->push_back(Piece{Piece::kAnchored, cursor, stop, nullptr});
      cursor = stop;
      continue;
    }
    uintptr_t limit = it == anchors.end() ? page_end : std::min<uintptr_t>(it->first, page_end);
    while (v < vmas.size() && vmas[v].end <= cursor) ++v;
    if (v == vmas.size() || vmas[v].start > cursor) {
      Warn("ibv_reg_mr: page %#" PRIxPTR " of the region [%#" PRIxPTR ", %#" PRIxPTR ") is not mapped", cursor,
           page_begin, page_end);
      errno = EFAULT;
      return false;
    }
    const Vma& vma = vmas[v];
    const std::string& directory = runtime->directory();
    bool private_run = IsPrivate(vma, directory);
    uintptr_t stop = std::min<uintptr_t>(vma.end, limit);
    for (size_t w = v + 1; private_run && stop < limit && w < vmas.size() && vmas[w].start == stop &&
                           IsPrivate(vmas[w], directory);
         ++w) {
      stop = std::min<uintptr_t>(vmas[w].end, limit);
    }
    pieces->push_back(Piece{private_run ? Piece::kPrivate : Piece::kShared, cursor, stop, &vma});
    cursor = stop;
  }
  return true;
}

void FillAnchorSegment(Runtime* runtime, uintptr_t anchor_start, const Piece& piece, MrSegment* segment,
                       SoftMr* mr) {
  Anchor& anchor = runtime->anchors[anchor_start];
  segment->backing = Backing::kAnchor;
  segment->id = anchor.object_id;
  segment->offset = piece.start - anchor_start;
  segment->bytes = piece.end - piece.start;
  segment->lead = segment->trail = 0;
  segment->page_shift = 0;
  anchor.references++;
  mr->anchors.emplace_back(anchor_start, anchor.object_id);
}

// Fills the entry's segments for [page_begin, page_end): anchors for private pages, the
// backing itself for shared ones. What it took is in mr->anchors and mr->shared, also on
// failure.
bool FillSegments(Runtime* runtime, uintptr_t page_begin, uintptr_t page_end, MrEntry* entry, SoftMr* mr) {
  entry->segment_count = 0;
  if (page_begin == page_end) return true;
  std::lock_guard<std::mutex> lock(runtime->anchors_mutex);
  std::vector<Vma> vmas;
  if (!ReadOwnMappings(runtime, page_begin, page_end, &vmas)) {
    int err = errno;
    Warn("ibv_reg_mr: cannot read /proc/self/maps: %s", std::strerror(err));
    errno = err;
    return false;
  }
  std::vector<Piece> pieces;
  if (!PlanPieces(runtime, page_begin, page_end, vmas, false, &pieces)) return false;
  if (pieces.size() > kMaxMrSegments) {
    pieces.clear();
    if (!PlanPieces(runtime, page_begin, page_end, vmas, true, &pieces)) return false;
  }
  // No page has moved yet, so a registration that cannot fit changes no mapping.
  if (pieces.size() > kMaxMrSegments) {
    errno = ENOMEM;
    Warn("ibv_reg_mr: range [%#" PRIxPTR ", %#" PRIxPTR ") comes in %zu pieces (earlier registrations, private "
         "and shared mappings); at most %u fit",
         page_begin, page_end, pieces.size(), kMaxMrSegments);
    return false;
  }
  // Shared pieces first: they fail without having moved any page.
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    if (piece.kind != Piece::kShared) continue;
    MrSegment& segment = entry->segments[i];
    BackingKey key;
    if (!HoldSharedBacking(runtime, *piece.vma, piece.start, piece.end, &segment, &key)) return false;
    mr->shared.push_back(key);
    if ((i > 0 && segment.lead != 0) || (i + 1 < pieces.size() && segment.trail != 0)) {
      Warn("ibv_reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") covers part of %s '%s' with other memory of the region "
           "on both sides; peers map %s whole, so a region may cut one only at its first or last page",
           piece.start, piece.end, segment.backing == Backing::kSysv ? "SysV segment" : "a huge page of",
           piece.vma->path.c_str(), segment.backing == Backing::kSysv ? "SysV segments" : "huge pages");
      errno = EINVAL;
      return false;
    }
  }
  bool anchored = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    if (piece.kind == Piece::kShared) continue;
    uintptr_t anchor_start = piece.start;
    if (piece.kind == Piece::kAnchored) {
      anchor_start = std::prev(runtime->anchors.upper_bound(piece.start))->first;
    } else {
      Anchor anchor;
      if (!CreateAnchor(runtime, piece.start, piece.end, &anchor)) return false;
      runtime->anchors.emplace(piece.start, anchor);
      anchored = true;
    }
    FillAnchorSegment(runtime, anchor_start, piece, &entry->segments[i], mr);
  }
  entry->segment_count = uint32_t(pieces.size());
  if (anchored) SweepAnchors(runtime);
  return true;
}

// Anchors stay, mapped and named, when their last MR goes: a NIC's deregistration leaves the
// pages as they are, and a registration cache re-registers the same buffers.
void ReleaseBackings(Runtime* runtime, const SoftMr& mr) {
  std::lock_guard<std::mutex> lock(runtime->anchors_mutex);
  for (const auto& [start, object_id] : mr.anchors) {
    auto it = runtime->anchors.find(start);
    if (it != runtime->anchors.end() && it->second.object_id == object_id) it->second.references--;
  }
  for (const BackingKey& key : mr.shared) ReleaseSharedBacking(runtime, key);
}

int32_t ClaimMrIndex(DeviceEntry* device) {
  for (uint32_t i = 0; i < kMaxMrsPerDevice; ++i) {
    uint32_t expected = 0;
    if (device->mrs[i].key.compare_exchange_strong(expected, kEntryReserved)) return int32_t(i);
  }
  return -1;
}

ibv_mr* RegisterMr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (int err = AccessError(access, "ibv_reg_mr"); err != 0) {
    errno = err;
    return nullptr;
  }
  if (addr == nullptr && length != 0) {
    errno = EFAULT;
    return nullptr;
  }
  Runtime* runtime = Runtime::Get();
  SoftContext* context = ToSoft(pd->context);
  DeviceEntry* device = context->device;
  int32_t index = ClaimMrIndex(device);
  if (index < 0) {
    errno = ENOMEM;
    return nullptr;
  }
  MrEntry& entry = device->mrs[index];
  uint64_t generation = BeginMrChange(*runtime->fabric(), entry);
  auto* mr = new SoftMr{};
  uintptr_t start = reinterpret_cast<uintptr_t>(addr);
  uintptr_t page_begin = PageDown(start);
  uintptr_t page_end = length == 0 ? page_begin : PageUp(start + length);
  if (!FillSegments(runtime, page_begin, page_end, &entry, mr)) {
    int err = errno;
    ReleaseBackings(runtime, *mr);
    EndMrChange(*runtime->fabric(), entry);
    entry.key.store(0, std::memory_order_release);
    delete mr;
    errno = err;
    return nullptr;
  }
  entry.access = access;
  entry.pd_id = ToSoft(pd)->pd_id;
  entry.owner_slot = runtime->self().slot;
  entry.owner_incarnation = runtime->self().incarnation;
  entry.addr = iova;
  entry.length = length;
  entry.page_base = page_begin;
  entry.va = start;
  entry.translation_generation = generation;
  EndMrChange(*runtime->fabric(), entry);
  uint32_t key;
  do {
    key = (runtime->RandomBits() << kMrIndexBits) | uint32_t(index);
  } while (key == 0 || key == kEntryReserved);
  entry.key.store(key, std::memory_order_release);

  mr->index = uint32_t(index);
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = uint32_t(index);
  mr->mr.lkey = key;
  mr->mr.rkey = key;
  return &mr->mr;
}

}  // namespace

// fork() semantics of a modern kernel, which copies pinned pages into the child inside
// fork(): the child gets private copies of every anchored range instead of sharing them
// with the parent (and every peer). The parent holds anchors_mutex across fork, so the map
// is whole, and waits until the child has copied, so its own later writes stay its own.
namespace {
int g_fork_pipe[2] = {-1, -1};
constexpr int kForkCopyWaitMs = 10000;

// Replaces [start, end) by a private copy of itself, past memory hooks as CreateAnchor maps.
void MakePrivate(uintptr_t start, uintptr_t end) {
  size_t bytes = end - start;
  void* copy = KernelMmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  if (copy == MAP_FAILED) return;
  std::memcpy(copy, reinterpret_cast<void*>(start), bytes);
  KernelMremap(reinterpret_cast<uintptr_t>(copy), bytes, start);
}

// Whether [start, end) is mapped throughout (mincore fails with ENOMEM on a hole); no
// allocation, since the heap may not be private yet.
bool MappedThroughout(uintptr_t start, uintptr_t end) {
  constexpr size_t kPagesPerCall = 64;
  unsigned char resident[kPagesPerCall];
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  for (uintptr_t at = start; at < end; at += kPagesPerCall * page) {
    const size_t bytes = std::min<size_t>(end - at, kPagesPerCall * page);
    if (mincore(reinterpret_cast<void*>(at), bytes, resident) != 0) return false;
  }
  return true;
}

// Adds what of [start, end) maps the object to the child's copies; the whole range, where
// the mappings cannot be read, for the child to copy if it is mapped at all.
void PlanForkCopy(Runtime* runtime, uintptr_t start, uintptr_t end, uint64_t device, uint64_t inode) {
  if (!ObjectParts(runtime, start, end, device, inode, &runtime->fork_copies)) {
    runtime->fork_copies.push_back(ForkCopy{start, end});
  }
}
}  // namespace

void PrepareForkAnchors() {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) return;
  runtime->anchors_mutex.lock();
  runtime->fork_copies.clear();
  for (const auto& [start, anchor] : runtime->anchors) {
    PlanForkCopy(runtime, start, anchor.end, anchor.device, anchor.inode);
  }
  for (const RetiredAnchor& retired : runtime->retired_anchors) {
    PlanForkCopy(runtime, retired.start, retired.end, retired.device, retired.inode);
  }
  // The parent waits until the child has copied the shared pages, so that it copies them
  // as they were at the fork.
  if (!runtime->fork_copies.empty() && pipe2(g_fork_pipe, O_CLOEXEC) != 0) g_fork_pipe[0] = g_fork_pipe[1] = -1;
}

void ParentAfterForkAnchors() {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) return;
  if (g_fork_pipe[0] >= 0) {
    close(g_fork_pipe[1]);  // without a child, the read below sees end-of-file at once
    pollfd done{g_fork_pipe[0], POLLIN, 0};
    char byte;
    if (poll(&done, 1, kForkCopyWaitMs) > 0) [[maybe_unused]] ssize_t n = read(g_fork_pipe[0], &byte, 1);
    close(g_fork_pipe[0]);
    g_fork_pipe[0] = g_fork_pipe[1] = -1;
  }
  runtime->fork_copies.clear();
  runtime->anchors_mutex.unlock();
}

void ChildAfterForkAnchors() {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) return;
  // Every copy before any allocation or free: until then the heap may be the parent's too.
  for (const ForkCopy& copy : runtime->fork_copies) {
    if (MappedThroughout(copy.start, copy.end)) MakePrivate(copy.start, copy.end);
  }
  runtime->fork_copies.clear();
  runtime->anchors.clear();
  runtime->retired_anchors.clear();
  runtime->anchors_made = 0;
  runtime->anchor_sweep_at = 0;
  // It reads the parent's mappings, not the child's.
  if (runtime->maps_fd >= 0) close(runtime->maps_fd);
  runtime->maps_fd = -1;
  if (g_fork_pipe[1] >= 0) {
    [[maybe_unused]] ssize_t n = write(g_fork_pipe[1], "c", 1);
    close(g_fork_pipe[0]);
    close(g_fork_pipe[1]);
    g_fork_pipe[0] = g_fork_pipe[1] = -1;
  }
  runtime->anchors_mutex.unlock();
}

}  // namespace softnic

using namespace softnic;

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  Runtime* runtime = Runtime::Get();
  auto* pd = new SoftPd{};
  pd->pd.context = context;
  pd->pd_id = runtime->fabric()->next_pd_id.fetch_add(1) + 1;
  pd->pd.handle = pd->pd_id;
  return &pd->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  delete ToSoft(pd);
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return RegisterMr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return RegisterMr(pd, addr, length, iova, unsigned(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  return RegisterMr(pd, addr, length, iova, access);
}

int ibv_dereg_mr(ibv_mr* mr) {
  SoftMr* soft = ToSoft(mr);
  Runtime* runtime = Runtime::Get();
  ClearMrEntry(*runtime->fabric(), ToSoft(mr->context)->device->mrs[soft->index]);
  ReleaseBackings(runtime, *soft);
  delete soft;
  return 0;
}

// rdma-core's argument checks (libibverbs/verbs.c), then one change of the entry: every
// translation of the region cached anywhere dies with it, before this returns. A new range
// is registered first, as reg_mr registers one (private pages anchored, shared ones held
// with their backing), so that a failure leaves the registration as it was; the old
// range's anchors and backings are released only once the entry names the new one. The
// keys stay.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  SoftMr* soft = ToSoft(mr);
  MrEntry& entry = ToSoft(mr->context)->device->mrs[soft->index];
  bool translation = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  const char* invalid = nullptr;
  if ((flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) != 0) {
    invalid = "flags has bits outside IBV_REREG_MR_CHANGE_TRANSLATION | _PD | _ACCESS";
  } else if (translation && (addr == nullptr || length == 0)) {
    invalid = "IBV_REREG_MR_CHANGE_TRANSLATION needs a non-null addr and a non-zero length";
  } else if (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) {
    invalid = "access is non-zero without IBV_REREG_MR_CHANGE_ACCESS";
  } else if ((flags & IBV_REREG_MR_CHANGE_PD) && (pd == nullptr || pd->context != mr->context)) {
    invalid = "IBV_REREG_MR_CHANGE_PD needs a PD of the MR's own context";
  }
  if (invalid != nullptr) {
    Warn("ibv_rereg_mr(flags %#x, access %#x): %s", unsigned(flags), unsigned(access), invalid);
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (int err = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? AccessError(unsigned(access), "ibv_rereg_mr") : 0) {
    errno = err;
    return IBV_REREG_MR_ERR_INPUT;
  }
  Runtime* runtime = Runtime::Get();
  MrEntry staged;
  SoftMr held{};  // what the new range holds: its anchors and shared backings
  uintptr_t start = reinterpret_cast<uintptr_t>(addr);
  if (translation && !FillSegments(runtime, PageDown(start), PageUp(start + length), &staged, &held)) {
    int err = errno;
    ReleaseBackings(runtime, held);
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  }
  uint64_t generation = BeginMrChange(*runtime->fabric(), entry);
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) entry.access = unsigned(access);
  if (flags & IBV_REREG_MR_CHANGE_PD) entry.pd_id = ToSoft(pd)->pd_id;
  if (translation) {
    entry.segment_count = staged.segment_count;
    std::copy(staged.segments, staged.segments + staged.segment_count, entry.segments);
    entry.addr = start;
    entry.length = length;
    entry.va = start;
    entry.page_base = PageDown(start);
    entry.translation_generation = generation;
  }
  EndMrChange(*runtime->fabric(), entry);
  if (translation) {
    ReleaseBackings(runtime, *soft);
    soft->anchors = std::move(held.anchors);
    soft->shared = std::move(held.shared);
    mr->addr = addr;
    mr->length = length;
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) mr->pd = pd;
  return 0;
}

}  // extern "C"
