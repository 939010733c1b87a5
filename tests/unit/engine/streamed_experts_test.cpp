// The streamed expert provider against blob files the tests write: right bytes through evictions, pinned slots
// never evicted, the budget floor, read errors as Errors naming file and offset, and the O_DIRECT fallback.
#include "experts/streamed_experts.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "streamed_test_util.h"

namespace seedling {
namespace {

using test::holds;

StreamedOptions slots_opt(int slots, EvictionPolicy p = EvictionPolicy::lru) {
  StreamedOptions o;
  o.slots = slots;
  o.policy = p;
  return o;
}

std::string file_digest(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string bytes;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  return std::to_string(XXH64(bytes.data(), bytes.size(), 0)) + "/" + std::to_string(bytes.size());
}

TEST(StreamedExperts, EveryAcquireHandsOutThatExpertsBytesThroughManyEvictions) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-bytes"), 3, 16);
  for (EvictionPolicy p : {EvictionPolicy::lru, EvictionPolicy::lfu}) {
    StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(5, p));
    EXPECT_TRUE(x.direct_io());  // /tmp is a disk filesystem that takes O_DIRECT
    std::mt19937 rng(7);
    for (int step = 0; step < 200; ++step) {
      const int layer = int(rng() % 3);
      std::vector<int> chosen;
      while (chosen.size() < 4) {
        const int e = int(rng() % 16);
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
      }
      std::sort(chosen.begin(), chosen.end());
      if (step % 2 == 0) x.prefetch(layer, chosen);
      for (int e : chosen) {
        ASSERT_TRUE(holds(x.acquire(layer, e), layer, e)) << "layer " << layer << " expert " << e;
        x.release(layer, e);
      }
    }
    const ExpertStats s = x.stats();
    EXPECT_EQ(s.hits + s.misses, 800u);
    EXPECT_GT(s.misses, 100u);
    EXPECT_EQ(s.reads, s.misses);
    EXPECT_EQ(s.bytes_read, s.misses * 8192);
    EXPECT_GT(s.read_gb_per_s(), 0.0);
    EXPECT_GT(s.read_p99_s, 0.0);
    EXPECT_LE(s.read_p50_s, s.read_p95_s);
    EXPECT_LE(s.read_p95_s, s.read_p99_s);
    const std::string text = format_expert_stats(s, x.name(), 200);
    EXPECT_NE(text.find("hit rate"), std::string::npos);
    EXPECT_NE(text.find("p99"), std::string::npos);
    EXPECT_NE(text.find("ms per token"), std::string::npos);
    // The CUDA forward's VRAM cache: copies, no read latencies or I/O wait it did not measure.
    ExpertStats v = s;
    v.vram_copies = true;
    const std::string vtext = format_expert_stats(v, "vram", 200);
    EXPECT_NE(vtext.find("copies to VRAM"), std::string::npos) << vtext;
    EXPECT_EQ(vtext.find("p99"), std::string::npos) << vtext;
    EXPECT_EQ(vtext.find("waiting on I/O"), std::string::npos) << vtext;
  }
}

TEST(StreamedExperts, EvictionNeverTouchesAnInUseSlot) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-pin"), 1, 8);
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(2));
  const ExpertWeights a = x.acquire(0, 0);
  const ExpertWeights b = x.acquire(0, 1);
  // Both slots held: a third expert has nowhere to go, and must not take a held slot.
  try {
    x.acquire(0, 2);
    FAIL() << "acquire with every slot in use succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all 2 slots are in use"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(holds(a, 0, 0));
  EXPECT_TRUE(holds(b, 0, 1));
  // Expert 0 is the least recently used, but only expert 1's holder let go: the read lands in expert 1's slot.
  x.release(0, 1);
  EXPECT_TRUE(holds(x.acquire(0, 2), 0, 2));
  EXPECT_TRUE(holds(a, 0, 0));
  x.release(0, 2);
  x.release(0, 0);

  // Prefetched experts are pinned too: with 2 slots, prefetching {3, 4, 5} covers 3 and 4. Fetching 5 before 4
  // (out of order) may only evict 3 (released), never 4, which the prefetch still holds: 4 is not read twice.
  x.prefetch(0, std::vector<int>{3, 4, 5});
  EXPECT_TRUE(holds(x.acquire(0, 3), 0, 3));
  x.release(0, 3);
  EXPECT_TRUE(holds(x.acquire(0, 5), 0, 5));
  x.release(0, 5);
  EXPECT_TRUE(holds(x.acquire(0, 4), 0, 4));
  x.release(0, 4);
  EXPECT_EQ(x.stats().misses, 6u);  // 0, 1, 2, 3, 4, 5 once each
  EXPECT_EQ(x.stats().reads, 6u);
}

