// The imatrix collector and its file: watching a forward changes no logit (bit for bit), rows agree with the routes,
// layer 0's attention input energies equal a direct computation from the checkpoint, the file reads back what was
// collected, and a file that does not fit the model is an Error naming the tensor.
#include "model/imatrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>

#include "codec/codec.h"
#include "codec/quantize.h"
#include "codec/seed_codec.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "engine/engine.h"
#include "gguf_builder.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

std::vector<float> all_logits(Model& model, const std::vector<int32_t>& ids) {
  Engine engine(model, {});
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  return engine.step({&step, 1});
}

// A checkpoint matrix as float32, row-major.
std::vector<float> checkpoint_floats(const TensorInfo& t) {
  std::vector<float> w(size_t(t.numel()));
  encode_matrix(Codec::F32, t.dtype, t.data, t.shape[0], t.shape[1], reinterpret_cast<uint8_t*>(w.data()));
  return w;
}

// sum over elements of h[column] * (w - d)^2, in double.
double weighted_error(const std::vector<float>& w, const std::vector<float>& d, const std::vector<float>& h) {
  double err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double diff = double(w[i]) - double(d[i]);
    err += double(h[i % h.size()]) * diff * diff;
  }
  return err;
}

// The activations of qwen3_moe_a over its reference ids, collected.
ImatrixCollector collect_reference(Model& model) {
  ImatrixCollector col(model.config());
  model.set_activation_observer(&col);
  all_logits(model, test::golden_ids("qwen3_moe_a"));
  model.set_activation_observer(nullptr);
  return col;
}

// The imatrix of qwen3_moe_a over its reference ids, written to `path` and read back.
Imatrix record_imatrix(Model& model, const std::string& path) {
  write_imatrix(path, collect_reference(model), {});
  return Imatrix::load(path, model.config());
}

// The collector's sums in llama.cpp's imatrix GGUF layout (as ik_llama.cpp's convert_imatrix_gguf_to_dat.py reads
// llama-imatrix's files; it reads this one too, docs/formats/imatrix.md): for each matrix `<tensor>`,
// `<tensor>.in_sum2` F32 [K, n] (n: its experts, 1 for a dense matrix) and `<tensor>.counts` F32 [1, n], beside
// imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size. `skip` leaves a tensor out; `edit` changes values.
std::string llama_cpp_imatrix(const ImatrixCollector& col, const std::string& skip = "",
                              const std::function<void(const std::string&, std::vector<float>&)>& edit = nullptr) {
  const ModelConfig& c = col.config();
  test::GgufBuilder b;
  b.strings("imatrix.datasets", {"reference ids"});
  b.key<uint32_t>("imatrix.chunk_count", GgufType::U32, 1);
  b.key<uint32_t>("imatrix.chunk_size", GgufType::U32, 512);
  const auto add = [&](const std::string& name, int l, MatrixInput which) {
    const bool routed = which == MatrixInput::ExpertGateUp || which == MatrixInput::ExpertDown;
    const int64_t width = imatrix_width(c, l, which), n = routed ? c.num_experts : 1;
    std::vector<float> sums, counts;
    for (int64_t e = 0; e < n; ++e) {
      const int expert = routed ? int(e) : -1;
      for (double v : col.sum_sq(l, which, expert)) sums.push_back(float(v));
      counts.push_back(float(col.rows(l, which, expert)));
    }
    for (auto [suffix, v, dims] : {std::tuple{".in_sum2", &sums, std::vector<uint64_t>{uint64_t(width), uint64_t(n)}},
                                   std::tuple{".counts", &counts, std::vector<uint64_t>{1, uint64_t(n)}}}) {
      if (name + suffix == skip) continue;
      if (edit) edit(name + suffix, *v);
      std::string bytes(v->size() * 4, '\0');
      std::memcpy(bytes.data(), v->data(), bytes.size());
      b.raw_tensor(name + suffix, dims, GgmlType::F32, bytes);
    }
  };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) add(blk + m + ".weight", l, MatrixInput::AttnQkv);
    add(blk + "attn_output.weight", l, MatrixInput::AttnO);
    if (imatrix_width(c, l, MatrixInput::ExpertGateUp) > 0) {
      add(blk + "ffn_gate_exps.weight", l, MatrixInput::ExpertGateUp);
      add(blk + "ffn_up_exps.weight", l, MatrixInput::ExpertGateUp);
      add(blk + "ffn_down_exps.weight", l, MatrixInput::ExpertDown);
    } else {
      add(blk + "ffn_gate.weight", l, MatrixInput::MlpGateUp);
      add(blk + "ffn_up.weight", l, MatrixInput::MlpGateUp);
      add(blk + "ffn_down.weight", l, MatrixInput::MlpDown);
    }
  }
  return b.bytes();
}

