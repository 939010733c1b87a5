// cuda/vram_experts.cpp - placement of routed experts in VRAM (all, or a slot cache over pinned host memory or over
// the streamed provider's RAM slot cache).
#include "cuda/vram_experts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "cuda/device_layout.h"
#include "experts/streamed_experts.h"

namespace seedling::cuda {

namespace {

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

double gb(uint64_t b) {
  return double(b) / 1e9;
}

int first_moe_layer(const ModelConfig& c) {
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.layer_has_experts[size_t(l)]) return l;
  }
  return -1;
}

}  // namespace

ExpertLayout packed_expert_layout(Model& model, int layer) {
  const ModelConfig& c = model.config();
  ExpertLayout l;
  const int first = layer >= 0 ? layer : first_moe_layer(c);
  if (first < 0 || !c.layer_has_experts[size_t(first)]) return l;
  const ExpertWeights ew = model.experts().acquire(first, 0);
  l.gate_up = ew.gate.codec;
  l.down = ew.down.codec;
  l.hidden = c.hidden_size;
  l.intermediate = c.moe_intermediate_size;
  l.up_offset = round_up(ew.gate.nbytes(), 256);
  l.down_offset = l.up_offset + round_up(ew.up.nbytes(), 256);
  l.bytes = l.down_offset + round_up(ew.down.nbytes(), 256);
  model.experts().release(first, 0);
  return l;
}

ExpertLayout expert_layout(Model& model, int layer) {
  return device_expert_layout(packed_expert_layout(model, layer));
}

size_t expert_slot_bytes(Model& model) {
  size_t bytes = 0;
  for (int l = 0; l < model.config().num_layers; ++l) {
    if (model.config().layer_has_experts[size_t(l)]) bytes = std::max(bytes, expert_layout(model, l).bytes);
  }
  return bytes;
}

void VramExperts::land(uint8_t* dst, const uint8_t* src, int layer, cudaStream_t stream) {
  const ExpertLayout& packed = packed_[size_t(layer)];
  if (!rearranged_on_device(packed)) {
    check(cudaMemcpyAsync(dst, src, packed.bytes, cudaMemcpyHostToDevice, stream), "copying an expert to VRAM");
    return;
  }
  check(cudaMemcpyAsync(vram_staging_, src, packed.bytes, cudaMemcpyHostToDevice, stream), "copying an expert to VRAM");
  expert_to_device_layout(vram_staging_, packed, dst, layouts_[size_t(layer)], stream);
}