// Next-layer prefetch (prefetch_guess): a guess reads ahead into unpinned slots, counts no hit or miss, and a routed
// access that finds it counts as used; it skips what a slot holds, never starts more reads than the queue takes,
// never reads through the blocking pread fallback, and never keeps a slot from a routed expert.
TEST(StreamedExperts, GuessesReadAheadUnpinnedAndAreCountedApart) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-guess"), 1, 8);
  StreamedOptions o = slots_opt(4);
  o.queue_depth = 2;
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
  x.prefetch_guess(0, std::vector<int>{1, 2, 3});  // the queue takes two
  ExpertStats s = x.stats();
  EXPECT_EQ(s.prefetched, 2u);
  EXPECT_EQ(s.prefetch_bytes, 2u * 8192);
  EXPECT_EQ(s.hits + s.misses, 0u);
  EXPECT_TRUE(holds(x.acquire(0, 1), 0, 1));  // waits for the guess's read if it is still in flight
  x.release(0, 1);
  x.prefetch(0, std::vector<int>{2});
  EXPECT_TRUE(holds(x.acquire(0, 2), 0, 2));
  x.release(0, 2);
  s = x.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.prefetch_used, 2u);
  x.prefetch_guess(0, std::vector<int>{1, 2});  // in slots already: nothing read
  EXPECT_EQ(x.stats().prefetched, 2u);
  // Guesses fill the other two slots; four routed experts then take all four slots, guesses or not.
  x.prefetch_guess(0, std::vector<int>{4, 5});
  std::vector<ExpertWeights> held;
  for (int e : {0, 6, 7, 3}) held.push_back(x.acquire(0, e));
  for (size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(holds(held[i], 0, std::vector<int>{0, 6, 7, 3}[i]));
  for (int e : {0, 6, 7, 3}) x.release(0, e);
  s = x.stats();
  EXPECT_EQ(s.prefetched, 4u);
  EXPECT_EQ(s.prefetch_used, 2u);  // 4 and 5 were evicted unused
  EXPECT_EQ(s.reads, s.misses + s.prefetched);
  EXPECT_EQ(s.bytes_read, s.reads * 8192);
  const std::string text = format_expert_stats(s, x.name(), 1);
  EXPECT_NE(text.find("experts: 4 prefetched (0.000 GB), 2 of them then routed to (50.00%)"), std::string::npos)
      << text;

  StreamedOptions p = slots_opt(4);
  p.refuse_direct = true;  // the pread fallback would block the forward on a guess
  StreamedExperts y(files.where, test::view_blob(), test::check_xxh64(), p);
  y.prefetch_guess(0, std::vector<int>{1, 2});
  EXPECT_EQ(y.stats().prefetched, 0u);
}

// A guess's read pins its slot until it completes. A routed acquire that finds every other slot taken waits for such
// reads rather than failing: guesses then routed experts filling every slot, at once, many times (each round some
// guesses are still in flight when the acquires come; before the wait, acquire threw "all 4 slots are in use" in
// the first round on the 2-core machine, and GuessesReadAheadUnpinnedAndAreCountedApart failed now and then).
TEST(StreamedExperts, AcquireWaitsForAGuessStillInFlightRatherThanFail) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-guess-race"), 1, 8);
  StreamedOptions o = slots_opt(4);
  o.queue_depth = 4;
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
  const std::vector<int> guessed{0, 1, 2, 3}, routed{4, 5, 6, 7};
  for (int round = 0; round < 300; ++round) {
    // The guesses evict the last round's routed experts (released), so all four slots hold guesses, some still
    // being read; each routed acquire then needs one of those slots.
    x.prefetch_guess(0, guessed);
    std::vector<ExpertWeights> held;
    for (int e : routed) held.push_back(x.acquire(0, e));
    for (size_t i = 0; i < held.size(); ++i) ASSERT_TRUE(holds(held[i], 0, routed[i])) << "round " << round;
    for (int e : routed) x.release(0, e);
  }
  EXPECT_EQ(x.stats().prefetched, 300u * 4u);  // every round's four guesses were read
}