struct RouteCounter : RouteObserver {
  std::map<std::pair<int, int>, int64_t> rows;  // (layer, expert) -> rows routed
  void on_route(int layer, int, std::span<const int> experts, std::span<const float>) override {
    for (int e : experts) ++rows[{layer, e}];
  }
};

}  // namespace

// qwen3_moe_a has MoE layers 0 and 2 and a dense MLP in layer 1: every kind of input is watched.
TEST(ImatrixTest, WatchingChangesNoLogitAndCountsEveryRoutedRow) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.layer_has_experts[1], 0);
  const std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  const std::vector<float> plain = all_logits(*model, ids);

  ImatrixCollector col(c);
  RouteCounter routes;
  model->set_activation_observer(&col);
  model->set_route_observer(&routes);
  const std::vector<float> watched = all_logits(*model, ids);
  model->set_activation_observer(nullptr);
  model->set_route_observer(nullptr);
  ASSERT_EQ(plain.size(), watched.size());
  EXPECT_EQ(std::memcmp(plain.data(), watched.data(), plain.size() * sizeof(float)), 0);

  const int64_t n = int64_t(ids.size());
  for (int l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(col.rows(l, MatrixInput::AttnQkv), n);
    EXPECT_EQ(col.rows(l, MatrixInput::AttnO), n);
    if (!c.layer_has_experts[size_t(l)]) {
      EXPECT_EQ(col.rows(l, MatrixInput::MlpGateUp), n);
      EXPECT_EQ(col.rows(l, MatrixInput::MlpDown), n);
      EXPECT_EQ(col.sum_sq(l, MatrixInput::MlpDown).size(), size_t(c.intermediate_size));
      continue;
    }
    int64_t total = 0;
    for (int e = 0; e < c.num_experts; ++e) {
      const int64_t r = col.rows(l, MatrixInput::ExpertGateUp, e);
      const auto it = routes.rows.find(std::make_pair(l, e));
      EXPECT_EQ(r, it == routes.rows.end() ? 0 : it->second) << "layer " << l << " expert " << e;
      EXPECT_EQ(col.rows(l, MatrixInput::ExpertDown, e), r);
      double s = 0;
      for (double v : col.sum_sq(l, MatrixInput::ExpertDown, e)) s += v;
      EXPECT_EQ(s > 0, r > 0) << "down input energy of layer " << l << " expert " << e;
      total += r;
    }
    EXPECT_EQ(total, n * c.experts_per_token);
  }
}

TEST(ImatrixTest, LayerZeroAttentionInputEqualsNormedEmbeddings) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  const std::vector<int32_t> ids = test::golden_ids("qwen3_moe_a");
  ImatrixCollector col(c);
  model->set_activation_observer(&col);
  all_logits(*model, ids);
  model->set_activation_observer(nullptr);

  const Checkpoint& ck = model->checkpoint();
  const TensorInfo& embed = ck.get(model->family().embed);
  const TensorInfo& norm = ck.get(model->family().layer_names(c, 0).attn_norm);
  const Codec ec = *codec_of_dtype(embed.dtype), nc = *codec_of_dtype(norm.dtype);
  const int64_t H = c.hidden_size;
  std::vector<double> want(size_t(H), 0.0);
  for (int32_t t : ids) {
    const uint8_t* row = embed.data + size_t(t) * codec_row_bytes(ec, H);
    double ms = 0;
    for (int64_t j = 0; j < H; ++j) ms += double(codec_value(ec, row, j)) * double(codec_value(ec, row, j));
    const double inv = 1.0 / std::sqrt(ms / double(H) + double(c.rms_norm_eps));
    for (int64_t j = 0; j < H; ++j) {
      const double x = double(codec_value(ec, row, j)) * inv * double(codec_value(nc, norm.data, j));
      want[size_t(j)] += x * x;
    }
  }
  const std::span<const double> got = col.sum_sq(0, MatrixInput::AttnQkv);
  ASSERT_EQ(got.size(), size_t(H));
  for (int64_t j = 0; j < H; ++j) EXPECT_NEAR(got[size_t(j)], want[size_t(j)], 1e-5 * want[size_t(j)]) << j;
}

