// The host half of the three-tier VRAM cache (cuda/expert_staging.h), without a GPU: misses fetched through the
// streamed provider into a ring of staging buffers land in their slots with the bytes the all-pinned path packs,
// no buffer is rewritten before its (simulated, deferred) copy ran, the provider counts exactly one access per
// miss, and a blob of the wrong layout is one clear Error after which the next fetch still finds RAM slots.
#include "cuda/expert_staging.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/error.h"
#include "cuda/vram_experts.h"
#include "cuda_test_util.h"
#include "experts/streamed_experts.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

// A copy engine acted out on the host: send() only queues (buffer, slot); the copy happens at wait() or drain, so a
// buffer rewritten before its copy ran would put the wrong bytes in the slot.
struct FakeCopies {
  size_t blob = 0;
  std::map<int, std::vector<uint8_t>> vram;               // slot -> bytes
  std::map<int, std::pair<const uint8_t*, int>> pending;  // buffer -> (data, slot)
  int sends = 0, waits = 0;

  cuda::StagingRing::Send send() {
    return [this](int b, const uint8_t* data, int /*layer*/, int slot) {
      EXPECT_EQ(pending.count(b), 0u) << "buffer " << b << " sent again before its copy was waited for";
      pending[b] = {data, slot};
      ++sends;
    };
  }
  cuda::StagingRing::Wait wait() {
    return [this](int b) {
      auto it = pending.find(b);
      ASSERT_NE(it, pending.end()) << "wait on buffer " << b << " with no copy";
      vram[it->second.second].assign(it->second.first, it->second.first + blob);
      pending.erase(it);
      ++waits;
    };
  }
};

}  // namespace

TEST(ExpertStaging, MissesThroughTheStreamedProviderLandInTheirSlotsAsTheAllPinnedPathPacksThem) {
  const test::ScratchDir tmp("staging");
  test::pack_checkpoint(test::data_path("models/qwen3_moe_a/hf"), tmp / "p", "--experts q8_g32");
  auto mapped = Model::load(tmp / "p");  // ResidentExperts: the all-pinned path's source
  const cuda::ExpertLayout layout = cuda::packed_expert_layout(*mapped);
  const ModelConfig& c = mapped->config();
  const int k = c.experts_per_token;
  ASSERT_GT(layout.bytes, 0u);

  auto packed = Model::load(tmp / "p");
  StreamedOptions so;
  so.min_slots = k;
  so.slots = k;  // RAM slots = top-k: most fetches below are NVMe reads, repeats within k are RAM hits
  auto streamed = StreamedExperts::from_packed(packed->packed(), so);

  FakeCopies copies;
  copies.blob = layout.bytes;
  const int buffers = 2;  // fewer than the misses of one call: the ring must cycle and wait
  std::vector<std::vector<uint8_t>> storage(buffers, std::vector<uint8_t>(layout.bytes, 0xee));
  std::vector<uint8_t*> ring_buffers;
  for (auto& s : storage) ring_buffers.push_back(s.data());
  cuda::StagingRing ring(ring_buffers, copies.send(), copies.wait());

  // Several layers, each call a list of (expert, slot) as VRAM misses would give; expert repeats make RAM hits.
  std::map<int, std::pair<int, int>> slot_holds;  // slot -> (layer, expert) it ends with
  int fills = 0, slot = 0;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    if (!c.layer_has_experts[size_t(layer)]) continue;
    for (int round = 0; round < 3; ++round) {
      std::vector<cuda::SlotFill> f;
      for (int j = 0; j < k + 1; ++j) {
        const int e = (j + round) % c.num_experts;
        f.push_back({e, slot % 7});
        slot_holds[slot % 7] = {layer, e};
        ++slot;
      }
      ring.fetch(*streamed, layer, layout, f);
      ring.drain();
      fills += int(f.size());
    }
  }
  EXPECT_EQ(copies.sends, fills);
  EXPECT_EQ(copies.waits, fills);
  EXPECT_TRUE(copies.pending.empty());

  // Each slot holds, byte for byte, what the all-pinned path packs for the expert it got last.
  std::vector<uint8_t> want(layout.bytes);
  for (const auto& [s, le] : slot_holds) {
    cuda::fetch_expert_blob(mapped->experts(), le.first, le.second, layout, want.data());
    ASSERT_EQ(copies.vram[s], want) << "slot " << s << " layer " << le.first << " expert " << le.second;
  }

  // One provider access per miss: RAM hits + RAM misses = the fills; with k slots and k + 1 experts a call, both
  // kinds happen.
  const ExpertStats st = streamed->stats();
  EXPECT_EQ(st.hits + st.misses, uint64_t(fills));
  EXPECT_GT(st.misses, 0u);
  EXPECT_GT(st.hits, 0u);
  EXPECT_EQ(st.reads, st.misses);
  EXPECT_GT(st.bytes_read, 0u);
}

