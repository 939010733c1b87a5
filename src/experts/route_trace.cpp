// experts/route_trace.cpp - writing and reading route traces (see route_trace.h).
#include "experts/route_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "core/error.h"

namespace seedling {

RouteTraceWriter::RouteTraceWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) fail("{}: cannot create the route trace: {}", path, std::strerror(errno));
  std::fputs("token_index,layer,expert_ids,weights,step\n", file_);
}

RouteTraceWriter::~RouteTraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void RouteTraceWriter::close() {
  if (file_ == nullptr) return;
  const bool bad = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (bad || !closed) fail("{}: writing the route trace failed", path_);
}

int64_t RouteTokenCounter::token(int layer, int row) {
  if (row == 0 && (step_ < 0 || layer <= last_layer_)) {
    step_first_token_ += step_rows_;
    step_rows_ = 0;
    ++step_;
  }
  step_rows_ = std::max<int64_t>(step_rows_, row + 1);
  last_layer_ = layer;
  return step_first_token_ + row;
}

void RouteTraceWriter::on_route(int layer, int row, std::span<const int> experts, std::span<const float> weights) {
  if (file_ == nullptr) return;
  std::string line = fmt::format("{},{},", tokens_.token(layer, row), layer);
  for (size_t i = 0; i < experts.size(); ++i) line += fmt::format("{}{}", i ? " " : "", experts[i]);
  line += ",";
  for (size_t i = 0; i < weights.size(); ++i) line += fmt::format("{}{}", i ? " " : "", weights[i]);
  line += fmt::format(",{}\n", tokens_.step());
  std::fputs(line.c_str(), file_);
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '"' && c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

template <typename T>
T parse_number(const std::string& s, const std::string& path, int64_t line, const char* column) {
  T v{};
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) fail("{}:{}: {} '{}' is not a number", path, line, column, s);
  return v;
}

}  // namespace

namespace {

// The CSV reader of traces and predictions: `ids_column` holds the expert ids, `weights` (optional) the weights.
std::vector<RouteRecord> read_route_csv(const std::string& path, const char* ids_column) {
  std::FILE* f = nullptr;
  const bool gz = path.ends_with(".gz");
  if (std::FILE* probe = std::fopen(path.c_str(), "rb"); probe != nullptr) {
    std::fclose(probe);
  } else {
    fail("{}: cannot open the route trace: {}", path, std::strerror(errno));
  }
  if (gz) {
    std::string quoted = "'";
    for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    f = ::popen(("gzip -dc -- " + quoted).c_str(), "r");
  } else {
    f = std::fopen(path.c_str(), "r");
  }
  if (f == nullptr) fail("{}: cannot open the route trace: {}", path, std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const int rc = gz ? ::pclose(f) : std::fclose(f);
  if (gz && rc != 0) fail("{}: gzip -dc failed (not a gzip file?)", path);

  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) fail("{}: empty route trace (expected a header line)", path);
  const auto header = split(line, ',');
  auto column = [&](const char* name) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return int(i);
    }
    return -1;
  };
  const int c_token = column("token_index"), c_layer = column("layer"), c_ids = column(ids_column);
  const int c_weights = column("weights"), c_step = column("step");
  if (c_token < 0 || c_layer < 0 || c_ids < 0) {
    fail("{}: header '{}' lacks token_index, layer or {}", path, line, ids_column);
  }
  std::vector<RouteRecord> out;
  int64_t number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const auto cols = split(line, ',');
    if (cols.size() != header.size()) {
      fail("{}:{}: {} columns, the header has {}", path, number, cols.size(), header.size());
    }
    RouteRecord r;
    r.token = parse_number<int64_t>(cols[size_t(c_token)], path, number, "token_index");
    r.layer = parse_number<int>(cols[size_t(c_layer)], path, number, "layer");
    r.step = c_step >= 0 ? parse_number<int64_t>(cols[size_t(c_step)], path, number, "step") : r.token;
    for (const auto& id : split(cols[size_t(c_ids)], ' ')) {
      if (!id.empty()) r.experts.push_back(parse_number<int>(id, path, number, ids_column));
    }
    if (c_weights >= 0) {
      for (const auto& w : split(cols[size_t(c_weights)], ' ')) {
        if (!w.empty()) r.weights.push_back(parse_number<float>(w, path, number, "weights"));
      }
    }
    if (r.layer < 0 || r.experts.empty()) fail("{}:{}: no experts or a negative layer", path, number);
    for (int e : r.experts) {
      if (e < 0) fail("{}:{}: negative expert id {}", path, number, e);
    }
    out.push_back(std::move(r));
  }
  return out;
}

constexpr int64_t kMaxToken = int64_t(1) << 40;  // token_index * layers stays far from overflowing

