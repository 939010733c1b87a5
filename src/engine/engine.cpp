#include "engine/engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace seedling {

Engine::Engine(Model& model, EngineOptions options) : model_(model), options_(options) {
  if (options_.max_context <= 0) options_.max_context = model.config().max_position_embeddings;
  if (options_.max_rows_per_forward <= 0) {
    const DeviceForward* d = model_.device_forward();
    options_.max_rows_per_forward = d != nullptr ? d->rows_per_forward() : 512;
  }
}

int Engine::add_sequence() {
  const ModelConfig& c = model_.config();
  const int id = next_id_++;
  // A device forward keeps its own copy of the keys and values: then the host arrays are never allocated.
  const bool host = model_.device_forward() == nullptr;
  seqs_[id] = std::make_unique<KvCache>(cache_shapes(c), options_.kv_initial_positions, options_.max_context, host);
  return id;
}

void Engine::remove_sequence(int seq) {
  seqs_.erase(seq);
}

KvCache& Engine::cache(int seq) {
  auto it = seqs_.find(seq);
  SEEDLING_CHECK(it != seqs_.end(), "no sequence {}", seq);
  return *it->second;
}

const KvCache& Engine::kv(int seq) const {
  auto it = seqs_.find(seq);
  SEEDLING_CHECK(it != seqs_.end(), "no sequence {}", seq);
  return *it->second;
}

int Engine::length(int seq) const {
  return kv(seq).length;
}

void Engine::truncate(int seq, int n) {
  KvCache& kv = cache(seq);
  SEEDLING_CHECK(n >= 0 && n <= kv.length, "truncate sequence {} to {} of {}", seq, n, kv.length);
  if (n == kv.length) return;
  if (n == 0) return kv.reset();
  // A recurrent state holds every position at once: it cannot be rewound to a prefix (callers ask rewindable()).
  SEEDLING_CHECK(!kv.recurrent(), "sequence {} has a recurrent state: it rewinds to 0 only, not to {} of {}", seq, n,
                 kv.length);
  kv.length = n;
}

void Engine::reserve(int seq, int n) {
  KvCache& kv = cache(seq);
  kv.reserve(n);
  if (model_.device_forward() != nullptr) model_.device_forward()->allocate(kv);
}

bool Engine::rewindable(int seq) const {
  return !kv(seq).recurrent();
}

size_t Engine::kv_bytes() const {
  size_t n = 0;
  for (const auto& [id, kv] : seqs_) n += kv->bytes();
  return n;
}

std::vector<float> Engine::step(std::span<const SequenceStep> steps) {
  std::vector<float> logits;
  step(steps, logits);
  return logits;
}

void Engine::step(std::span<const SequenceStep> steps, std::vector<float>& logits) {
  const int V = model_.config().vocab_size;
  std::vector<BatchRow> rows;
  size_t wanted = 0;
  for (size_t a = 0; a < steps.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      SEEDLING_CHECK(steps[a].seq != steps[b].seq, "sequence {} appears twice in one step", steps[a].seq);
    }
  }
  for (const SequenceStep& s : steps) {
    KvCache& kv = cache(s.seq);
    const int n = int(s.tokens.size());
    if (n == 0) continue;
    kv.reserve(kv.length + n);  // throws a clear "context full" before anything is computed
    for (int j = 0; j < n; ++j) {
      const bool want = s.all_logits || j == n - 1;
      rows.push_back({s.tokens[size_t(j)], kv.length + j, &kv, want});
      wanted += want ? 1 : 0;
    }
  }
  logits.resize(wanted * size_t(V));  // every element is written by the forwards below
  // Chunks of rows: a row only reads cache positions written by earlier rows, in this chunk or a previous one.
  size_t done = 0, out = 0;
  const size_t chunk = size_t(options_.max_rows_per_forward);
  while (done < rows.size()) {
    const size_t n = std::min(chunk, rows.size() - done);
    std::span<const BatchRow> part(rows.data() + done, n);
    model_.forward(part, logits.data() + out * size_t(V));
    for (const BatchRow& r : part) out += r.want_logits ? 1 : 0;
    done += n;
  }
  // A NaN or infinity in a weight, a scale or a norm reaches the logits: an error, never a token sampled from it.
  // The test is on the exponent bits (all ones: inf or NaN), a reduction the compiler vectorises (V = 152k logits a
  // decoded token cost 61 us as a loop of isfinite with an early exit, 19 us so, on this machine's 2 cores).
  uint32_t non_finite = 0;
  for (const float v : logits) non_finite |= uint32_t((std::bit_cast<uint32_t>(v) & 0x7f800000u) == 0x7f800000u);
  if (non_finite != 0) {
    const size_t i =
        size_t(std::find_if(logits.begin(), logits.end(), [](float v) { return !std::isfinite(v); }) - logits.begin());
    fail(
        "{}: the forward gave a non-finite logit ({} at logit row {}, id {}): a weight, scale or norm of the "
        "model is NaN or infinite",
        model_.dir(), logits[i], i / size_t(V), i % size_t(V));
  }
  for (const SequenceStep& s : steps) cache(s.seq).length += int(s.tokens.size());
}

}  // namespace seedling
