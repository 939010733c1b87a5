#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace seedling {

namespace {

// A mapped file that shrinks while mapped (truncated or rewritten by another process) raises SIGBUS on the next read
// of a lost page. The handler finds the mapping the address falls in and ends the process with one error line naming
// the file, instead of a crash; a fault outside every mapping is re-raised as it was. The table is written only with
// atomics (the handler may run at any time); mappings past its size are still correct, just not named on a fault.
struct MappingSlot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char path[480];
};
MappingSlot g_mappings[1024];

void append(char* buf, size_t* n, size_t cap, const char* s) {
  while (*s != '\0' && *n + 1 < cap) buf[(*n)++] = *s++;
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (MappingSlot& m : g_mappings) {
    const uintptr_t b = m.begin.load(std::memory_order_acquire);
    if (b == 0 || a < b || a >= m.end.load(std::memory_order_acquire)) continue;
    char buf[768];
    size_t n = 0;
    append(buf, &n, sizeof(buf), "seedling: error: ");
    append(buf, &n, sizeof(buf), m.path);
    append(buf, &n, sizeof(buf),
           ": a read of the mapped file faulted (SIGBUS): it was truncated or replaced while in use\n");
    ssize_t ignored = ::write(STDERR_FILENO, buf, n);
    (void)ignored;
    ::_exit(1);
  }
  ::signal(sig, SIG_DFL);  // not a mapping of ours: the default action, as if no handler were installed
  ::raise(sig);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

void note_mapping(const void* data, size_t size, const std::string& path) {
  install_sigbus_handler();
  for (MappingSlot& m : g_mappings) {
    uintptr_t expected = 0;
    // Claim a free slot by writing a placeholder begin (1: no real mapping starts there), then fill it.
    if (!m.begin.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    const size_t len = std::min(path.size(), sizeof(m.path) - 1);
    std::memcpy(m.path, path.data(), len);
    m.path[len] = '\0';
    m.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
    m.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return;
  }
}

void forget_mapping(const void* data) {
  for (MappingSlot& m : g_mappings) {
    uintptr_t expected = reinterpret_cast<uintptr_t>(data);
    if (m.begin.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return;
  }
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("{}: cannot map {} bytes: {}", path, size_, std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    note_mapping(data_, size_, path);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    forget_mapping(data_);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

}  // namespace seedling