// Checks records against the model (a layer with routed experts, distinct ids below num_experts, exactly top_k ids
// and top_k finite weights when top_k > 0, a token_index in range) and indexes them by token and layer, one each;
// the highest token_index into *last_token unless it is null.
std::unordered_map<int64_t, int32_t> index_records(const std::string& path, std::span<const RouteRecord> records,
                                                   std::span<const uint8_t> layer_has_experts, int num_experts,
                                                   int top_k, int64_t* last_token) {
  std::unordered_map<int64_t, int32_t> index;
  const int64_t layers = int64_t(layer_has_experts.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const RouteRecord& r = records[i];
    const auto where = [&] { return fmt::format("{}: route {} (token {}, layer {})", path, i + 1, r.token, r.layer); };
    if (size_t(r.layer) >= layer_has_experts.size() || layer_has_experts[size_t(r.layer)] == 0) {
      fail("{}: the model has no routed experts in that layer ({} layers)", where(), layer_has_experts.size());
    }
    if (top_k > 0 && (int(r.experts.size()) != top_k || int(r.weights.size()) != top_k)) {
      fail("{}: {} experts and {} weights, the model routes top-{}", where(), r.experts.size(), r.weights.size(),
           top_k);
    }
    // from_chars reads "nan" and "inf": such a weight would reach the forward's sums and make every logit NaN.
    for (float w : r.weights) {
      if (!std::isfinite(w)) fail("{}: weight {} is not a finite number", where(), w);
    }
    for (size_t s = 0; s < r.experts.size(); ++s) {
      if (r.experts[s] >= num_experts) fail("{}: expert {}, the model has {}", where(), r.experts[s], num_experts);
      for (size_t t = 0; t < s; ++t) {
        if (r.experts[t] == r.experts[s]) fail("{}: expert {} chosen twice", where(), r.experts[s]);
      }
    }
    if (r.token < 0 || r.token > kMaxToken) fail("{}: token_index out of range (0 to {})", where(), kMaxToken);
    if (last_token != nullptr) *last_token = std::max(*last_token, r.token);
    const auto [at, fresh] = index.try_emplace(r.token * layers + r.layer, int32_t(i));
    if (!fresh) fail("{} repeats route {} for the same token and layer", where(), at->second + 1);
  }
  return index;
}

}  // namespace

std::vector<RouteRecord> read_route_trace(const std::string& path) {
  return read_route_csv(path, "expert_ids");
}

std::vector<RouteRecord> read_route_predictions(const std::string& path) {
  return read_route_csv(path, "predicted_ids");
}

RouteReplay::RouteReplay(const std::string& path, std::span<const uint8_t> layer_has_experts, int num_experts,
                         int top_k)
    : path_(path),
      records_(read_route_trace(path)),
      layers_(int64_t(layer_has_experts.size())),
      layer_has_experts_(layer_has_experts.begin(), layer_has_experts.end()),
      num_experts_(num_experts) {
  if (records_.empty()) fail("{}: the route trace has no routes to replay", path);
  index_ = index_records(path, records_, layer_has_experts, num_experts, top_k, &last_token_);
}

void RouteReplay::load_predictions(const std::string& path) {
  predictions_ = read_route_predictions(path);
  if (predictions_.empty()) fail("{}: the prediction file has no predictions", path);
  predicted_ = index_records(path, predictions_, layer_has_experts_, num_experts_, 0, nullptr);
}

int RouteReplay::predict(int layer, int row, std::span<int> experts) {
  if (predictions_.empty()) return -1;
  const int64_t token = tokens_.peek(layer, row);
  if (token < 0) return 0;
  const auto at = predicted_.find(token * layers_ + layer);
  if (at == predicted_.end()) return 0;  // the file predicts from layer 1 on; no guess is a valid guess
  const std::vector<int>& ids = predictions_[size_t(at->second)].experts;
  const size_t n = std::min(ids.size(), experts.size());
  std::copy_n(ids.begin(), n, experts.begin());
  return int(n);
}

void RouteReplay::route(int layer, int row, std::span<int> experts, std::span<float> weights) {
  const int64_t token = tokens_.token(layer, row);
  if (token > last_token_) {
    fail("{}: the route trace ran out after token {} ({} routes); the model asked for token {} layer {}", path_,
         last_token_, records_.size(), token, layer);
  }
  const auto at = index_.find(token * layers_ + layer);
  if (at == index_.end()) fail("{}: no route for token {} layer {}, which the model asked for", path_, token, layer);
  const RouteRecord& r = records_[size_t(at->second)];
  std::copy(r.experts.begin(), r.experts.end(), experts.begin());
  std::copy(r.weights.begin(), r.weights.end(), weights.begin());
  ++used_;
}

}  // namespace seedling
