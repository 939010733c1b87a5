// A mapped file truncated while in use: the next read of a lost page faults (SIGBUS), and the process ends with one
// error line naming the file, exit status 1, instead of a crash.
#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "test_util.h"

namespace seedling {

TEST(MappedFileDeathTest, TruncatedWhileMappedIsOneErrorLineNamingTheFile) {
  test::ScratchDir dir("map");
  const std::string path = dir / "weights.bin";
  test::write_file(path, std::string(1 << 16, '\x5a'));
  EXPECT_EXIT(
      {
        MappedFile m(path);
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(3);
        volatile uint8_t b = m.data()[8192];  // a page the file no longer has
        (void)b;
        std::_Exit(2);  // reached only if the read did not fault
      },
      ::testing::ExitedWithCode(1), "seedling: error: .*weights.bin: a read of the mapped file faulted");
}

}  // namespace seedling
