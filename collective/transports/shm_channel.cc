#include "collective/transports/shm_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cohort::collective {
namespace {

constexpr absl::string_view kRingPrefix = "cohort-";

// The inode of this process's pid namespace ("pid:[4026531836]"), so that
// processes of another namespace sharing /dev/shm never judge our pids.
std::string PidNamespace() {
  char link[64] = {};
  if (readlink("/proc/self/ns/pid", link, sizeof(link) - 1) < 0) return "0";
  absl::string_view text(link);
  absl::ConsumePrefix(&text, "pid:[");
  absl::ConsumeSuffix(&text, "]");
  return std::string(text);
}

}  // namespace

std::string RingName(absl::string_view tag) {
  return absl::StrCat("/", kRingPrefix, PidNamespace(), "-", getpid(), "-",
                      tag);
}

int RemoveStaleRings() {
  const std::string ns = PidNamespace();
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    absl::string_view name(entry->d_name);
    if (!absl::ConsumePrefix(&name, kRingPrefix)) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(name, absl::MaxSplits('-', 2));
    int pid = 0;
    if (parts.size() < 3 || parts[0] != ns ||
        !absl::SimpleAtoi(parts[1], &pid) || pid <= 0) {
      continue;
    }
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or unknown
    if (shm_unlink(absl::StrCat("/", entry->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

// Lives at the start of the mapping, shared by both processes. Counters
// only grow: head - tail bytes are readable, capacity - (head - tail) free.
struct ShmChannel::Header {
  alignas(64) std::atomic<uint64_t> head;  // bytes written, by the writer
  alignas(64) std::atomic<uint64_t> tail;  // bytes read, by the reader
  // Futex words: bumped after each write (reader sleeps on it) and each
  // read (writer sleeps on it), and flags saying someone sleeps.
  alignas(64) std::atomic<uint32_t> written_seq;
  std::atomic<uint32_t> reader_sleeping;
  alignas(64) std::atomic<uint32_t> read_seq;
  std::atomic<uint32_t> writer_sleeping;
  alignas(64) uint64_t capacity;
  uint64_t magic;
};

namespace {

constexpr uint64_t kMagic = 0x636f686f72747368;  // "cohortsh"
// A sleeper re-checks its interrupt and deadline at least this often.
constexpr int64_t kSleepSliceNs = 2'000'000;
constexpr int kSpins = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  timespec slice = {0, kSleepSliceNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected,
          &slice, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX,
          nullptr, nullptr, 0);
}

absl::Status Errno(absl::string_view what, const std::string& name) {
  return absl::InternalError(
      absl::StrCat(what, " ", name, ": ", std::strerror(errno)));
}

// Waits until `ready()` (which reads the shared counters) or a failure.
// `seq`/`sleeping` are the futex word and flag of the other side's progress.
template <typename Ready>
absl::Status AwaitProgress(Ready ready, std::atomic<uint32_t>& seq,
                           std::atomic<uint32_t>& sleeping, absl::Time deadline,
                           const InterruptCheck& interrupted,
                           absl::string_view waiting_for) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return absl::OkStatus();
  }
  while (true) {
    sleeping.store(1);
    const uint32_t observed = seq.load();
    if (ready()) break;
    FutexWait(&seq, observed);
    if (ready()) break;
    if (absl::Status status = interrupted(); !status.ok()) {
      sleeping.store(0);
      return status;
    }
    if (absl::Now() >= deadline) {
      sleeping.store(0);
      return absl::DeadlineExceededError(absl::StrCat(
          "shared-memory link: no ", waiting_for, " before the deadline"));
    }
  }
  sleeping.store(0);
  return absl::OkStatus();
}

// Counters out of the ring's bounds: something other than the two ends
// wrote the mapping, or a peer of another layout.
absl::Status CorruptCounters(uint64_t in_ring, size_t capacity) {
  return absl::DataLossError(
      absl::StrCat("shared-memory link: corrupt ring: its counters put ",
                   in_ring, " bytes in a ring of ", capacity));
}

}  // namespace

ShmChannel::ShmChannel(std::string name, void* base, size_t mapped, bool owner)
    : name_(std::move(name)),
      base_(base),
      mapped_(mapped),
      linked_(owner),
      header_(static_cast<Header*>(base)),
      ring_(static_cast<char*>(base) + 4096),
      capacity_(header_->capacity) {}

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Create(
    const std::string& name, size_t capacity) {
  static_assert(sizeof(Header) <= 4096, "the header fits its page");
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Errno("shm_open", name);
  const size_t mapped = 4096 + capacity;
  // Reserve the pages now: a full tmpfs fails here, not with SIGBUS later.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(mapped));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name.c_str());
    errno = reserved;
    return Errno("posix_fallocate", name);
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Errno("mmap", name);
  }
  Header* header = new (base) Header();
  header->capacity = capacity;
  header->magic = kMagic;
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, base, mapped, true));
}

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Open(
    const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Errno("shm_open", name);
  struct stat info;
  if (fstat(fd, &info) != 0 || info.st_size < 4096) {
    close(fd);
    return absl::DataLossError(absl::StrCat(name, ": not a Cohort ring"));
  }
  const size_t mapped = static_cast<size_t>(info.st_size);
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Errno("mmap", name);
  const Header* header = static_cast<const Header*>(base);
  if (header->magic != kMagic || header->capacity + 4096 != mapped) {
    munmap(base, mapped);
    return absl::DataLossError(absl::StrCat(name, ": not a Cohort ring"));
  }
  return std::unique_ptr<ShmChannel>(new ShmChannel(name, base, mapped, false));
}

