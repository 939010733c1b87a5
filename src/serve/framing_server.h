// serve/framing_server.h - an httplib::Server whose connections are read by us: strict framing, a whole-request
// deadline, a cap on open connections, pipelining; httplib routes and answers the requests we have framed.
//
// cpp-httplib 0.11.4 (Debian 12's) reads requests itself with a per-read idle timeout, no limit on chunked bodies,
// loose Content-Length parsing, one worker thread per open connection, and drops pipelined requests. Its one
// extension point before it reads a byte is the virtual process_and_close_socket(); here it hands the socket to one
// poller thread (epoll) that reads every connection's bytes into a RequestFramer (serve/request_framer.h). Half-sent
// requests cost the poller a buffer, not a thread. Only a whole request goes to a request worker, re-framed with a
// Content-Length, through httplib's protected process_request() on a stream that replays it and writes to the socket;
// then the connection goes back to the poller for its next request (pipelined bytes already read included).
//
// Limits: a request (head and body) must arrive within `request_timeout_s` of its first byte (408 beyond), an idle
// keep-alive connection is closed after `idle_timeout_s`, at most `max_connections` are open (503 and close beyond),
// a head is at most 16 KiB (431), a body at most `max_body` however it is framed (413 as soon as that is known).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "serve/request_framer.h"

namespace seedling::serve {

struct ConnectionLimits {
  size_t max_body = size_t(8) << 20;
  size_t max_head = size_t(16) << 10;
  int request_timeout_s = 60;  // from a request's first byte to its last
  int idle_timeout_s = 5;      // a keep-alive connection with no request
  int write_timeout_s = 60;    // one write of a reply
  int max_connections = 512;
  int request_workers = 80;  // requests answered at once (a stream holds one until it ends)
};

class FramingServer : public httplib::Server {
 public:
  explicit FramingServer(ConnectionLimits limits);
  ~FramingServer() override;
  FramingServer(const FramingServer&) = delete;
  FramingServer& operator=(const FramingServer&) = delete;

  // Serves (after bind_to_port) until stop(); returns when every connection is closed.
  void serve();
  // The body of an error answered before httplib sees the request (a framing refusal, 408, 503 at the cap).
  std::function<std::string(int status, const std::string& message)> error_body;

  // Whether the client whose request this thread is answering has closed its connection (for a handler that
  // computes before it writes: a disconnect then cancels the work).
  static bool client_gone();

 private:
  struct Connection;
  bool process_and_close_socket(socket_t sock) override;
  void poll_loop();
  using ConnectionPtr = std::shared_ptr<Connection>;
  void watch(ConnectionPtr c);           // to the poller, or straight on when its next request is already read
  bool poll_on(const ConnectionPtr& c);  // false when stopping
  ConnectionPtr unwatch(int fd);         // from the poller; null when it is not watched
  void read_from(const ConnectionPtr& c);
  void answer(const ConnectionPtr& c);                                          // a request worker's job
  void refuse(const ConnectionPtr& c, int status, const std::string& message);  // answers, then drains and closes
  void close(const ConnectionPtr& c);

  ConnectionLimits limits_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes the poller to stop
  std::mutex mu_;
  std::map<int, ConnectionPtr> watched_;  // by socket; under mu_
  int open_ = 0;                          // connections watched or being answered; under mu_
  bool stopping_ = false;                 // under mu_
  std::condition_variable all_closed_;
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread poller_;
};

}  // namespace seedling::serve
