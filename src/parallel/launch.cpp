// parallel/launch.cpp - the device list and the rank processes: fork/exec, wait, stop the rest on a failure.
#include "parallel/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "core/error.h"

namespace seedling {

std::vector<int> parse_devices(const std::string& text) {
  std::vector<int> out;
  std::set<int> seen;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    const std::string name = text.substr(i, j - i);
    if (name.empty()) fail("--devices: an empty entry in '{}' (expected cuda:N,cuda:M,...)", text);
    const bool digits =
        name.size() > 5 && name.size() < 9 && name.find_first_not_of("0123456789", 5) == std::string::npos;
    if (name.rfind("cuda:", 0) != 0 || !digits) {
      fail("--devices: '{}' is not a CUDA device (expected cuda:N, e.g. --devices cuda:0,cuda:1)", name);
    }
    const int d = std::stoi(name.substr(5));
    if (!seen.insert(d).second) fail("--devices: cuda:{} is named twice in '{}'", d, text);
    out.push_back(d);
    i = j + 1;
  }
  if (out.size() < 2) {
    fail("--devices: expert parallelism needs at least 2 devices, '{}' names {} (one GPU: --device cuda:N)", text,
         out.size());
  }
  return out;
}

PrivateDir::PrivateDir(const std::string& tag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/seedling-" + tag + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) fail("cannot make a private folder {}: {}", pattern, std::strerror(errno));
  path_ = pattern;  // mkdtemp makes it 0700
}

PrivateDir::~PrivateDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string PrivateDir::write_file(const std::string& name, const std::vector<uint8_t>& bytes) const {
  const std::string path = path_ + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail("{}: cannot create: {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("{}: cannot write: {}", path, std::strerror(err));
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) fail("{}: cannot write: {}", path, std::strerror(errno));
  return path;
}

std::vector<uint8_t> read_meeting_file(const std::string& path, size_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the ranks' meeting file", path);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.size() != size) fail("{}: {} bytes, a meeting file holds {}", path, bytes.size(), size);
  return bytes;
}

namespace {

int status_of(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

}  // namespace

int launch_ranks(const std::vector<std::vector<std::string>>& argv, bool quiet_others) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  const auto stop_all = [&] {
    for (pid_t p : pids) ::kill(p, SIGTERM);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  };
  for (size_t r = 0; r < argv.size(); ++r) {
    if (argv[r].empty()) fail("launch: rank {} has no program", r);
    std::vector<char*> args;
    for (const std::string& a : argv[r]) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      stop_all();
      fail("launch: cannot start rank {}: {}", r, std::strerror(err));
    }
    if (pid == 0) {  // the child: only async-signal-safe calls until exec
      sigset_t
          none;  // exec keeps the signal mask: a launcher that blocked SIGINT for a waiter thread must not pass it on
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      if (quiet_others && r > 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) ::dup2(null, STDOUT_FILENO);
      }
      ::execv(args[0], args.data());
      const char msg[] = "seedling: error: launch: cannot run the rank's program\n";
      [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // Each rank's own pid, polled: waitpid(-1) could reap a child some other part of the process waits for.
  int result = 0;
  while (!pids.empty()) {
    bool reaped = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      int wstatus = 0;
      const pid_t done = ::waitpid(pids[i], &wstatus, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) continue;
      const int st = done < 0 ? 1 : status_of(wstatus);
      pids.erase(pids.begin() + std::ptrdiff_t(i));
      reaped = true;
      if (st != 0 && result == 0) {
        result = st;
        for (pid_t p : pids) ::kill(p, SIGTERM);  // the rest would wait for the failed rank for ever
      }
      break;
    }
    if (!reaped) ::usleep(20000);
  }
  return result;
}

}  // namespace seedling