VramExperts::VramExperts(Model& model, const CudaForwardOptions& o, uint64_t free_bytes, cudaStream_t compute)
    : compute_(compute) {
  const ModelConfig& c = model.config();
  num_layers_ = c.num_layers;
  num_experts_ = c.num_experts;
  layer_index_.assign(size_t(c.num_layers), -1);
  int moe_layers = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.layer_has_experts[size_t(l)]) layer_index_[size_t(l)] = moe_layers++;
  }
  if (moe_layers == 0) return;
  ExpertProvider& provider = model.experts();
  // One layout per layer: its first expert's codecs and shapes; another expert of the layer that differs is refused.
  // A slot of the cache holds the largest layer's blob.
  packed_.assign(size_t(c.num_layers), ExpertLayout{});
  layouts_.assign(size_t(c.num_layers), ExpertLayout{});
  bool rearranged = false;
  for (int l = 0; l < c.num_layers; ++l) {
    if (layer_index_[size_t(l)] < 0) continue;
    packed_[size_t(l)] = packed_expert_layout(model, l);
    layouts_[size_t(l)] = device_expert_layout(packed_[size_t(l)]);
    slot_bytes_ = std::max(slot_bytes_, layouts_[size_t(l)].bytes);
    packed_max_ = std::max(packed_max_, packed_[size_t(l)].bytes);
    rearranged = rearranged || rearranged_on_device(packed_[size_t(l)]);
    for (const Codec codec : {layouts_[size_t(l)].gate_up, layouts_[size_t(l)].down}) {
      if (!has_kernel(codec)) {
        fail("--device cuda: layer {}'s routed experts are stored as {}, which has no CUDA kernel ({} have)", l,
             codec_name(codec), kernel_codec_names());
      }
    }
  }
  // Expert parallelism: only this rank's experts, every one in VRAM (a VRAM cache per rank is not built yet).
  const ExpertPlacement* placement = o.placement.get();
  const int rank = o.transport != nullptr ? o.transport->rank() : 0;
  const auto here = [&](int l, int e) { return placement == nullptr || placement->owner_of(l, e) == rank; };
  uint64_t total = 0;  // every held blob in its own layer's VRAM layout
  for (int l = 0; l < c.num_layers; ++l) {
    for (int e = 0; layer_index_[size_t(l)] >= 0 && e < c.num_experts; ++e) {
      total += here(l, e) ? layouts_[size_t(l)].bytes : 0;
    }
  }
  const uint64_t minimum = uint64_t(c.experts_per_token) * slot_bytes_;
  const uint64_t reserve = (uint64_t(1) << 30) + free_bytes / 20;  // KV caches and activations
  // Where a cache's misses come from: the streamed provider (three tiers) when the model has one, i.e. when a RAM
  // budget or slot count was given or the experts do not fit in memory (cli/expert_placement.cpp); else pinned
  // host memory holding every expert.
  auto* streamed = dynamic_cast<StreamedExperts*>(&provider);
  const std::string source =
      streamed ? fmt::format(
                     "three tiers: VRAM slots <- the streamed provider's RAM slot cache ({} slots, {:.3f} GB) <- "
                     "NVMe, since the experts are streamed (a RAM budget or slot count was given, or they do not "
                     "fit in memory); no host copy of every expert",
                     streamed->slots(), gb(uint64_t(streamed->slots()) * streamed->slot_bytes()))
               : fmt::format(
                     "misses copied from pinned host memory holding all {:.3f} GB of experts, since they are "
                     "mapped (they fit in memory and no --ram-budget or --expert-slots was given)",
                     gb(total));
  uint64_t budget = o.vram_budget;
  if (o.budget_given) {
    if (budget < minimum) {
      fail("--vram-budget {}: one layer's top-{} experts need at least {} bytes ({:.2f} MB, {} bytes each)", budget,
           c.experts_per_token, minimum, double(minimum) / 1e6, slot_bytes_);
    }
    resident_ = budget >= total;
    if (o.verbose) {
      std::fprintf(stderr, "experts: --vram-budget %.3f GB %s the %.3f GB of experts%s%s\n", gb(budget),
                   resident_ ? "holds all" : "holds part of", gb(total), resident_ ? "" : "; ",
                   resident_ ? "" : source.c_str());
    }
  } else {
    const uint64_t room = free_bytes > reserve ? free_bytes - reserve : 0;
    resident_ = total <= room;
    if (!resident_ && room < minimum) {
      fail(
          "not enough VRAM: {:.2f} GB free after the dense weights, a {:.2f} GB reserve, and one layer's top-{} "
          "experts need {:.3f} GB",
          gb(free_bytes), gb(reserve), c.experts_per_token, gb(minimum));
    }
    budget = room;
    if (o.verbose) {
      std::fprintf(stderr,
                   "experts: %s: %.3f GB of experts, %.2f GB of VRAM free after the dense weights minus a "
                   "%.2f GB reserve%s%s\n",
                   resident_ ? "all in VRAM" : "VRAM slot cache", gb(total), gb(free_bytes), gb(reserve),
                   resident_ ? "" : "; ", resident_ ? "" : source.c_str());
    }
  }
  if (placement != nullptr && !resident_) {
    fail(
        "--devices: rank {}'s {:.3f} GB of experts do not fit its VRAM; with --devices every expert must be in VRAM "
        "(no VRAM cache per rank yet): add GPUs, or free VRAM",
        rank, gb(total));
  }
  const size_t table_entries = size_t(c.num_layers) * size_t(c.num_experts);
  if (rearranged) check(cudaMalloc(&vram_staging_, packed_max_), "allocating an expert staging blob");
  if (resident_) {
    check(cudaMalloc(&vram_, size_t(total)), "allocating VRAM for the experts");
    check(cudaMalloc(&tables_dev_, table_entries * sizeof(void*)), "allocating the expert tables");
    std::vector<const uint8_t*> tables(table_entries, nullptr);
    std::vector<uint8_t> packed(packed_max_);
    size_t next = 0;  // bytes of the blobs so far, in (layer, expert) order; another rank's experts are null entries
    for (int l = 0; l < c.num_layers; ++l) {
      const int li = layer_index_[size_t(l)];
      if (li < 0) continue;
      for (int e = 0; e < c.num_experts; ++e) {
        if (!here(l, e)) continue;
        uint8_t* blob = vram_ + next;
        next += layouts_[size_t(l)].bytes;
        fetch_expert_blob(provider, l, e, packed_[size_t(l)], packed.data());
        land(blob, packed.data(), l, nullptr);
        check(cudaStreamSynchronize(nullptr), "copying an expert to VRAM");  // `packed` is refilled next
        tables[size_t(l) * size_t(c.num_experts) + size_t(e)] = blob;
      }
    }
    check(cudaMemcpy(tables_dev_, tables.data(), table_entries * sizeof(void*), cudaMemcpyHostToDevice),
          "uploading the expert tables");
    why_not_direct_ = "every expert is in VRAM";
    if (o.verbose && o.vram_admit < CudaForwardOptions::kAdmitEveryMiss) {
      std::fprintf(stderr, "experts: --vram-admit %d changes nothing here: %s\n", o.vram_admit, why_not_direct_);
    }
    return;
  }
  const int slots = int(std::min<uint64_t>(budget / slot_bytes_, uint64_t(moe_layers) * uint64_t(c.num_experts)));
  if (streamed) {
    start_three_tier(*streamed, c.experts_per_token);
  } else {
    host_offset_.assign(size_t(c.num_layers), 0);
    size_t host_bytes = 0;
    for (int l = 0; l < c.num_layers; ++l) {
      host_offset_[size_t(l)] = host_bytes;
      if (layer_index_[size_t(l)] >= 0) host_bytes += size_t(c.num_experts) * packed_[size_t(l)].bytes;
    }
    check(cudaHostAlloc(&host_, host_bytes, cudaHostAllocDefault), "allocating pinned host memory for the experts");
    for (int l = 0; l < c.num_layers; ++l) {
      if (layer_index_[size_t(l)] < 0) continue;
      for (int e = 0; e < c.num_experts; ++e) {
        fetch_expert_blob(provider, l, e, packed_[size_t(l)], host_blob(l, e));
      }
    }
  }
  check(cudaMalloc(&vram_, size_t(slots) * slot_bytes_), "allocating the VRAM expert slots");
  check(cudaMalloc(&tables_dev_, size_t(c.num_experts) * sizeof(void*)), "allocating the expert table");
  check(cudaHostAlloc(&table_host_, size_t(c.num_experts) * sizeof(void*), cudaHostAllocDefault),
        "allocating the expert table staging");
  for (int e = 0; e < c.num_experts; ++e) table_host_[e] = nullptr;
  check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "creating the expert copy stream");
  check(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "creating the expert copy event");
  check(cudaEventCreate(&copy_start_), "creating the expert copy timing event");
  check(cudaEventCreate(&copy_end_), "creating the expert copy timing event");
  cache_ = std::make_unique<ExpertSlotCache>(slots, o.policy);
  guess_pending_.assign(size_t(slots), 0);
  admit_per_step_ = o.vram_admit;
  // Direct reads need each blob's host bytes to be what the kernels read (no layer rearranged in VRAM).
  bool same = !streamed;
  for (int l = 0; l < c.num_layers; ++l) {
    const ExpertLayout &d = layouts_[size_t(l)], &h = packed_[size_t(l)];
    same = same &&
           (layer_index_[size_t(l)] < 0 || (d.gate_up == h.gate_up && d.down == h.down && d.up_offset == h.up_offset &&
                                            d.down_offset == h.down_offset && d.bytes == h.bytes));
  }
  const char* off = std::getenv("SEEDLING_NO_DIRECT_MISSES");
  if (same && (off == nullptr || off[0] == '\0' || off[0] == '0')) {
    check(cudaMalloc(&direct_dev_, table_entries * sizeof(void*)), "allocating the direct expert tables");
    check(cudaHostAlloc(&direct_host_, table_entries * sizeof(void*), cudaHostAllocDefault),
          "allocating the direct expert tables' staging");
    if (o.verbose && admit_per_step_ < CudaForwardOptions::kAdmitEveryMiss) {
      std::fprintf(stderr,
                   "experts: decode reads misses in place and copies at most %d a step into the cache "
                   "(--vram-admit)\n",
                   admit_per_step_);
    }
  } else {
    why_not_direct_ = streamed ? "decode copies its misses into the cache before reading them (three tiers)"
                      : !same  ? "decode copies its misses into the cache before reading them (some layer's experts "
                                 "are rearranged in VRAM)"
                               : "decode copies its misses into the cache before reading them "
                                 "(SEEDLING_NO_DIRECT_MISSES is set)";
    if (o.verbose && admit_per_step_ < CudaForwardOptions::kAdmitEveryMiss) {
      std::fprintf(stderr, "experts: --vram-admit %d changes nothing here: %s\n", admit_per_step_, why_not_direct_);
    }
  }
}

