// engine/engine.h - sequences over one model: their KV caches, and forwards that mix prompt and decode rows.
//
// A step appends tokens to one or more sequences in a single forward (a prompt is many rows of one sequence;
// batched decode is one row for each of several sequences). A sequence's logits never depend on what else is in
// the batch: the kernels compute each row alone (ops/matmul.h), so decoded together = decoded alone, bit for bit.
// (The CUDA forward keeps this within forwards of fewer than 64 rows, and within forwards of 64 or more, which run
// on tensor cores with TF32 inputs: docs/architecture.md.)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"

namespace seedling {

struct EngineOptions {
  int max_context = 0;             // positions per sequence; 0: the model's max_position_embeddings
  int kv_initial_positions = 256;  // first KV allocation; doubles on demand
  int max_rows_per_forward = 0;    // long prompts run in chunks of this many rows; 0: 512 on the CPU, the device
                                   // forward's rows_per_forward() on a device
};

struct SequenceStep {
  int seq = 0;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits of every row, or only of the last
};

class Engine {
 public:
  Engine(Model& model, EngineOptions options);

  int add_sequence();
  void remove_sequence(int seq);
  int length(int seq) const;
  // Forgets positions [n, length): the next step overwrites them (reuse of a shared prompt prefix). A sequence
  // that is not rewindable() (a model with a recurrent state) truncates to 0 or to its length only.
  void truncate(int seq, int n);
  bool rewindable(int seq) const;
  // Makes room for positions [0, n) of the sequence now, in its host arrays or in the device forward's copy
  // (DeviceForward::allocate), as the step that first needs them would; an Error past the context limit.
  void reserve(int seq, int n);
  const KvCache& kv(int seq) const;
  size_t kv_bytes() const;
  int max_context() const { return options_.max_context; }
  Model& model() { return model_; }

  // Runs the steps and returns their logits, concatenated in step order: (rows wanted, vocab).
  std::vector<float> step(std::span<const SequenceStep> steps);
  // The same into `logits`, resized; a decode loop that passes one vector keeps its memory (a fresh 0.6 MB vector a
  // step is zeroed and page-faulted in, tens of microseconds a token beside a GPU step of a few milliseconds).
  void step(std::span<const SequenceStep> steps, std::vector<float>& logits);

 private:
  KvCache& cache(int seq);

  Model& model_;
  EngineOptions options_;
  int next_id_ = 0;
  std::map<int, std::unique_ptr<KvCache>> seqs_;
};

}  // namespace seedling