TEST(ExpertStaging, AnExpertOfAnotherLayoutIsOneClearErrorAndTheNextFetchStillFindsRamSlots) {
  const test::ScratchDir tmp("staging_bad");
  test::pack_checkpoint(test::data_path("models/qwen3_moe_a/hf"), tmp / "p", "--experts q8_g32");
  auto packed = Model::load(tmp / "p");
  cuda::ExpertLayout layout = cuda::packed_expert_layout(*packed);
  const int k = packed->config().experts_per_token;
  StreamedOptions so;
  so.min_slots = k;
  so.slots = k;
  auto streamed = StreamedExperts::from_packed(packed->packed(), so);
  FakeCopies copies;
  copies.blob = layout.bytes;
  std::vector<uint8_t> buffer(layout.bytes);
  cuda::ExpertLayout wrong = layout;
  wrong.down = Codec::BF16;
  cuda::StagingRing bad({buffer.data()}, copies.send(), copies.wait());
  std::vector<cuda::SlotFill> f;
  for (int e = 0; e < k; ++e) f.push_back({e, e});
  const int layer = packed->config().layer_has_experts[0] ? 0 : 1;
  const std::string msg = test::error_of([&] { bad.fetch(*streamed, layer, wrong, f); });
  EXPECT_NE(msg.find("layer " + std::to_string(layer) + " expert 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("one expert layout"), std::string::npos) << msg;
  // The failed expert was released, so the next fetch of k other experts (whose prefetch drops the stale
  // prefetch pins of the experts never reached) finds every RAM slot free.
  cuda::StagingRing good({buffer.data()}, copies.send(), copies.wait());
  std::vector<cuda::SlotFill> g;
  for (int e = 0; e < k; ++e) g.push_back({k + e, e});
  good.fetch(*streamed, layer, layout, g);
  good.drain();
  EXPECT_EQ(copies.waits, k);
}

TEST(ExpertStaging, PackedBlobPaddingIsZeroAndPartsSitAtTheLayoutsOffsets) {
  const test::ScratchDir tmp("staging_pack");
  test::pack_checkpoint(test::data_path("models/mixtral_a/hf"), tmp / "p", "--experts q4_g64");
  auto model = Model::load(tmp / "p");
  const cuda::ExpertLayout l = cuda::packed_expert_layout(*model);
  const int layer = model->config().layer_has_experts[0] ? 0 : 1;
  std::vector<uint8_t> blob(l.bytes, 0xab);
  cuda::fetch_expert_blob(model->experts(), layer, 1, l, blob.data());
  const ExpertWeights ew = model->experts().acquire(layer, 1);
  const ops::Matrix* parts[3] = {&ew.gate, &ew.up, &ew.down};
  const size_t starts[3] = {0, l.up_offset, l.down_offset}, ends[3] = {l.up_offset, l.down_offset, l.bytes};
  for (int i = 0; i < 3; ++i) {
    const size_t n = parts[i]->nbytes();
    EXPECT_EQ(std::memcmp(blob.data() + starts[i], parts[i]->data, n), 0) << "part " << i;
    for (size_t b = starts[i] + n; b < ends[i]; ++b) ASSERT_EQ(blob[b], 0) << "padding byte " << b;
  }
  model->experts().release(layer, 1);
}

}  // namespace seedling
