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
#include <unordered_map>
#include <vector>

#include "experts/expert_provider.h"

namespace seedling {

// Numbers the rows the forward reports or asks routes for, as token indices: a new step begins at row 0 of a layer at
// or below the previous one (forward goes layer by layer, rows in order); a step's rows are the tokens after the
// previous step's.
class RouteTokenCounter {
 public:
  int64_t token(int layer, int row);  // the row's token index (counts the call)
  int64_t step() const { return step_; }
  // The token index of `row` in `layer` of the step under way, without counting; -1 when no route of this step has
  // been asked yet (`layer` is the step's first, or a new step is about to begin).
  int64_t peek(int layer, int row) const { return step_ >= 0 && layer > last_layer_ ? step_first_token_ + row : -1; }

 private:
  int64_t step_ = -1;
  int64_t step_first_token_ = 0;  // token index of row 0 of the current step
  int64_t step_rows_ = 0;         // rows seen in the current step (max row + 1)
  int last_layer_ = -1;
};

// Writes a route trace as Model::forward reports routes, token indices and steps from RouteTokenCounter.
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
  RouteTokenCounter tokens_;
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
// Reads next-layer predictions (`token_index,layer,predicted_ids`, bench/traces/README.md): records whose experts
// are the predicted ids, likeliest first, without weights.
std::vector<RouteRecord> read_route_predictions(const std::string& path);

// Replays a trace's routes (`--route-replay`): a measuring tool that gives models whose routers would choose
// differently the same routes, so it changes logits. Routes are keyed by (token_index, layer), so one trace replays
// under any batching: the forward's prompt of 512 rows and a trace written token by token (tools/record_route_trace.py)
// meet on the same tokens, counted as RouteTraceWriter counts them (RouteTokenCounter). The constructor
// checks every record against the model (a layer with experts, top_k distinct ids below num_experts, top_k finite
// weights, one route per token and layer); route() fails, naming the file, the token and the layer, when the trace has
// no route for what the forward asks (it ran out, or skips that token or layer).
class RouteReplay final : public RouteSource {
 public:
  RouteReplay(const std::string& path, std::span<const uint8_t> layer_has_experts, int num_experts, int top_k);
  void route(int layer, int row, std::span<int> experts, std::span<float> weights) override;
  // Adds next-layer predictions (`--prefetch-replay`), checked like routes (a layer with experts, distinct ids below
  // num_experts, one line per token and layer); predict() then hands them out for the same tokens as route().
  void load_predictions(const std::string& path);
  int predict(int layer, int row, std::span<int> experts) override;
  size_t used() const { return used_; }  // routes handed out so far
  size_t size() const { return records_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<RouteRecord> records_;
  std::unordered_map<int64_t, int32_t> index_;  // token_index * layers_ + layer -> index in records_
  int64_t layers_ = 0;
  std::vector<uint8_t> layer_has_experts_;
  int num_experts_ = 0;
  std::vector<RouteRecord> predictions_;
  std::unordered_map<int64_t, int32_t> predicted_;  // token_index * layers_ + layer -> index in predictions_
  int64_t last_token_ = -1;                         // the highest token_index in the trace
  size_t used_ = 0;
  RouteTokenCounter tokens_;  // the forward's position, counted as RouteTraceWriter counts it
};

}  // namespace seedling
