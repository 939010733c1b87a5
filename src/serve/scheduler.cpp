#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace seedling::serve {

namespace {
double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool Stream::ready_within(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return !tokens_.empty() || finish_ != Finish::kRunning; });
}

Stream::Update Stream::wait() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !tokens_.empty() || finish_ != Finish::kRunning; });
  Update u;
  u.tokens.swap(tokens_);
  u.logprobs.swap(logprobs_);
  u.finish = finish_;
  u.error = error_;
  return u;
}

int Stream::reused_tokens() const {
  std::lock_guard lk(mu_);
  return reused_;
}

void Stream::push(int32_t token, TokenLogprobs* logprobs) {
  std::lock_guard lk(mu_);
  tokens_.push_back(token);
  if (logprobs != nullptr) logprobs_.push_back(std::move(*logprobs));
  cv_.notify_all();
}

void Stream::end(Finish f, std::string error) {
  std::lock_guard lk(mu_);
  finish_ = f;
  error_ = std::move(error);
  cv_.notify_all();
}

Scheduler::Scheduler(Engine& engine, SchedulerOptions options, Metrics* metrics)
    : engine_(engine), options_(options), metrics_(metrics) {
  if (options_.max_seqs < 1) fail("--max-seqs must be at least 1, got {}", options_.max_seqs);
  if (options_.max_queue < 0) fail("--max-queue must be 0 or more, got {}", options_.max_queue);
  if (options_.prompt_chunk < 1) fail("the prompt chunk must be at least 1 row, got {}", options_.prompt_chunk);
  slots_.resize(size_t(options_.max_seqs));
  for (Slot& s : slots_) s.seq = engine_.add_sequence();
  publish();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  stop();
}

void Scheduler::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Stream> Scheduler::submit(Request request) {
  if (request.prompt.empty()) fail("a request needs at least one prompt token");
  auto stream = std::make_shared<Stream>();
  stream->prompt_tokens_ = int(request.prompt.size());
  {
    std::lock_guard lk(mu_);
    if (stopping_) return nullptr;
    // A request that finds a free slot does not wait in the queue, so a queue of 0 still admits max_seqs requests.
    const int free_slots = options_.max_seqs - in_use_;
    if (int(waiting_.size()) >= free_slots + options_.max_queue) return nullptr;
    waiting_.push_back({std::move(request), stream, seconds()});
  }
  cv_.notify_all();
  return stream;
}

int Scheduler::slots_in_use() const {
  std::lock_guard lk(mu_);
  return in_use_;
}

int Scheduler::queued() const {
  std::lock_guard lk(mu_);
  return int(waiting_.size());
}

void Scheduler::publish() {
  if (metrics_ == nullptr) return;
  int queued = 0, in_use = 0;
  {
    std::lock_guard lk(mu_);
    queued = int(waiting_.size());
    in_use = in_use_;
  }
  metrics_->set_queue(queued, in_use, options_.max_seqs);
}

void Scheduler::admit() {
  while (!waiting_.empty()) {
    Job& job = waiting_.front();
    if (job.stream->cancelled()) {
      job.stream->end(Finish::kCancelled);
      waiting_.pop_front();
      continue;
    }
    // The free slot whose cache shares the longest prefix with the prompt; on ties the least recently admitted one
    // (never used first), so a cache a finished request left behind is the last to be overwritten.
    Slot* best = nullptr;
    size_t best_keep = 0;
    for (Slot& s : slots_) {
      if (s.job) continue;
      const std::vector<int32_t>& p = job.request.prompt;
      size_t keep = 0;
      while (keep < s.fed.size() && keep < p.size() && s.fed[keep] == p[keep]) ++keep;
      if (best == nullptr || keep > best_keep || (keep == best_keep && s.admitted < best->admitted)) {
        best = &s;
        best_keep = keep;
      }
    }
    if (best == nullptr) return;
    Slot& s = *best;
    const std::vector<int32_t>& p = job.request.prompt;
    if (best_keep == p.size()) --best_keep;  // the last prompt id is fed again: its logits give the first token
    // A recurrent state cannot be rewound to the shared prefix: such a model recomputes every prompt from 0.
    if (!engine_.rewindable(s.seq)) best_keep = 0;
    engine_.truncate(s.seq, int(best_keep));
    s.fed.resize(best_keep);
    s.next_prompt = best_keep;
    s.context = p;
    s.generated = 0;
    s.last = -1;
    s.sampler.emplace(job.request.sampling);
    s.admitted = admissions_++;
    {
      std::lock_guard lk(job.stream->mu_);
      job.stream->reused_ = int(best_keep);
    }
    if (metrics_ != nullptr) metrics_->add_prompt_tokens(int64_t(p.size() - best_keep), int64_t(best_keep));
    s.job.emplace(std::move(job));
    waiting_.pop_front();
    ++in_use_;
  }
}