TEST(StreamedExperts, BudgetBelowTopKBlobsIsRefusedNamingTheMinimum) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-budget"), 1, 8);
  StreamedOptions o;
  o.min_slots = 4;
  o.ram_budget = 3 * 8192 + 100;  // three blobs of 8 KiB
  try {
    StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
    FAIL() << "a budget of three blobs was accepted with top-4";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--ram-budget"), std::string::npos) << m;
    EXPECT_NE(m.find("minimum is the router's top-k, 4 slots"), std::string::npos) << m;
  }
  o.ram_budget = 0;
  o.slots = 3;
  EXPECT_THROW(StreamedExperts(files.where, test::view_blob(), test::check_xxh64(), o), Error);
  o.slots = 0;
  o.ram_budget = 4 * 8192;
  StreamedExperts ok(files.where, test::view_blob(), test::check_xxh64(), o);
  EXPECT_EQ(ok.slots(), 4);
  EXPECT_EQ(parse_byte_size("4G"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_THROW(parse_byte_size("4Q"), Error);
  EXPECT_THROW(parse_byte_size("lots"), Error);
  EXPECT_THROW(parse_eviction_policy("fifo"), Error);
}

TEST(StreamedExperts, InjectedReadErrorIsAnErrorNamingFileOffsetAndErrno) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-eio"), 1, 8);
  const std::string before = file_digest(files.where[0][0].file);
  StreamedOptions o = slots_opt(4);
  o.fail_read_number = 3;
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
  x.prefetch(0, std::vector<int>{0, 1, 2, 3});
  int failures = 0;
  for (int e = 0; e < 4; ++e) {
    try {
      EXPECT_TRUE(holds(x.acquire(0, e), 0, e));
      x.release(0, e);
    } catch (const Error& err) {
      ++failures;
      const std::string m = err.what();
      EXPECT_NE(m.find(files.where[0][0].file), std::string::npos) << m;
      EXPECT_NE(m.find("at offset"), std::string::npos) << m;
      EXPECT_NE(m.find("Input/output error"), std::string::npos) << m;
    }
  }
  EXPECT_EQ(failures, 1);
  // The provider stays usable: the failed expert is read again.
  for (int e = 0; e < 8; ++e) {
    EXPECT_TRUE(holds(x.acquire(0, e), 0, e));
    x.release(0, e);
  }
  // No pin leaked with the error: all four slots can be held at once.
  for (int e = 4; e < 8; ++e) EXPECT_TRUE(holds(x.acquire(0, e), 0, e));
  for (int e = 4; e < 8; ++e) x.release(0, e);
  EXPECT_EQ(file_digest(files.where[0][0].file), before);  // nothing written to the source
}

TEST(StreamedExperts, FileTruncatedAfterOpenIsAnErrorNotACrash) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-trunc"), 1, 8);
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(4));
  EXPECT_TRUE(holds(x.acquire(0, 0), 0, 0));
  x.release(0, 0);
  ASSERT_EQ(::truncate(files.where[0][0].file.c_str(), 3 * 8192), 0);
  try {
    x.acquire(0, 5);
    FAIL() << "a read past the end of a truncated file succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("offset 40960"), std::string::npos) << m;
    EXPECT_NE(m.find("end of file"), std::string::npos) << m;
  }
  EXPECT_TRUE(holds(x.acquire(0, 1), 0, 1));  // what is still there still reads
  x.release(0, 1);
}

TEST(StreamedExperts, CorruptBlobFailsItsChecksumWithTheFileNamed) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-sum"), 1, 4);
  {
    std::FILE* f = std::fopen(files.where[0][0].file.c_str(), "r+b");
    std::fseek(f, 8192 + 100, SEEK_SET);
    std::fputc(0x5a, f);
    std::fclose(f);
  }
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(4));
  EXPECT_TRUE(holds(x.acquire(0, 0), 0, 0));
  x.release(0, 0);
  try {
    x.acquire(0, 1);
    FAIL() << "a corrupt blob was handed out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(files.where[0][0].file), std::string::npos) << e.what();
  }
}

// A blob is hashed after its first read only: read again after evictions it is not hashed again (as a mapped blob is
// checked once), and every read still hands out that expert's bytes.
TEST(StreamedExperts, EachBlobIsHashedOnItsFirstReadOnly) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-once"), 2, 6);
  std::map<std::pair<int, int>, int> hashed;  // (file offset's layer, expert) -> verify calls
  const VerifyExpertBlob check = test::check_xxh64();
  const VerifyExpertBlob counting = [&](const uint8_t* blob, size_t bytes, const BlobLocation& where) {
    check(blob, bytes, where);
    for (size_t l = 0; l < files.where.size(); ++l) {
      for (size_t e = 0; e < files.where[l].size(); ++e) {
        if (files.where[l][e].file == where.file && files.where[l][e].offset == where.offset) {
          ++hashed[{int(l), int(e)}];
        }
      }
    }
  };
  StreamedExperts x(files.where, test::view_blob(), counting, slots_opt(2));
  for (int round = 0; round < 3; ++round) {  // 12 experts through 2 slots: every acquire a read
    for (int l = 0; l < 2; ++l) {
      for (int e = 0; e < 6; ++e) {
        EXPECT_TRUE(holds(x.acquire(l, e), l, e)) << "round " << round;
        x.release(l, e);
      }
    }
  }
  EXPECT_EQ(x.stats().reads, 36u);
  ASSERT_EQ(hashed.size(), 12u);
  for (const auto& [key, calls] : hashed) EXPECT_EQ(calls, 1) << "layer " << key.first << " expert " << key.second;
}

