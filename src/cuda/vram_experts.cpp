// cuda/vram_experts.cpp - placement of routed experts in VRAM (all, or a slot cache over pinned host memory).
#include "cuda/vram_experts.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace seedling::cuda {

namespace {

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

double gb(uint64_t b) {
  return double(b) / 1e9;
}

// Copies one expert's three matrices into its blob (host or device memory, by `to_device`).
void write_blob(const ExpertWeights& ew, const ExpertLayout& l, uint8_t* blob, bool to_device) {
  const ops::Matrix* parts[3] = {&ew.gate, &ew.up, &ew.down};
  const size_t offsets[3] = {0, l.up_offset, l.down_offset};
  for (int i = 0; i < 3; ++i) {
    if (to_device) {
      check(cudaMemcpy(blob + offsets[i], parts[i]->data, parts[i]->nbytes(), cudaMemcpyHostToDevice),
            "copying an expert to VRAM");
    } else {
      std::memcpy(blob + offsets[i], parts[i]->data, parts[i]->nbytes());
    }
  }
}

int first_moe_layer(const ModelConfig& c) {
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.layer_has_experts[size_t(l)]) return l;
  }
  return -1;
}

}  // namespace

ExpertLayout expert_layout(Model& model) {
  const ModelConfig& c = model.config();
  ExpertLayout l;
  const int first = first_moe_layer(c);
  if (first < 0) return l;
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
  // One layout for every expert: the first expert's codecs and shapes; any other expert that differs is refused.
  layout_ = expert_layout(model);
  for (const Codec codec : {layout_.gate_up, layout_.down}) {
    if (!has_kernel(codec)) {
      fail(
          "--device cuda: the routed experts are stored as {}, which has no CUDA kernel yet (f32, f16, bf16, "
          "q8_g32, q8_g64, q4_g32, q4_g64 have)",
          codec_name(codec));
    }
  }
  const uint64_t total = uint64_t(moe_layers) * uint64_t(c.num_experts) * layout_.bytes;
  const uint64_t minimum = uint64_t(c.experts_per_token) * layout_.bytes;
  const uint64_t reserve = (uint64_t(1) << 30) + free_bytes / 20;  // KV caches and activations
  uint64_t budget = o.vram_budget;
  if (o.budget_given) {
    if (budget < minimum) {
      fail("--vram-budget {}: one layer's top-{} experts need at least {} bytes ({:.2f} MB, {} bytes each)", budget,
           c.experts_per_token, minimum, double(minimum) / 1e6, layout_.bytes);
    }
    resident_ = budget >= total;
    if (o.verbose) {
      std::fprintf(stderr, "experts: --vram-budget %.3f GB %s the %.3f GB of experts\n", gb(budget),
                   resident_ ? "holds all" : "holds part of", gb(total));
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
                   "%.2f GB reserve\n",
                   resident_ ? "all in VRAM" : "VRAM slot cache over pinned host memory", gb(total), gb(free_bytes),
                   gb(reserve));
    }
  }
  auto check_same = [&](int l, int e, const ExpertWeights& ew) {
    if (ew.gate.codec != layout_.gate_up || ew.up.codec != layout_.gate_up || ew.down.codec != layout_.down ||
        ew.gate.rows != layout_.intermediate || ew.gate.cols != layout_.hidden || ew.down.rows != layout_.hidden) {
      fail(
          "layer {} expert {}: codecs {}/{}/{} differ from the first expert's {}/{}/{} (the CUDA forward needs one "
          "expert layout)",
          l, e, codec_name(ew.gate.codec), codec_name(ew.up.codec), codec_name(ew.down.codec),
          codec_name(layout_.gate_up), codec_name(layout_.gate_up), codec_name(layout_.down));
    }
  };
  const size_t table_entries = size_t(c.num_layers) * size_t(c.num_experts);
  if (resident_) {
    check(cudaMalloc(&vram_, size_t(total)), "allocating VRAM for the experts");
    check(cudaMalloc(&tables_dev_, table_entries * sizeof(void*)), "allocating the expert tables");
    std::vector<const uint8_t*> tables(table_entries, nullptr);
    for (int l = 0; l < c.num_layers; ++l) {
      const int li = layer_index_[size_t(l)];
      if (li < 0) continue;
      for (int e = 0; e < c.num_experts; ++e) {
        uint8_t* blob = vram_ + (size_t(li) * size_t(c.num_experts) + size_t(e)) * layout_.bytes;
        const ExpertWeights ew = provider.acquire(l, e);
        check_same(l, e, ew);
        write_blob(ew, layout_, blob, true);
        provider.release(l, e);
        tables[size_t(l) * size_t(c.num_experts) + size_t(e)] = blob;
      }
    }
    check(cudaMemcpy(tables_dev_, tables.data(), table_entries * sizeof(void*), cudaMemcpyHostToDevice),
          "uploading the expert tables");
    return;
  }
  const int slots = int(std::min<uint64_t>(budget / layout_.bytes, uint64_t(moe_layers) * uint64_t(c.num_experts)));
  check(cudaHostAlloc(&host_, size_t(total), cudaHostAllocDefault), "allocating pinned host memory for the experts");
  for (int l = 0; l < c.num_layers; ++l) {
    if (layer_index_[size_t(l)] < 0) continue;
    for (int e = 0; e < c.num_experts; ++e) {
      const ExpertWeights ew = provider.acquire(l, e);
      check_same(l, e, ew);
      write_blob(ew, layout_, host_blob(l, e), false);
      provider.release(l, e);
    }
  }
  check(cudaMalloc(&vram_, size_t(slots) * layout_.bytes), "allocating the VRAM expert slots");
  check(cudaMalloc(&tables_dev_, size_t(c.num_experts) * sizeof(void*)), "allocating the expert table");
  check(cudaHostAlloc(&table_host_, size_t(c.num_experts) * sizeof(void*), cudaHostAllocDefault),
        "allocating the expert table staging");
  for (int e = 0; e < c.num_experts; ++e) table_host_[e] = nullptr;
  check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "creating the expert copy stream");
  check(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "creating the expert copy event");
  check(cudaEventCreate(&copy_start_), "creating the expert copy timing event");
  check(cudaEventCreate(&copy_end_), "creating the expert copy timing event");
  cache_ = std::make_unique<ExpertSlotCache>(slots, EvictionPolicy::lru);
}

