// serve/metrics.h - the server's counters and latency histograms, rendered as Prometheus text for /metrics.
//
// Every method locks, so the scheduler thread and the HTTP threads update and read it at any time. A histogram's
// buckets are cumulative in the text, as Prometheus expects: bucket le=B counts every observation <= B.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "experts/expert_provider.h"

namespace seedling::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Lines of a Prometheus histogram named `name` (buckets, +Inf, _sum, _count).
  std::string render(const std::string& name, const std::string& help) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more than bounds for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& path, int status);
  void add_prompt_tokens(int64_t fed, int64_t reused);
  void add_generated_tokens(int64_t n);
  void observe_time_to_first_token(double seconds);
  void observe_token_latency(double seconds);
  void set_queue(int queued, int slots_in_use, int slots);
  void set_expert_stats(const ExpertStats& s);

  int slots_in_use() const;
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (path, status) -> count
  uint64_t prompt_tokens_ = 0, reused_tokens_ = 0, generated_tokens_ = 0;
  int queued_ = 0, slots_in_use_ = 0, slots_ = 0;
  ExpertStats experts_;
  Histogram ttft_, token_latency_;
};

}  // namespace seedling::serve
