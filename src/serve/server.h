// serve/server.h - `seedling serve`: the OpenAI-compatible HTTP API over one model, with continuous batching.
//
// HTTP threads parse and check requests, render the chat template, and turn tokens into replies; one scheduler
// thread owns the Engine (serve/scheduler.h). Every error is an OpenAI-style body with its status: 400 bad request
// (naming the parameter), 401 key, 404 route, 413 body size, 503 queue full (with Retry-After).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "serve/metrics.h"

namespace seedling::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                         // 0: any free port
  std::string api_key;                     // "": no key needed
  std::string model_id;                    // the id /v1/models lists
  std::vector<std::string> aliases;        // other names a request's `model` may give (any other is a 404)
  std::vector<std::string> cors;           // origins whose pages may call the API ("*": any); serve/origin_check.h
  std::vector<std::string> allowed_hosts;  // Host names a keyless server answers besides IP literals and localhost
  int max_seqs = 8;
  int max_queue = 64;
  int prompt_chunk = 256;
  size_t max_body = size_t(8) << 20;  // bytes
  int timeout_s = 60;                 // a request must arrive whole within it; one write of a reply too
  int max_connections = 512;          // open at once; beyond, 503 and close
  int max_context = 0;                // positions per sequence; 0: the model's
};

class Server {
 public:
  Server(Model& model, ServerOptions options);
  ~Server();
  // Binds to host:port; returns the port (the one picked when port was 0). Error when it cannot bind.
  int bind();
  // Serves until stop(); returns when every connection is done.
  void run();
  // Ends running requests and stops listening; safe from any thread.
  void stop();
  const Metrics& metrics() const;
  int max_context() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seedling::serve
