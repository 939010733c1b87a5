#include "cli/sampling_flags.h"

namespace seedling::cli {

void add_sampling_flags(CLI::App* cmd, SamplerParams* p) {
  cmd->add_option("--temp", p->temperature, "temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", p->top_k, "keep the k most likely tokens (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", p->top_p, "nucleus sampling mass (1: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", p->min_p, "drop tokens below min-p times the best (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", p->repetition_penalty, "repetition penalty (1: off)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--presence-penalty", p->presence_penalty,
                  "subtract this from the logit of every token generated so far (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  cmd->add_option("--frequency-penalty", p->frequency_penalty,
                  "subtract this times its count so far from each generated token's logit (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  cmd->add_option("--seed", p->seed, "sampling seed")->capture_default_str();
}

}  // namespace seedling::cli