// One token: every expert it is routed to sees the same row, so their gate/up energies are equal.
TEST(ImatrixTest, OneRowGivesEqualEnergiesToItsExperts) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  ImatrixCollector col(c);
  model->set_activation_observer(&col);
  all_logits(*model, {test::golden_ids("qwen3_moe_a")[0]});
  std::vector<int> used;
  for (int e = 0; e < c.num_experts; ++e) {
    if (col.rows(0, MatrixInput::ExpertGateUp, e) > 0) used.push_back(e);
  }
  ASSERT_EQ(int(used.size()), c.experts_per_token);
  const std::span<const double> first = col.sum_sq(0, MatrixInput::ExpertGateUp, used[0]);
  for (int e : used) {
    const std::span<const double> s = col.sum_sq(0, MatrixInput::ExpertGateUp, e);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), s.begin()));
  }
}

TEST(ImatrixTest, FileReadsBackAndRejectsAnotherModel) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  const ImatrixCollector col = collect_reference(*model);
  test::ScratchDir dir("imatrix");
  const std::string path = dir / "im.safetensors";
  write_imatrix(path, col, {{"text", "reference ids"}});

  const Imatrix im = Imatrix::load(path, c);
  EXPECT_EQ(im.metadata().at("text"), "reference ids");
  for (int l = 0; l < c.num_layers; ++l) {
    for (MatrixInput w : {MatrixInput::AttnQkv, MatrixInput::AttnO, MatrixInput::ExpertGateUp, MatrixInput::ExpertDown,
                          MatrixInput::MlpGateUp, MatrixInput::MlpDown}) {
      if (imatrix_width(c, l, w) == 0) continue;
      const bool per_expert = w == MatrixInput::ExpertGateUp || w == MatrixInput::ExpertDown;
      for (int e = per_expert ? 0 : -1; e < (per_expert ? c.num_experts : 0); ++e) {
        const std::span<const double> want = col.sum_sq(l, w, e);
        const std::span<const float> got = im.sum_sq(l, w, e);
        ASSERT_EQ(got.size(), want.size());
        for (size_t j = 0; j < got.size(); ++j) EXPECT_EQ(got[j], float(want[j]));
        EXPECT_EQ(im.rows(l, w, e), col.rows(l, w, e));
        const std::vector<float> h = im.mean_energy(l, w, e);
        if (col.rows(l, w, e) == 0) {
          EXPECT_TRUE(h.empty());
        } else {
          EXPECT_FLOAT_EQ(h[0], float(double(got[0]) / double(col.rows(l, w, e))));
        }
      }
    }
  }

  ModelConfig fewer_experts = c;
  fewer_experts.num_experts = 4;
  EXPECT_NE(test::error_of([&] {
              Imatrix::load(path, fewer_experts);
            }).find("tensor 'layers.0.experts.gate_up.sum_sq' has shape [8, 64], the model expects [4, 64]"),
            std::string::npos);
  ModelConfig more_layers = c;
  more_layers.num_layers = 4;
  more_layers.layer_has_experts.push_back(1);
  more_layers.layers.push_back(c.layers.back());  // a plan per layer, as validate_config leaves it
  EXPECT_NE(
      test::error_of([&] { Imatrix::load(path, more_layers); }).find("tensor 'layers.3.attn.qkv.sum_sq' is missing"),
      std::string::npos);
  ModelConfig fewer_layers = c;
  fewer_layers.num_layers = 2;
  fewer_layers.layer_has_experts.pop_back();
  fewer_layers.layers.pop_back();
  EXPECT_NE(test::error_of([&] { Imatrix::load(path, fewer_layers); }).find("tensor 'layers.2."), std::string::npos);
  EXPECT_NE(test::error_of([&] {
              Imatrix::load(test::data_path("models/qwen3_moe_a/hf/model.safetensors"), c);
            }).find("not an imatrix file"),
            std::string::npos);

  // A negative energy (a corrupt or hand-made file) is refused, naming the tensor.
  SafetensorsWriter bad;
  bad.set_metadata("seedling_format", kImatrixFormatName);
  bad.set_metadata("seedling_format_version", std::to_string(kImatrixFormatVersion));
  bad.add(imatrix_sum_name(0, MatrixInput::AttnQkv), DType::F32, {c.hidden_size}, [](uint8_t* out, size_t, size_t n) {
    for (size_t b = 0; b < n; b += 4) {
      const float v = -1.0f;
      std::memcpy(out + b, &v, 4);
    }
  });
  bad.write(dir / "bad.safetensors");
  EXPECT_NE(test::error_of([&] {
              Imatrix::load(dir / "bad.safetensors", c);
            }).find("tensor 'layers.0.attn.qkv.sum_sq' element 0 is -1, expected finite >= 0"),
            std::string::npos);
}

