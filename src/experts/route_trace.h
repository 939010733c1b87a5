// experts/route_trace.h - route traces: which experts the router chose, per token and layer, in a CSV file.
//
// Format (docs/formats/route-trace.md): a header line, then one line per token and MoE layer:
//   token_index,layer,expert_ids,weights,step
//   0,0,10 7 4 30,0.331155 0.288642 0.219010 0.161193,0
// expert_ids and weights are space-separated in the router's order (highest weight first). `step` numbers the
// forward passes: the rows of one step and layer are one MoE block, which fetches each chosen expert once.
// tools/record_route_trace.py writes the same columns with token_id instead of step; the reader takes either
// (columns are found by name; without `step` every token is its own step) and reads .csv.gz through gzip -dc.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "experts/expert_provider.h"

namespace seedling {

// Writes a route trace as Model::forward reports routes. A new step begins when a route arrives for a layer at
// or below the previous one with row 0 (forward reports layer by layer, rows in order).
class RouteTraceWriter final : public RouteObserver {
 public:
  explicit RouteTraceWriter(const std::string& path);  // an Error naming the path if it cannot be created
  ~RouteTraceWriter() override;
  RouteTraceWriter(const RouteTraceWriter&) = delete;
  RouteTraceWriter& operator=(const RouteTraceWriter&) = delete;

  void on_route(int layer, int row, std::span<const int> experts, std::span<const float> weights) override;
  // Flushes and closes; an Error naming the path on a write failure. The destructor closes silently.
  void close();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t step_ = -1;
  int64_t step_first_token_ = 0;  // token_index of row 0 of the current step
  int64_t step_rows_ = 0;         // rows seen in the current step (max row + 1)
  int last_layer_ = -1;
  int last_row_ = -1;
};

struct RouteRecord {
  int64_t token = 0;
  int layer = 0;
  int64_t step = 0;
  std::vector<int> experts;
  std::vector<float> weights;
};

// Reads a trace (.csv, or .csv.gz through `gzip -dc`); an Error naming the file and line on a malformed one.
std::vector<RouteRecord> read_route_trace(const std::string& path);

// Replays a trace's routes in the order the forward asks for them (`--route-replay`): a measuring tool that gives
// models whose routers would choose differently the same routes, so it changes logits. The constructor checks every
// record against the model (a layer with experts, top_k distinct ids below num_experts, top_k weights); route()
// hands out the next record and fails, naming the file and the position, when the trace has run out or its next
// record is for another layer.
class RouteReplay final : public RouteSource {
 public:
  RouteReplay(const std::string& path, std::span<const uint8_t> layer_has_experts, int num_experts, int top_k);
  void route(int layer, int row, std::span<int> experts, std::span<float> weights) override;
  size_t used() const { return next_; }  // records handed out so far
  size_t size() const { return records_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<RouteRecord> records_;
  size_t next_ = 0;
};

}  // namespace seedling
