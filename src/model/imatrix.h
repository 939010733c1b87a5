// model/imatrix.h - per-input-channel activation energies of a model's matrices (docs/formats/imatrix.md).
//
// ImatrixCollector watches a forward (Model::set_activation_observer) and sums x_j^2 over every row that enters a
// matrix, per input channel j: for each routed expert of each MoE layer over the rows routed to it (the input of
// gate/up, width hidden; the input of down, width moe_intermediate), for dense MLPs and for attention (q/k/v and
// o inputs), with the row counts. write_imatrix stores the sums as float32 safetensors with fixed names; Imatrix
// reads a file back and checks that every tensor the model needs is there with the model's shape, so a file made on
// another model is an Error naming the file, the tensor, its shape and the expected one. Imatrix also reads
// llama.cpp's imatrix GGUF (llama-imatrix's `<tensor>.in_sum2` and `<tensor>.counts`: the same sums and rows under
// llama.cpp's tensor names) for the routed experts' inputs, which are what the seed search weighs.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "experts/expert_provider.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace seedling {

inline constexpr const char* kImatrixFormatName = "seedling-imatrix";
inline constexpr int kImatrixFormatVersion = 1;

// Tensor names (docs/formats/imatrix.md): "layers.L.experts.gate_up.sum_sq" [E, H], "layers.L.experts.rows" [E],
// "layers.L.attn.qkv.sum_sq" [H], "layers.L.attn.rows" [1], ...
std::string imatrix_sum_name(int layer, MatrixInput which);
std::string imatrix_rows_name(int layer, MatrixInput which);

// Width of the input of `which` in `layer` (hidden, q_dim, moe_intermediate or intermediate); 0 when the layer has
// no such matrix (an expert input in a dense layer, a dense MLP input in an MoE layer without a shared expert, whose
// inputs are the dense MLP's; attention inputs in a Gated DeltaNet layer).
int64_t imatrix_width(const ModelConfig& c, int layer, MatrixInput which);

class ImatrixCollector : public ActivationObserver {
 public:
  explicit ImatrixCollector(const ModelConfig& c);
  void on_input(int layer, MatrixInput which, int expert, const float* x, int64_t n, int64_t width) override;

  // Sum of squares per channel (double) and rows, of one expert (expert >= 0) or of a dense matrix (expert -1).
  std::span<const double> sum_sq(int layer, MatrixInput which, int expert = -1) const;
  int64_t rows(int layer, MatrixInput which, int expert = -1) const;
  const ModelConfig& config() const { return c_; }

 private:
  struct Slot {
    int64_t width = 0;
    std::vector<double> sum;    // [experts or 1][width]
    std::vector<int64_t> rows;  // [experts or 1]
  };
  Slot& slot(int layer, MatrixInput which);
  const Slot& slot(int layer, MatrixInput which) const;
  ModelConfig c_;
  std::vector<Slot> slots_;  // [layer * 6 + which]
};

// Writes every tensor of the collector to `path` (float32 sums, int64 rows) with `metadata` in __metadata__
// (format and version are added).
void write_imatrix(const std::string& path, const ImatrixCollector& col,
                   const std::map<std::string, std::string>& metadata);

class Imatrix {
 public:
  // Reads `path` and checks it against the model `c`: the format name, every tensor present with the model's shape
  // and dtype, no tensor the model does not have, and every value finite and >= 0. Errors name the file and the
  // tensor. A GGUF `path` is read as llama.cpp's imatrix (docs/formats/imatrix.md): each MoE layer's
  // `blk.L.ffn_gate_exps.weight` (else `ffn_up_exps`, the same input) and `blk.L.ffn_down_exps.weight`: sums of
  // dimensions [width, E] (ne0 first) and counts [1, E], whole numbers; its other matrices are not read, and asking
  // for them is an Error.
  static Imatrix load(const std::string& path, const ModelConfig& c);

  // Sums of squares (float32, as stored) of one expert's or dense matrix's input; rows that were summed.
  std::span<const float> sum_sq(int layer, MatrixInput which, int expert = -1) const;
  int64_t rows(int layer, MatrixInput which, int expert = -1) const;
  // Mean energies sum_sq / rows (what the seed search takes as h); empty when no row reached the matrix.
  std::vector<float> mean_energy(int layer, MatrixInput which, int expert = -1) const;
  // The seed search's h for a routed expert's matrix (ExpertGateUp for gate and up, ExpertDown for down): the mean
  // energies scaled to average 1 over the channels. Empty when no row reached the expert or every energy is 0: such
  // an expert is searched unweighted.
  std::vector<float> expert_search_weights(int layer, int expert, MatrixInput which) const;
  // The safetensors file's __metadata__, or the GGUF's keys as text (`imatrix.datasets`, `imatrix.chunk_count`, ...).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  static Imatrix load_safetensors(const std::string& path, const ModelConfig& c);
  static Imatrix load_llama_cpp(const std::string& path, const ModelConfig& c);
  std::string path_;
  ModelConfig c_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::vector<float>> sums_;    // by imatrix_sum_name: [groups x width]
  std::map<std::string, std::vector<int64_t>> rows_;  // by imatrix_rows_name: [groups]
};

}  // namespace seedling
