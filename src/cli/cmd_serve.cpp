// cli/cmd_serve.cpp - `seedling serve`: the OpenAI-compatible server (src/serve) over one model.
//
// Prints exactly one line `seedling serve: listening on http://HOST:PORT` on stderr once the socket accepts
// connections (--port 0 picks a free port), and stops cleanly with exit status 0 on SIGINT or SIGTERM: running
// requests end, connections close. The signals are taken by one thread (sigwait), never by a handler.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "experts/streamed_experts.h"
#include "serve/server.h"

namespace seedling::cli {

namespace {
struct ServeFlags {
  ModelFlags model;
  serve::ServerOptions server;
  std::string max_body = "8M";
};

std::string folder_name(const std::string& dir) {
  std::filesystem::path p(dir);
  while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

int run(ServeFlags f) {
  // Before any thread exists, so that every thread inherits the mask and only the waiter below sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (!f.model.devices.empty()) {
    check_devices_flags(f.model);  // the flag's own errors first
    fail(
        "serve --devices: not yet: only rank 0 would hear the requests, and the other ranks need each step's rows "
        "(docs/expert-parallel.md); use run or bench");
  }
  f.server.max_body = size_t(parse_byte_size(f.max_body, "--max-body"));
  f.server.max_context = f.model.ctx;
  if (f.server.model_id.empty()) f.server.model_id = folder_name(model_dir(f.model));
  auto model = load_model(f.model);
  serve::Server server(*model, f.server);
  const int port = server.bind();
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  std::fprintf(stderr, "seedling serve: listening on http://%s:%d\n", f.server.host.c_str(), port);
  std::fflush(stderr);
  server.run();
  server.stop();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter when the server ended on its own
  waiter.join();
  finish_model(*model, 0);
  return 0;
}
}  // namespace

void add_serve(CLI::App& app, int* status) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  add_model_flags(cmd, &f->model);
  add_devices_flags(cmd, &f->model);
  serve::ServerOptions& s = f->server;
  cmd->add_option("--host", s.host, "address to listen on (loopback unless told otherwise)")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1/* and /metrics");
  cmd->add_option("--model-id", s.model_id, "model id in the API (default: the model folder's name)");
  cmd->add_option("--alias", s.aliases, "another name a request's 'model' may give (repeatable; others are 404)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--cors", s.cors, "an origin whose pages may call the API, e.g. http://app.example ('*': any)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--allowed-host", s.allowed_hosts,
                  "a Host name a keyless server answers besides IP literals and localhost (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--max-seqs", s.max_seqs, "sequence slots: requests decoded together")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", s.max_queue, "requests waiting for a slot beyond which the answer is 503")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-chunk", s.prompt_chunk, "prompt rows per step over all slots")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body", f->max_body, "largest request body, e.g. 8M (413 beyond)")->capture_default_str();
  cmd->add_option("--timeout", s.timeout_s, "seconds a request may take to arrive whole, and a reply's write")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", s.max_connections, "connections open at once (503 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