void VramExperts::start_three_tier(ExpertProvider& provider, int buffers) {
  provider_ = &provider;
  check(cudaHostAlloc(&staging_, size_t(buffers) * packed_max_, cudaHostAllocDefault),
        "allocating the pinned expert staging buffers");
  std::vector<uint8_t*> ring;
  for (int b = 0; b < buffers; ++b) {
    ring.push_back(staging_ + size_t(b) * packed_max_);
    cudaEvent_t start = nullptr, end = nullptr;
    check(cudaEventCreate(&start), "creating a staging copy timing event");
    staged_start_.push_back(start);
    check(cudaEventCreate(&end), "creating a staging copy timing event");
    staged_end_.push_back(end);
  }
  auto send = [this](int b, const uint8_t* data, int layer, int slot) {
    check(cudaEventRecord(staged_start_[size_t(b)], copy_), "timing an expert copy");
    land(vram_ + size_t(slot) * slot_bytes_, data, layer, copy_);
    check(cudaEventRecord(staged_end_[size_t(b)], copy_), "timing an expert copy");
  };
  ring_ = std::make_unique<StagingRing>(std::move(ring), send, [this](int b) { reclaim(b); });
}

void VramExperts::reclaim(int b) {
  check(cudaEventSynchronize(staged_end_[size_t(b)]), "waiting for an expert copy");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, staged_start_[size_t(b)], staged_end_[size_t(b)]), "timing an expert copy");
  copy_seconds_ += double(ms) / 1e3;
}

