#include "serve/metrics.h"

#include <fmt/format.h>

namespace seedling::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string s = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < bounds_.size(); ++b) {
    cumulative += counts_[b];
    s += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[b], cumulative);
  }
  s += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return s;
}

namespace {
const std::vector<double> kSeconds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

Metrics::Metrics() : ttft_(kSeconds), token_latency_(kSeconds) {}

void Metrics::count_request(const std::string& path, int status) {
  std::lock_guard lk(mu_);
  ++requests_[{path, status}];
}

void Metrics::add_prompt_tokens(int64_t fed, int64_t reused) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += uint64_t(fed);
  reused_tokens_ += uint64_t(reused);
}

void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard lk(mu_);
  generated_tokens_ += uint64_t(n);
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lk(mu_);
  ttft_.observe(seconds);
}

void Metrics::observe_token_latency(double seconds) {
  std::lock_guard lk(mu_);
  token_latency_.observe(seconds);
}

void Metrics::set_queue(int queued, int slots_in_use, int slots) {
  std::lock_guard lk(mu_);
  queued_ = queued;
  slots_in_use_ = slots_in_use;
  slots_ = slots;
}

void Metrics::set_expert_stats(const ExpertStats& s) {
  std::lock_guard lk(mu_);
  experts_ = s;
}

int Metrics::slots_in_use() const {
  std::lock_guard lk(mu_);
  return slots_in_use_;
}

std::string Metrics::render() const {
  std::lock_guard lk(mu_);
  std::string s = "# HELP seedling_requests_total HTTP requests answered, by path and status.\n";
  s += "# TYPE seedling_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    s += fmt::format("seedling_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    s += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    s += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("seedling_prompt_tokens_total", "Prompt tokens fed to the model (reused prefix tokens not included).",
          prompt_tokens_);
  counter("seedling_prompt_tokens_reused_total", "Prompt tokens found in a slot's cache and not fed again.",
          reused_tokens_);
  counter("seedling_generated_tokens_total", "Tokens generated.", generated_tokens_);
  gauge("seedling_queue_depth", "Requests waiting for a sequence slot.", queued_);
  gauge("seedling_slots_in_use", "Sequence slots running a request.", slots_in_use_);
  gauge("seedling_slots", "Sequence slots (--max-seqs).", slots_);
  counter("seedling_expert_cache_hits_total", "Expert acquisitions served from the RAM slot cache.", experts_.hits);
  counter("seedling_expert_cache_misses_total", "Expert acquisitions that read from disk.", experts_.misses);
  s += ttft_.render("seedling_time_to_first_token_seconds", "From a request's arrival to its first token.");
  s += token_latency_.render("seedling_token_latency_seconds", "Between consecutive tokens of one request.");
  return s;
}

}  // namespace seedling::serve