TEST(StreamedExperts, ODirectRefusedFallsBackToPreadWithOneWarning) {
  // /dev/shm is tmpfs. Kernels before 6.6 refuse O_DIRECT there with EINVAL; newer ones take it, and then the
  // test hook makes the provider see the same EINVAL.
  const auto files = test::write_blob_files(test::temp_dir("/dev/shm", "stream-tmpfs"), 2, 8);
  StreamedOptions o = slots_opt(3);
  const int fd = ::open(files.where[0][0].file.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) {
    ::close(fd);
    o.refuse_direct = true;
  }
  testing::internal::CaptureStderr();
  {
    StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), o);
    EXPECT_FALSE(x.direct_io());
    for (int round = 0; round < 3; ++round) {
      for (int l = 0; l < 2; ++l) {
        for (int e = 0; e < 8; ++e) {
          EXPECT_TRUE(holds(x.acquire(l, e), l, e));
          x.release(l, e);
        }
      }
    }
    EXPECT_EQ(x.stats().misses, 48u);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("refuses O_DIRECT"), std::string::npos) << err;
  std::system(("rm -rf '" + files.dir + "'").c_str());
}

TEST(StreamedExperts, MissingFileIsAnErrorNamingIt) {
  auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-missing"), 1, 4);
  files.where[0][2].file += ".gone";
  try {
    StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(4));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".gone"), std::string::npos) << e.what();
  }
}

// ready(): true once an expert's blob is read and checked, never counting a hit or a miss; the MoE block asks it to
// run the held experts while the others are read.
TEST(StreamedExperts, ReadyOnceTheBlobIsInASlotAndCountsNothing) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "stream-ready"), 1, 8);
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(4));
  EXPECT_FALSE(x.ready(0, 3));  // never asked for
  const std::vector<int> two = {3, 5};
  x.prefetch(0, two);
  const ExpertStats before = x.stats();
  ASSERT_TRUE(holds(x.acquire(0, 3), 0, 3));
  EXPECT_TRUE(x.ready(0, 3));
  bool landed = false;  // its read finishes on its own: poll for up to 10 s
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(landed = x.ready(0, 5)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(landed);
  EXPECT_FALSE(x.ready(0, 6));
  const ExpertStats after = x.stats();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  ASSERT_TRUE(holds(x.acquire(0, 5), 0, 5));
  x.release(0, 3);
  x.release(0, 5);
  EXPECT_TRUE(x.ready(0, 3));  // still in its slot
  EXPECT_THROW(x.ready(1, 0), Error);
  EXPECT_THROW(x.ready(0, 8), Error);
}

// The disk ceiling `seedling bench` holds the provider's reads against: whole blobs, at least 2 * queue depth of
// them however short the time, every byte counted; bad blobs and missing files are Errors naming the file.
TEST(RandomReads, ReadWholeBlobsAtTheQueueDepthAndCountEveryByte) {
  const auto files = test::write_blob_files(test::temp_dir("/tmp", "random-reads"), 2, 8);
  StreamedExperts x(files.where, test::view_blob(), test::check_xxh64(), slots_opt(2));
  const std::vector<BlobLocation> blobs = x.blobs();
  ASSERT_EQ(blobs.size(), 16u);
  EXPECT_EQ(blobs[8].file, files.where[1][0].file);
  for (int qd : {1, 3, 8}) {
    const RandomReadRate r = measure_random_reads(blobs, qd, 0.0);
    EXPECT_EQ(r.queue_depth, qd);
    EXPECT_GE(r.reads, uint64_t(2 * qd));
    EXPECT_EQ(r.bytes, r.reads * 8192);
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_GT(r.gb_per_s(), 0.0);
  }
  EXPECT_THROW(measure_random_reads({}, 8, 0.0), Error);
  EXPECT_THROW(measure_random_reads(blobs, 0, 0.0), Error);
  std::vector<BlobLocation> odd = blobs;
  odd[3].offset += 512;
  EXPECT_THROW(measure_random_reads(odd, 2, 0.0), Error);
  std::vector<BlobLocation> gone = blobs;
  gone[5].file += ".missing";
  try {
    measure_random_reads(gone, 2, 0.0);
    FAIL() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(gone[5].file), std::string::npos) << e.what();
  }
  std::vector<BlobLocation> past = blobs;
  past[0].offset = 1ull << 30;  // past the end of the file: a read of 0 bytes
  EXPECT_THROW(measure_random_reads({past.data(), 1}, 1, 0.0), Error);
}

}  // namespace
}  // namespace seedling