// llama.cpp's imatrix GGUF of the same sums gives the seed search the very weights our file does (bit for bit), and
// its lies are errors naming the file and the tensor.
TEST(ImatrixTest, LlamaCppImatrixGgufGivesTheSameSearchWeights) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  const ImatrixCollector col = collect_reference(*model);
  test::ScratchDir dir("imatrix-gguf");
  write_imatrix(dir / "im.safetensors", col, {});
  const std::string gguf = dir / "imatrix.gguf";
  test::write_file(gguf, llama_cpp_imatrix(col));
  const Imatrix ours = Imatrix::load(dir / "im.safetensors", c), theirs = Imatrix::load(gguf, c);
  EXPECT_EQ(theirs.metadata().at("imatrix.chunk_count"), "1");
  int compared = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (imatrix_width(c, l, MatrixInput::ExpertGateUp) == 0) continue;
    for (int e = 0; e < c.num_experts; ++e) {
      for (MatrixInput which : {MatrixInput::ExpertGateUp, MatrixInput::ExpertDown}) {
        EXPECT_EQ(theirs.rows(l, which, e), ours.rows(l, which, e));
        const std::vector<float> a = ours.expert_search_weights(l, e, which),
                                 b = theirs.expert_search_weights(l, e, which);
        ASSERT_EQ(a.size(), b.size());
        if (a.empty()) continue;  // memcmp's pointers may not be null, even for no bytes
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "layer " << l << " expert " << e;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 8);
  // The up projection's sums serve when the gate's are absent (the same input).
  test::write_file(gguf, llama_cpp_imatrix(col, "blk.0.ffn_gate_exps.weight.in_sum2"));
  const Imatrix up = Imatrix::load(gguf, c);
  EXPECT_EQ(std::memcmp(up.sum_sq(0, MatrixInput::ExpertGateUp, 3).data(),
                        ours.sum_sq(0, MatrixInput::ExpertGateUp, 3).data(), size_t(c.hidden_size) * 4),
            0);
  // Attention and dense inputs are not read from llama.cpp's file.
  EXPECT_NE(test::error_of([&] { theirs.sum_sq(0, MatrixInput::AttnQkv); }).find("routed experts' inputs only"),
            std::string::npos);

  const auto error_with = [&](const std::string& skip,
                              const std::function<void(const std::string&, std::vector<float>&)>& edit) {
    test::write_file(gguf, llama_cpp_imatrix(col, skip, edit));
    return test::error_of([&] { Imatrix::load(gguf, c); });
  };
  EXPECT_NE(error_with("blk.2.ffn_down_exps.weight.in_sum2", nullptr)
                .find("tensor 'blk.2.ffn_down_exps.weight.in_sum2' is missing"),
            std::string::npos);
  EXPECT_NE(error_with("",
                       [](const std::string& n, std::vector<float>& v) {
                         if (n == "blk.0.ffn_down_exps.weight.in_sum2") v[5] = -2.0f;
                       })
                .find("tensor 'blk.0.ffn_down_exps.weight.in_sum2' element 5 is -2, expected finite >= 0"),
            std::string::npos);
  EXPECT_NE(error_with("",
                       [](const std::string& n, std::vector<float>& v) {
                         if (n == "blk.0.ffn_gate_exps.weight.counts") v[1] = 0.5f;
                       })
                .find("tensor 'blk.0.ffn_gate_exps.weight.counts' element 1 is 0.5, expected a whole row count >= 0"),
            std::string::npos);
  EXPECT_NE(error_with("",
                       [](const std::string& n, std::vector<float>& v) {
                         if (n == "blk.2.ffn_down_exps.weight.counts") v[0] += 1.0f;
                       })
                .find("'blk.2.ffn_down_exps.weight.counts' differs from the rows"),
            std::string::npos);
  ModelConfig fewer_experts = c;
  fewer_experts.num_experts = 4;
  test::write_file(gguf, llama_cpp_imatrix(col));
  EXPECT_NE(test::error_of([&] { Imatrix::load(gguf, fewer_experts); })
                .find("tensor 'blk.0.ffn_gate_exps.weight.in_sum2' has shape [64, 8] (ne0 first), the model expects "
                      "[64, 4]"),
            std::string::npos);
  ModelConfig fewer_layers = c;
  fewer_layers.num_layers = 2;
  fewer_layers.layer_has_experts.pop_back();
  fewer_layers.layers.pop_back();
  EXPECT_NE(test::error_of([&] { Imatrix::load(gguf, fewer_layers); }).find("is of layer 2, the model"),
            std::string::npos);
  test::write_file(gguf, test::GgufBuilder().str("general.architecture", "qwen3moe").bytes());
  EXPECT_NE(test::error_of([&] { Imatrix::load(gguf, c); }).find("is not an imatrix"), std::string::npos);
}

