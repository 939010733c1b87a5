// cli/main.cpp - `seedling <command>`: parses flags, runs the command, turns every Error into one line and exit 1.
#include <cstdio>
#include <new>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Seedling: Mixture-of-Experts inference for models larger than memory", "seedling"};
  app.require_subcommand(1);
  int status = 0;
  seedling::cli::add_run(app, &status);
  seedling::cli::add_logits(app, &status);
  seedling::cli::add_info(app, &status);
  seedling::cli::add_bench(app, &status);
  seedling::cli::add_synth(app, &status);
  seedling::cli::add_chat(app, &status);
  seedling::cli::add_tokenize(app, &status);
  seedling::cli::add_detokenize(app, &status);
  seedling::cli::add_perplexity(app, &status);
  seedling::cli::add_pack(app, &status);
  seedling::cli::add_quant_report(app, &status);
  seedling::cli::add_cache_sim(app, &status);
  seedling::cli::add_imatrix(app, &status);
  seedling::cli::add_serve(app, &status);
  seedling::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);                              // the chosen subcommand runs inside parse, as its callback
  } catch (const seedling::cli::RanksFinished& done) {  // --devices: this process launched the ranks
    return done.status;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const seedling::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "seedling: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "seedling: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // a failure no check named (a system call, the C++ library): still one line
    std::fflush(stdout);
    std::fprintf(stderr, "seedling: error: %s\n", e.what());
    return 1;
  }
  return status;
}