VramExperts::~VramExperts() {
  if (copy_) cudaStreamSynchronize(copy_);  // no copy may still read a staging buffer or write a slot
  for (cudaEvent_t e : staged_start_) cudaEventDestroy(e);
  for (cudaEvent_t e : staged_end_) cudaEventDestroy(e);
  if (staging_) cudaFreeHost(staging_);
  if (copied_) cudaEventDestroy(copied_);
  if (copy_start_) cudaEventDestroy(copy_start_);
  if (copy_end_) cudaEventDestroy(copy_end_);
  if (copy_) cudaStreamDestroy(copy_);
  if (vram_) cudaFree(vram_);
  if (vram_staging_) cudaFree(vram_staging_);
  if (tables_dev_) cudaFree(tables_dev_);
  if (direct_dev_) cudaFree(direct_dev_);
  if (direct_host_) cudaFreeHost(direct_host_);
  if (host_) cudaFreeHost(host_);
  if (table_host_) cudaFreeHost(table_host_);
}

uint8_t* VramExperts::host_blob(int layer, int expert) const {
  return host_ + host_offset_[size_t(layer)] + size_t(expert) * packed_[size_t(layer)].bytes;
}

void VramExperts::run_layer(int layer, std::span<const int> used,
                            const std::function<void(const uint8_t* const*, bool only_pass)>& run) {
  direct_stale_ = true;
  settle_learn_timing();  // copy_start_ and copy_end_ are this pass's now
  size_t next = 0;
  std::vector<int> pinned;
  std::vector<SlotFill> fills;  // three tiers: this pass's misses, fetched through the provider
  while (next < used.size()) {
    // One pass: admit experts until every slot is pinned by this pass. All pinned: the pass's copies are timed
    // between two events on the copy stream, which carries nothing else; three tiers: each copy is timed.
    bool copied = false;
    for (; next < used.size(); ++next) {
      const int e = used[next];
      const auto a = cache_->access(expert_key(layer, e));
      if (!a) break;
      uint8_t* slot = vram_ + size_t(a->slot) * slot_bytes_;
      if (guess_pending_[size_t(a->slot)] != 0) {
        prefetch_used_ += a->hit ? 1 : 0;  // a miss here means the guess was evicted before its use
        guess_pending_[size_t(a->slot)] = 0;
      }
      if (!a->hit) {
        if (ring_) {
          fills.push_back({e, a->slot});
        } else {
          if (!copied) check(cudaEventRecord(copy_start_, copy_), "timing the expert copies");
          copied = true;
          land(slot, host_blob(layer, e), layer, copy_);
        }
        bytes_copied_ += packed_[size_t(layer)].bytes;
      }
      table_host_[e] = slot;
      pinned.push_back(a->slot);
    }
    SEEDLING_CHECK(!pinned.empty(), "VRAM expert cache: no slot for layer {}", layer);
    if (!fills.empty()) {
      try {
        ring_->fetch(*provider_, layer, packed_[size_t(layer)], fills);
      } catch (...) {
        // A failed read or a bad blob: the missed slots never got their experts, so they must not count as held.
        cudaStreamSynchronize(copy_);
        for (const SlotFill& f : fills) cache_->drop(f.slot);
        for (int s : pinned) {
          if (cache_->occupied(s) && cache_->pins(s) > 0) cache_->unpin(s);
        }
        for (int e = 0; e < num_experts_; ++e) table_host_[e] = nullptr;
        throw;
      }
      fills.clear();
    }
    if (copied) check(cudaEventRecord(copy_end_, copy_), "timing the expert copies");
    check(cudaEventRecord(copied_, copy_), "recording the expert copies");
    check(cudaStreamWaitEvent(compute_, copied_, 0), "waiting for the expert copies");
    check(cudaMemcpyAsync(tables_dev_, table_host_, size_t(num_experts_) * sizeof(void*), cudaMemcpyHostToDevice,
                          compute_),
          "uploading the expert table");
    run(tables_dev_, pinned.size() == used.size());
    // The staging table and the slots are reused by the next pass or layer only after this pass has finished.
    check(cudaStreamSynchronize(compute_), "running a pass of experts");
    if (copied) {
      float ms = 0.0f;
      check(cudaEventElapsedTime(&ms, copy_start_, copy_end_), "timing the expert copies");
      copy_seconds_ += double(ms) / 1e3;
    }
    if (ring_) ring_->drain();  // the copies finished before the pass ran: this only adds up their times
    for (int s : pinned) cache_->unpin(s);
    pinned.clear();
    for (int e = 0; e < num_experts_; ++e) table_host_[e] = nullptr;
  }
}