// What the imatrix is for: with a recorded file, a P4 search weighted by the expert's energies gives a lower
// energy-weighted error sum h (w - w')^2 than the unweighted search, over layer 0's routed experts.
TEST(ImatrixTest, WeightedSeedSearchLowersTheEnergyWeightedError) {
  auto model = Model::load(test::data_path("models/qwen3_moe_a/hf"));
  const ModelConfig& c = model->config();
  test::ScratchDir dir("imatrix-search");
  const Imatrix im = record_imatrix(*model, dir / "im.safetensors");

  seed::SeedSearchOptions opt;
  opt.n_seeds = 1024;
  double err_plain = 0, err_weighted = 0;
  int parts = 0;
  for (int e = 0; e < c.num_experts; ++e) {
    const ExpertParts n = model->family().expert_parts(c, 0, e);
    for (const std::string* name : {&n[0].name, &n[2].name}) {
      const MatrixInput input = name == &n[2].name ? MatrixInput::ExpertDown : MatrixInput::ExpertGateUp;
      const std::vector<float> h = im.expert_search_weights(0, e, input);
      if (h.empty()) continue;  // no row reached this expert: nothing to weight by
      const TensorInfo& t = model->checkpoint().get(*name);
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const std::vector<float> w = checkpoint_floats(t);
      std::vector<float> d(w.size());
      for (const float* hp : {static_cast<const float*>(nullptr), h.data()}) {
        const auto blob = seed::encode_seed_slice(seed::SeedTier::P4, w.data(), rows, cols, hp, opt);
        seed::decode_seed_matrix({seed::SeedTier::P4, blob.data(), rows, cols}, d.data());
        (hp ? err_weighted : err_plain) += weighted_error(w, d, h);
      }
      ++parts;
    }
  }
  ASSERT_GT(parts, 4);
  EXPECT_LT(err_weighted, err_plain);
  RecordProperty("weighted_over_plain", std::to_string(err_weighted / err_plain));
}

// The pack's --imatrix (what the imatrix is for): p4 experts of a tiny model packed with a recorded imatrix have a
// lower energy-weighted error than packed without it, over every expert part the recorded text reached.
TEST(ImatrixTest, PackWithImatrixLowersTheEnergyWeightedError) {
  const std::string hf = test::data_path("models/qwen3_moe_a/hf");
  auto model = Model::load(hf);
  const ModelConfig& c = model->config();
  test::ScratchDir dir("imatrix-pack");
  const Imatrix im = record_imatrix(*model, dir / "im.safetensors");
  double err[2] = {0, 0};  // without, with
  int parts = 0;
  for (int arm = 0; arm < 2; ++arm) {
    const std::string out = dir / (arm ? "weighted" : "plain");
    const std::string cmd = std::string(SEEDLING_BINARY) + " pack -m " + hf + " -o " + out +
                            " --experts p4 --seed-search-seeds 1024" +
                            (arm ? " --imatrix " + (dir / "im.safetensors") : std::string()) + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto packed = Model::load(out);
    parts = 0;
    for (int l = 0; l < c.num_layers; ++l) {
      if (!c.layer_has_experts[size_t(l)]) continue;
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertParts n = model->family().expert_parts(c, l, e);
        const ExpertWeights ew = packed->experts().acquire(l, e);
        const ops::Matrix* got[3] = {&ew.gate, &ew.up, &ew.down};
        const std::string* names[3] = {&n[0].name, &n[1].name, &n[2].name};
        for (int p = 0; p < 3; ++p) {
          const std::vector<float> h =
              im.expert_search_weights(l, e, p == 2 ? MatrixInput::ExpertDown : MatrixInput::ExpertGateUp);
          if (h.empty()) continue;
          const std::vector<float> w = checkpoint_floats(model->checkpoint().get(*names[p]));
          std::vector<float> d(w.size());
          seed::decode_seed_matrix(got[p]->seed_matrix(), d.data());
          err[arm] += weighted_error(w, d, h);
          ++parts;
        }
        packed->experts().release(l, e);
      }
    }
  }
  ASSERT_GT(parts, 10);
  EXPECT_LT(err[1], err[0]);
  RecordProperty("weighted_over_plain", std::to_string(err[1] / err[0]));
}

}  // namespace seedling
