// parallel/launch.h - `--devices cuda:0,cuda:1,...`: the device list, and one process per device.
//
// The process the user started is the launcher: it makes a private folder (0700) holding the rank meeting file
// (NCCL's unique id, 0600), runs its own binary once per device with the same arguments plus the rank's, waits, and
// removes the folder. Rank 0 keeps stdout; the others' stdout goes to /dev/null (every rank computes the same
// tokens), stderr stays shared so any rank's error is seen. When one rank fails, the launcher stops the others (a
// rank waiting on a collective for a peer that is gone would wait for ever) and exits with the failure's status.
#pragma once

#include <string>
#include <vector>

namespace seedling {

// "cuda:0,cuda:1" -> {0, 1}: at least two, each cuda:N once. An Error naming --devices and the bad entry.
std::vector<int> parse_devices(const std::string& text);

// A folder only this user can enter, under $TMPDIR or /tmp, removed with everything in it when this dies.
class PrivateDir {
 public:
  explicit PrivateDir(const std::string& tag);
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `bytes` to a new file `name` (0600, never an existing one); returns its path.
  std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) const;

 private:
  std::string path_;
};

// The bytes of a meeting file of exactly `size` bytes; an Error naming it otherwise.
std::vector<uint8_t> read_meeting_file(const std::string& path, size_t size);

// Runs argv[r] for each rank r (argv[r][0] the program), each in its own process; rank r > 0 with stdout on
// /dev/null when quiet_others. Waits for all. Returns 0 when every rank exits 0; else the status of the first
// rank that failed (its exit code, or 128 + its signal), after sending SIGTERM to the ranks still running. An Error
// when a process cannot be started.
int launch_ranks(const std::vector<std::vector<std::string>>& argv, bool quiet_others);

}  // namespace seedling