VramExperts::~VramExperts() {
  if (copied_) cudaEventDestroy(copied_);
  if (copy_start_) cudaEventDestroy(copy_start_);
  if (copy_end_) cudaEventDestroy(copy_end_);
  if (copy_) cudaStreamDestroy(copy_);
  if (vram_) cudaFree(vram_);
  if (tables_dev_) cudaFree(tables_dev_);
  if (host_) cudaFreeHost(host_);
  if (table_host_) cudaFreeHost(table_host_);
}

uint8_t* VramExperts::host_blob(int layer, int expert) const {
  const size_t li = size_t(layer_index_[size_t(layer)]);
  return host_ + (li * size_t(num_experts_) + size_t(expert)) * layout_.bytes;
}

void VramExperts::run_layer(int layer, std::span<const int> used,
                            const std::function<void(const uint8_t* const*, bool only_pass)>& run) {
  size_t next = 0;
  std::vector<int> pinned;
  while (next < used.size()) {
    // One pass: admit experts until every slot is pinned by this pass. The pass's copies are timed between two
    // events on the copy stream, which carries nothing else.
    bool copied = false;
    for (; next < used.size(); ++next) {
      const int e = used[next];
      const auto a = cache_->access(expert_key(layer, e));
      if (!a) break;
      uint8_t* slot = vram_ + size_t(a->slot) * layout_.bytes;
      if (!a->hit) {
        if (!copied) check(cudaEventRecord(copy_start_, copy_), "timing the expert copies");
        copied = true;
        check(cudaMemcpyAsync(slot, host_blob(layer, e), layout_.bytes, cudaMemcpyHostToDevice, copy_),
              "copying an expert to its VRAM slot");
        bytes_copied_ += layout_.bytes;
      }
      table_host_[e] = slot;
      pinned.push_back(a->slot);
    }
    SEEDLING_CHECK(!pinned.empty(), "VRAM expert cache: no slot for layer {}", layer);
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
    for (int s : pinned) cache_->unpin(s);
    pinned.clear();
    for (int e = 0; e < num_experts_; ++e) table_host_[e] = nullptr;
  }
}

ExpertStats VramExperts::stats() const {
  ExpertStats s;
  if (!cache_) return s;
  s.hits = cache_->hits();
  s.misses = cache_->misses();
  s.bytes_read = bytes_copied_;
  s.read_busy_s = copy_seconds_;  // so read_gb_per_s() is the PCIe rate of the misses
  s.reads = cache_->misses();
  s.slots = cache_->size();
  s.slot_bytes = layout_.bytes;
  s.policy = policy_name(cache_->policy());
  s.vram_copies = true;
  return s;
}

}  // namespace seedling::cuda
