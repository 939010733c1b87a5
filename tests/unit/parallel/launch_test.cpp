// --devices parsing, the private meeting folder, and the rank launcher (with /bin/sh standing in for seedling).
#include "parallel/launch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_util.h"

namespace seedling {

namespace {

std::string devices_error(const std::string& text) {
  try {
    parse_devices(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> sh(const std::string& script) {
  return {"/bin/sh", "-c", script};
}

}  // namespace

TEST(DevicesTest, ParsesAListOfAtLeastTwoDistinctCudaDevices) {
  EXPECT_EQ(parse_devices("cuda:0,cuda:1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_devices("cuda:3,cuda:1,cuda:12"), (std::vector<int>{3, 1, 12}));
}

TEST(DevicesTest, BadListsAreOneClearError) {
  EXPECT_EQ(devices_error("cuda:0"),
            "--devices: expert parallelism needs at least 2 devices, 'cuda:0' names 1 (one GPU: --device cuda:N)");
  EXPECT_EQ(devices_error("cuda:0,cuda:0"), "--devices: cuda:0 is named twice in 'cuda:0,cuda:0'");
  EXPECT_EQ(devices_error("cuda:1,cuda:01"), "--devices: cuda:1 is named twice in 'cuda:1,cuda:01'");
  EXPECT_EQ(devices_error("cuda:0,gpu1"),
            "--devices: 'gpu1' is not a CUDA device (expected cuda:N, e.g. --devices cuda:0,cuda:1)");
  EXPECT_EQ(devices_error("cuda,cuda:1"),
            "--devices: 'cuda' is not a CUDA device (expected cuda:N, e.g. --devices cuda:0,cuda:1)");
  EXPECT_EQ(devices_error("cpu,cuda:1"),
            "--devices: 'cpu' is not a CUDA device (expected cuda:N, e.g. --devices cuda:0,cuda:1)");
  EXPECT_EQ(devices_error("cuda:0,,cuda:1"),
            "--devices: an empty entry in 'cuda:0,,cuda:1' (expected cuda:N,cuda:M,...)");
  EXPECT_EQ(devices_error(""), "--devices: an empty entry in '' (expected cuda:N,cuda:M,...)");
  EXPECT_EQ(devices_error("cuda:0,cuda:-1"),
            "--devices: 'cuda:-1' is not a CUDA device (expected cuda:N, e.g. --devices cuda:0,cuda:1)");
}

TEST(LaunchTest, APrivateFolderHoldsTheMeetingFileAndGoesAway) {
  std::string path;
  {
    PrivateDir dir("launch-test");
    path = dir.path();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    const std::vector<uint8_t> id = {1, 2, 3, 250};
    const std::string file = dir.write_file("id", id);
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(read_meeting_file(file, 4), id);
    EXPECT_THROW(read_meeting_file(file, 128), Error);  // not a whole unique id
    EXPECT_THROW(dir.write_file("id", id), Error);      // never over an existing file
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(LaunchTest, EveryRankRunsWithItsOwnArguments) {
  test::ScratchDir out("launch");
  std::vector<std::vector<std::string>> argv;
  for (int r = 0; r < 3; ++r) argv.push_back(sh("echo rank " + std::to_string(r) + " > " + out / std::to_string(r)));
  EXPECT_EQ(launch_ranks(argv, true), 0);
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(out / std::to_string(r));
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "rank " + std::to_string(r));
  }
}

TEST(LaunchTest, AFailingRankStopsTheOthersAndGivesItsStatus) {
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 fails at once; ranks 0 and 2 would wait for ever on a peer that is gone.
  const int st = launch_ranks({sh("sleep 60"), sh("exit 3"), sh("sleep 60")}, true);
  EXPECT_EQ(st, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(launch_ranks({sh("kill -9 $$"), sh("exit 0")}, true), 128 + 9);
  EXPECT_EQ(launch_ranks({{"/nonexistent/seedling"}, sh("exit 0")}, true), 127);
}

}  // namespace seedling
