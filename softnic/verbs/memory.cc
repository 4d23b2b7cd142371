// Protection domains and memory registration.
//
// Private pages under a region move into shared-memory "anchor" objects: their contents
// are copied into a new object which is then mapped over the same virtual range
// (MAP_FIXED | MAP_SHARED). The owner keeps its addresses; a peer maps the same objects
// once, when it first meets the key, and from then on reaches the memory with plain loads
// and stores. Pages already anchored by an earlier registration are reused, never moved
// again, so overlapping registrations see one copy of the data. Pages that are already
// shared (SysV shm, shared file, memfd and hugetlbfs mappings) stay where they are and
// peers map their backing (backing.cc): a copy would cut the owner off from every other
// process and mapping that shares them.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
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

// Moves [start, end) into a new anchor object. Caller holds anchors_mutex.
bool CreateAnchor(Runtime* runtime, uintptr_t start, uintptr_t end, uint64_t* object_id) {
  size_t bytes = end - start;
  uint64_t id = runtime->NewObjectId();
  int fd = CreateObject(runtime->directory(), id, bytes);
  if (fd < 0) return false;
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
  void* map = mmap(reinterpret_cast<void*>(start), bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, fd, 0);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED) {
    RemoveObject(runtime->directory(), id);
    errno = err;
    return false;
  }
  *object_id = id;
  return true;
}

// Shared mappings of objects in the fabric directory are anchors of earlier registrations,
// deregistered since (or their pages reused by malloc): the owner's private memory, which
// no one else maps any more and which moves into a new anchor like any private page.
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

// Splits [page_begin, page_end) into runs that are anchored already, private (to be
// anchored; adjacent private mappings make one run) or shared. Caller holds anchors_mutex.
bool PlanPieces(Runtime* runtime, uintptr_t page_begin, uintptr_t page_end, const std::vector<Vma>& vmas,
                std::vector<Piece>* pieces) {
  auto& anchors = runtime->anchors;
  size_t v = 0;
  for (uintptr_t cursor = page_begin; cursor < page_end;) {
    auto it = anchors.upper_bound(cursor);
    if (it != anchors.begin() && std::prev(it)->second.end > cursor) {
      uintptr_t stop = std::min<uintptr_t>(std::prev(it)->second.end, page_end);
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
  mr->anchors.push_back(anchor_start);
}

// Fills the entry's segments for [page_begin, page_end): anchors for private pages, the
// backing itself for shared ones. What it took is in mr->anchors and mr->shared, also on
// failure.
bool FillSegments(Runtime* runtime, uintptr_t page_begin, uintptr_t page_end, MrEntry* entry, SoftMr* mr) {
  entry->segment_count = 0;
  if (page_begin == page_end) return true;
  std::lock_guard<std::mutex> lock(runtime->anchors_mutex);
  std::vector<Vma> vmas;
  if (!ReadMappings(page_begin, page_end, &vmas)) {
    int err = errno;
    Warn("ibv_reg_mr: cannot read /proc/self/maps: %s", std::strerror(err));
    errno = err;
    return false;
  }
  std::vector<Piece> pieces;
  if (!PlanPieces(runtime, page_begin, page_end, vmas, &pieces)) return false;
  // Nothing has changed yet, so a registration that cannot fit changes nothing.
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
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    if (piece.kind == Piece::kShared) continue;
    uintptr_t anchor_start = piece.start;
    if (piece.kind == Piece::kAnchored) {
      anchor_start = std::prev(runtime->anchors.upper_bound(piece.start))->first;
    } else {
      uint64_t id = 0;
      if (!CreateAnchor(runtime, piece.start, piece.end, &id)) return false;
      runtime->anchors.emplace(piece.start, Anchor{piece.end, id, 0});
      // Unnamed ranges inside the new anchor are mapped anew: nothing of them to copy at fork.
      auto& unnamed = runtime->unnamed_anchors;
      for (auto it = unnamed.lower_bound(piece.start); it != unnamed.end() && it->first < piece.end;) {
        it = it->second <= piece.end ? unnamed.erase(it) : std::next(it);
      }
    }
    FillAnchorSegment(runtime, anchor_start, piece, &entry->segments[i], mr);
  }
  entry->segment_count = uint32_t(pieces.size());
  return true;
}

void ReleaseBackings(Runtime* runtime, const SoftMr& mr) {
  std::lock_guard<std::mutex> lock(runtime->anchors_mutex);
  for (uintptr_t start : mr.anchors) {
    auto it = runtime->anchors.find(start);
    if (it == runtime->anchors.end() || --it->second.references > 0) continue;
    // The pages stay mapped for the owner; only the name goes, so no new peer can map it.
    RemoveObject(runtime->directory(), it->second.object_id);
    // An earlier, longer anchor from the same start may still be mapped beyond this one.
    uintptr_t& unnamed_end = runtime->unnamed_anchors[start];
    unnamed_end = std::max(unnamed_end, it->second.end);
    runtime->anchors.erase(it);
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

// Replaces [start, end) by a private copy of itself.
void MakePrivate(uintptr_t start, uintptr_t end) {
  size_t bytes = end - start;
  void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return;
  std::memcpy(copy, reinterpret_cast<void*>(start), bytes);
  mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(start));
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
}  // namespace

void PrepareForkAnchors() {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) return;
  runtime->anchors_mutex.lock();
  // Ranges unmapped since their anchor went (freed buffers) are nothing to copy any more.
  std::erase_if(runtime->unnamed_anchors, [](const auto& range) { return !MappedThroughout(range.first, range.second); });
  // The parent waits until the child has copied the shared pages, so that it copies them
  // as they were at the fork.
  const bool shared_pages = !runtime->anchors.empty() || !runtime->unnamed_anchors.empty();
  if (shared_pages && pipe2(g_fork_pipe, O_CLOEXEC) != 0) g_fork_pipe[0] = g_fork_pipe[1] = -1;
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
  runtime->anchors_mutex.unlock();
}

void ChildAfterForkAnchors() {
  Runtime* runtime = Runtime::Get();
  if (runtime == nullptr) return;
  // Every copy before any allocation or free: until then the heap may be the parent's too.
  for (const auto& [start, anchor] : runtime->anchors) MakePrivate(start, anchor.end);
  // An unnamed anchor's range may have been unmapped since; a range mapped again as
  // private memory is copied onto itself, which changes nothing.
  for (const auto& [start, end] : runtime->unnamed_anchors) {
    if (MappedThroughout(start, end)) MakePrivate(start, end);
  }
  runtime->anchors.clear();
  runtime->unnamed_anchors.clear();
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
