// serve/scheduler.h - continuous batching: one thread owns the Engine and runs every admitted request in a slot.
//
// Each step runs, in one forward, a chunk of pending prompt rows and one decode row for every decoding slot; a new
// request starts as soon as a slot is free, never after another finishes. A slot keeps the tokens of its last request
// in its KV cache, and a request takes the free slot with the longest common prefix and feeds only the rest.
// Invariant: a request gets the same tokens alone or beside others (greedy or seeded sampling). Rows never depend on
// their batch (engine.h), a prompt fed in chunks or after a reused prefix gives the logits of the prompt fed whole
// (tests/unit/serve/scheduler_test.cpp), and every request samples with its own Sampler and context.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "grammar/token_mask.h"
#include "serve/metrics.h"

namespace seedling::serve {

struct Request {
  std::vector<int32_t> prompt;  // at least one id
  int max_tokens = 16;
  SamplerParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after one of these (it is counted, and never shown as text)
  int logprobs = -1;              // -1: none; else each token's log-probability and this many alternatives
  // Structured output: each step samples among the tokens it allows and then takes the chosen one; once the value
  // is complete only stop_ids are allowed (and with none, ignore_eos, the request ends there as stopped). One per
  // request: a choice of n has its own.
  std::shared_ptr<grammar::TokenConstraint> constraint = nullptr;
};

enum class Finish { kRunning, kStop, kLength, kCancelled, kError };

// A running request as its HTTP handler sees it: tokens as they come, then how it ended.
class Stream {
 public:
  struct Update {
    std::vector<int32_t> tokens;          // new since the last wait
    std::vector<TokenLogprobs> logprobs;  // one per token when the request asked for them
    Finish finish = Finish::kRunning;
    std::string error;  // with kError
  };
  // Blocks until there are new tokens or the request has ended.
  Update wait();
  // Blocks until wait() would not block, or `timeout` passed; whether wait() would not block.
  bool ready_within(std::chrono::milliseconds timeout);
  // Asks the scheduler to end the request and free its slot at its next step (client gone, stop string seen).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  int prompt_tokens() const { return prompt_tokens_; }
  // Prompt tokens found in the slot's cache (known once the request has a slot).
  int reused_tokens() const;

 private:
  friend class Scheduler;
  void push(int32_t token, TokenLogprobs* logprobs);
  void end(Finish f, std::string error = {});

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::vector<TokenLogprobs> logprobs_;
  Finish finish_ = Finish::kRunning;
  std::string error_;
  int reused_ = 0;
  int prompt_tokens_ = 0;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int max_seqs = 8;        // sequence slots
  int max_queue = 64;      // requests waiting for a slot beyond which submit refuses
  int prompt_chunk = 256;  // prompt rows per step, over all slots still reading their prompt
};

class Scheduler {
 public:
  // Starts the scheduler thread. `metrics` (may be null) gets tokens, latencies, queue and slot use.
  Scheduler(Engine& engine, SchedulerOptions options, Metrics* metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; nullptr when max_queue requests are already waiting.
  std::shared_ptr<Stream> submit(Request request);
  // Ends every request (kCancelled) and joins the thread. Called by the destructor.
  void stop();
  int slots_in_use() const;
  int queued() const;

 private:
  struct Job {
    Request request;
    std::shared_ptr<Stream> stream;
    double submitted = 0;
  };
  struct Slot {
    int seq = -1;
    std::vector<int32_t> fed;  // ids the slot's KV cache holds, in order
    std::optional<Job> job;
    std::optional<Sampler> sampler;
    std::vector<int32_t> context;  // prompt and generated ids (repetition penalty)
    size_t next_prompt = 0;        // prompt ids before this are in the cache
    int generated = 0;
    int32_t last = -1;  // sampled, not yet fed
    double last_time = 0;
    uint64_t admitted = 0;  // order of admission (from 1; 0: never used): earlier slots read their prompts first
  };

  void loop();
  void admit();  // under mu_
  void finish(Slot& s, Finish f, const std::string& error = {});
  void sample(Slot& s, const float* logits);
  std::vector<uint64_t> mask_;  // the allowed tokens of the slot being sampled (structured output)
  void publish();

  Engine& engine_;
  SchedulerOptions options_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> waiting_;
  std::vector<Slot> slots_;
  int in_use_ = 0;
  uint64_t admissions_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace seedling::serve