void Scheduler::finish(Slot& s, Finish f, const std::string& error) {
  std::shared_ptr<Stream> stream = s.job->stream;
  s.job.reset();
  s.sampler.reset();
  {
    std::lock_guard lk(mu_);
    --in_use_;
  }
  publish();
  stream->end(f, error);  // last: whoever sees the end sees the slot free
}

void Scheduler::sample(Slot& s, const float* logits) {
  const int V = engine_.model().config().vocab_size;
  grammar::TokenConstraint* constraint = s.job->request.constraint.get();
  std::span<const uint64_t> allowed;
  if (constraint != nullptr && constraint->active()) {
    constraint->allowed(mask_);
    if (std::all_of(mask_.begin(), mask_.end(), [](uint64_t w) { return w == 0; })) {
      return finish(s, Finish::kError,
                    "structured output: no token of the vocabulary continues the JSON here (the vocabulary lacks the "
                    "bytes it needs)");
    }
    allowed = mask_;
  }
  const int32_t t = s.sampler->sample({logits, size_t(V)}, s.context, allowed);
  if (constraint != nullptr)
    SEEDLING_CHECK(constraint->accept(t), "the sampler picked token {}, which the mask refused", t);
  const double now = seconds();
  if (metrics_ != nullptr) {
    metrics_->add_generated_tokens(1);
    if (s.generated == 0) {
      metrics_->observe_time_to_first_token(now - s.job->submitted);
    } else {
      metrics_->observe_token_latency(now - s.last_time);
    }
  }
  s.last_time = now;
  s.context.push_back(t);
  ++s.generated;
  const Request& r = s.job->request;
  if (r.logprobs >= 0) {
    TokenLogprobs lp = token_logprobs({logits, size_t(V)}, t, r.logprobs);
    s.job->stream->push(t, &lp);
  } else {
    s.job->stream->push(t, nullptr);
  }
  if (std::find(r.stop_ids.begin(), r.stop_ids.end(), t) != r.stop_ids.end()) return finish(s, Finish::kStop);
  if (constraint != nullptr && constraint->done() && r.stop_ids.empty()) return finish(s, Finish::kStop);
  if (s.generated >= r.max_tokens) return finish(s, Finish::kLength);
  if (int(s.fed.size()) + 1 > engine_.max_context()) return finish(s, Finish::kLength);
  s.last = t;
}

void Scheduler::loop() {
  std::vector<Slot*> order;
  std::vector<float> logits;  // reused step after step (Engine::step)
  std::vector<SequenceStep> steps;
  std::vector<Slot*> stepped;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !waiting_.empty() || in_use_ > 0; });
      if (stopping_) break;
      admit();
    }
    for (Slot& s : slots_) {
      if (s.job && s.job->stream->cancelled()) finish(s, Finish::kCancelled);
    }
    // Slots reading their prompt, oldest admission first, share the chunk; every decoding slot adds one row.
    order.clear();
    for (Slot& s : slots_) {
      if (s.job) order.push_back(&s);
    }
    std::sort(order.begin(), order.end(), [](const Slot* a, const Slot* b) { return a->admitted < b->admitted; });
    steps.clear();
    stepped.clear();
    int budget = options_.prompt_chunk;
    for (Slot* s : order) {
      const std::vector<int32_t>& p = s->job->request.prompt;
      if (s->next_prompt < p.size()) {
        const size_t n = std::min(p.size() - s->next_prompt, size_t(std::max(budget, 0)));
        if (n == 0) continue;
        budget -= int(n);
        steps.push_back({s->seq, {p.data() + s->next_prompt, n}, false});
      } else {
        steps.push_back({s->seq, {&s->last, 1}, false});
      }
      stepped.push_back(s);
    }
    publish();
    if (steps.empty()) continue;
    try {
      engine_.step(steps, logits);
    } catch (const std::exception& e) {
      for (Slot* s : stepped) {
        s->fed.resize(size_t(engine_.length(s->seq)));
        finish(*s, Finish::kError, e.what());
      }
      continue;
    }
    const size_t V = size_t(engine_.model().config().vocab_size);
    for (size_t i = 0; i < stepped.size(); ++i) {
      Slot& s = *stepped[i];
      s.fed.insert(s.fed.end(), steps[i].tokens.begin(), steps[i].tokens.end());
      const std::vector<int32_t>& p = s.job->request.prompt;
      if (s.next_prompt < p.size()) {
        s.next_prompt += steps[i].tokens.size();
        if (s.next_prompt < p.size()) continue;  // more prompt to read
      }
      sample(s, logits.data() + i * V);
    }
    if (metrics_ != nullptr) metrics_->set_expert_stats(engine_.model().experts().stats());
    publish();
  }
  for (Slot& s : slots_) {
    if (s.job) finish(s, Finish::kCancelled);
  }
  std::lock_guard lk(mu_);
  for (Job& j : waiting_) j.stream->end(Finish::kCancelled);
  waiting_.clear();
}

}  // namespace seedling::serve