void VramExperts::prefetch(int layer, std::span<const int> experts) {
  SEEDLING_CHECK(cache_ && !ring_, "VRAM expert prefetch needs the cache fed from pinned host memory");
  direct_stale_ = true;
  for (int e : experts) {
    const auto a = cache_->admit(expert_key(layer, e));
    if (!a) continue;  // in VRAM already, or every slot pinned
    land(vram_ + size_t(a->slot) * slot_bytes_, host_blob(layer, e), layer, copy_);
    guess_pending_[size_t(a->slot)] = 1;
    ++prefetched_;
    prefetch_bytes_ += packed_[size_t(layer)].bytes;
  }
}

void VramExperts::refresh_direct() {
  SEEDLING_CHECK(direct(), "VRAM experts: direct reads are off");
  if (!direct_stale_) return;
  for (int l = 0; l < num_layers_; ++l) {
    if (layer_index_[size_t(l)] < 0) continue;
    for (int e = 0; e < num_experts_; ++e) {
      const int slot = cache_->find(expert_key(l, e));
      direct_host_[size_t(l) * size_t(num_experts_) + size_t(e)] =
          slot >= 0 ? vram_ + size_t(slot) * slot_bytes_ : host_blob(l, e);
    }
  }
  // A prefetch's copies may still be filling slots the tables now name.
  check(cudaEventRecord(copied_, copy_), "recording the expert copies");
  check(cudaStreamWaitEvent(compute_, copied_, 0), "waiting for the expert copies");
  check(cudaMemcpyAsync(direct_dev_, direct_host_, size_t(num_layers_) * size_t(num_experts_) * sizeof(void*),
                        cudaMemcpyHostToDevice, compute_),
        "uploading the direct expert tables");
  direct_stale_ = false;
}