ShmChannel::~ShmChannel() {
  Unlink();
  munmap(base_, mapped_);
}

void ShmChannel::Unlink() {
  if (linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

absl::Status ShmChannel::Write(const void* data, size_t bytes,
                               absl::Time deadline,
                               const InterruptCheck& interrupted) {
  const char* in = static_cast<const char*>(data);
  uint64_t head = header_->head.load(std::memory_order_relaxed);
  while (bytes > 0) {
    // The counters are in memory the other end writes too: never trusted
    // past the ring's bounds.
    auto used = [&] {
      return head - header_->tail.load(std::memory_order_acquire);
    };
    absl::Status status =
        AwaitProgress([&] { return used() != capacity_; }, header_->read_seq,
                      header_->writer_sleeping, deadline, interrupted, "space");
    if (!status.ok()) return status;
    const uint64_t in_ring = used();
    if (in_ring > capacity_) return CorruptCounters(in_ring, capacity_);
    const size_t n = std::min<size_t>(bytes, capacity_ - in_ring);
    const size_t at = head % capacity_;
    const size_t first = std::min(n, capacity_ - at);
    std::memcpy(ring_ + at, in, first);
    std::memcpy(ring_, in + first, n - first);
    head += n;
    in += n;
    bytes -= n;
    header_->head.store(head, std::memory_order_release);
    header_->written_seq.fetch_add(1);
    if (header_->reader_sleeping.load()) FutexWakeAll(&header_->written_seq);
  }
  return absl::OkStatus();
}

absl::Status ShmChannel::Read(void* data, size_t bytes, absl::Time deadline,
                              const InterruptCheck& interrupted) {
  char* out = static_cast<char*>(data);
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  while (bytes > 0) {
    auto readable = [&] {
      return header_->head.load(std::memory_order_acquire) - tail;
    };
    absl::Status status =
        AwaitProgress([&] { return readable() > 0; }, header_->written_seq,
                      header_->reader_sleeping, deadline, interrupted, "data");
    if (!status.ok()) return status;
    const uint64_t in_ring = readable();
    if (in_ring > capacity_) return CorruptCounters(in_ring, capacity_);
    const size_t n = std::min<size_t>(bytes, in_ring);
    const size_t at = tail % capacity_;
    const size_t first = std::min(n, capacity_ - at);
    std::memcpy(out, ring_ + at, first);
    std::memcpy(out + first, ring_, n - first);
    tail += n;
    out += n;
    bytes -= n;
    header_->tail.store(tail, std::memory_order_release);
    header_->read_seq.fetch_add(1);
    if (header_->writer_sleeping.load()) FutexWakeAll(&header_->read_seq);
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