void VramExperts::learn(std::span<const int> ids, int k) {
  SEEDLING_CHECK(direct() && ids.size() == size_t(num_layers_) * size_t(k), "VRAM experts: learn() needs {} routes",
                 size_t(num_layers_) * size_t(k));
  settle_learn_timing();
  bool copied = false;
  int admitted = 0;  // this step's misses copied into slots, at most admit_per_step_
  for (int l = 0; l < num_layers_; ++l) {
    if (layer_index_[size_t(l)] < 0) continue;
    for (int s = 0; s < k; ++s) {
      const int e = ids[size_t(l) * size_t(k) + size_t(s)];
      SEEDLING_CHECK(e >= 0 && e < num_experts_, "VRAM experts: layer {} routed to expert {} of {}", l, e,
                     num_experts_);
      // Past the cap a miss stays out of the cache: read in place, counted as a miss, nothing evicted for it.
      if (admitted >= admit_per_step_ && cache_->find(expert_key(l, e)) < 0) {
        ++left_out_;
        continue;
      }
      const auto a = cache_->access(expert_key(l, e));
      if (!a) continue;  // every slot pinned: not between steps, where nothing is
      if (guess_pending_[size_t(a->slot)] != 0) {
        prefetch_used_ += a->hit ? 1 : 0;
        guess_pending_[size_t(a->slot)] = 0;
      }
      if (!a->hit) {
        if (!copied) check(cudaEventRecord(copy_start_, compute_), "timing the expert copies");
        copied = true;
        ++admitted;
        land(vram_ + size_t(a->slot) * slot_bytes_, host_blob(l, e), l, compute_);
        bytes_copied_ += packed_[size_t(l)].bytes;
        direct_stale_ = true;
      }
      cache_->unpin(a->slot);
    }
  }
  if (copied) {
    check(cudaEventRecord(copy_end_, compute_), "timing the expert copies");
    learn_timed_ = true;
  }
}

void VramExperts::settle_learn_timing() const {
  if (!learn_timed_) return;
  check(cudaEventSynchronize(copy_end_), "waiting for the expert copies");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, copy_start_, copy_end_), "timing the expert copies");
  copy_seconds_ += double(ms) / 1e3;
  learn_timed_ = false;
}

ExpertStats VramExperts::stats() const {
  settle_learn_timing();
  ExpertStats s;
  if (!cache_) return s;
  s.hits = cache_->hits();
  s.misses = cache_->misses() + left_out_;
  s.bytes_read = bytes_copied_;
  s.read_busy_s = copy_seconds_;  // so read_gb_per_s() is the PCIe rate of the misses
  s.reads = cache_->misses();
  s.slots = cache_->size();
  s.slot_bytes = slot_bytes_;
  s.policy = policy_name(cache_->policy());
  s.vram_copies = true;
  s.prefetched = prefetched_;
  s.prefetch_used = prefetch_used_;
  s.prefetch_bytes = prefetch_bytes_;
  return s;
}

}  // namespace seedling::cuda
