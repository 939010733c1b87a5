#include "serve/framing_server.h"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace seedling::serve {

using Clock = std::chrono::steady_clock;

struct FramingServer::Connection {
  Connection(int fd_, const ConnectionLimits& l) : fd(fd_), framer(l.max_head, l.max_body) {}
  int fd;
  RequestFramer framer;
  Clock::time_point deadline;  // of the request under way, or of the idle wait for one
  bool draining = false;       // refused: the answer is sent, what still comes is read and dropped until EOF
};

namespace {

thread_local int t_answering_fd = -1;

const char* reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

void address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (rc != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), serv, sizeof(serv),
                             NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(serv);
}

// The stream httplib's process_request reads one framed request from (the bytes we read) and writes its reply to
// (the socket, each write bounded by SO_SNDTIMEO, which httplib set at accept).
class ReplayStream : public httplib::Stream {
 public:
  ReplayStream(int fd, const std::string& request, int write_timeout_s)
      : fd_(fd), request_(request), write_timeout_ms_(write_timeout_s * 1000) {}
  bool is_readable() const override { return at_ < request_.size(); }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, write_timeout_ms_) > 0 && (p.revents & (POLLERR | POLLHUP)) == 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - at_);
    std::memcpy(ptr, request_.data() + at_, n);
    at_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  const std::string& request_;
  size_t at_ = 0;
  int write_timeout_ms_;
};

}  // namespace

FramingServer::FramingServer(ConnectionLimits limits) : limits_(limits) {
  // httplib's accept loop only hands sockets over (process_and_close_socket returns at once): two threads do.
  new_task_queue = [] { return new httplib::ThreadPool(2); };
  set_write_timeout(limits_.write_timeout_s, 0);
  set_payload_max_length(limits_.max_body);
}

FramingServer::~FramingServer() {
  if (poller_.joinable()) poller_.join();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool FramingServer::client_gone() {
  if (t_answering_fd < 0) return false;
  pollfd p{t_answering_fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return true;
  char b;
  return ::recv(t_answering_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void FramingServer::serve() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) fail("cannot start the connection poller: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  workers_ = std::make_unique<httplib::ThreadPool>(size_t(limits_.request_workers));
  poller_ = std::thread([this] { poll_loop(); });
  listen_after_bind();  // until stop(); then httplib's own queue is drained
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  poller_.join();
  workers_->shutdown();  // requests being answered finish (their streams end when the scheduler stops)
  std::unique_lock lk(mu_);
  all_closed_.wait(lk, [&] { return open_ == 0; });
}

bool FramingServer::process_and_close_socket(socket_t sock) {
  auto c = std::make_shared<Connection>(sock, limits_);
  bool full = false;
  {
    std::lock_guard lk(mu_);
    if (stopping_) {
      ::close(sock);
      return false;
    }
    full = open_ >= limits_.max_connections;
    ++open_;
  }
  if (full) {
    refuse(c, 503, fmt::format("the server has {} connections open, its limit; retry later", limits_.max_connections));
    return false;
  }
  watch(c);
  return true;
}

void FramingServer::watch(ConnectionPtr c) {
  const RequestFramer::State st = c->framer.state();
  if (st == RequestFramer::State::kComplete) {  // also a pipelined request, read with the one before it
    {
      std::lock_guard lk(mu_);
      if (!stopping_) return workers_->enqueue([this, c] { answer(c); });
    }
    return close(c);
  }
  if (st == RequestFramer::State::kRefused) return refuse(c, c->framer.refusal_status(), c->framer.refusal());
  const int timeout = c->framer.started() ? limits_.request_timeout_s : limits_.idle_timeout_s;
  c->deadline = Clock::now() + std::chrono::seconds(timeout);
  if (!poll_on(c)) close(c);
}

bool FramingServer::poll_on(const ConnectionPtr& c) {
  std::lock_guard lk(mu_);
  if (stopping_ || epoll_fd_ < 0) return false;
  watched_[c->fd] = c;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
  return true;
}

FramingServer::ConnectionPtr FramingServer::unwatch(int fd) {
  std::lock_guard lk(mu_);
  auto it = watched_.find(fd);
  if (it == watched_.end()) return nullptr;
  ConnectionPtr c = std::move(it->second);
  watched_.erase(it);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  return c;
}

void FramingServer::poll_loop() {
  std::vector<epoll_event> events(64);
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), 100);
    {
      std::lock_guard lk(mu_);
      if (stopping_) break;
    }
    for (int i = 0; i < n; ++i) {
      if (events[size_t(i)].data.fd == wake_fd_) continue;
      ConnectionPtr c;
      {
        std::lock_guard lk(mu_);
        auto it = watched_.find(events[size_t(i)].data.fd);
        if (it != watched_.end()) c = it->second;
      }
      if (c) read_from(c);
    }
    std::vector<int> late;
    {
      std::lock_guard lk(mu_);
      const auto now = Clock::now();
      for (auto& [fd, c] : watched_) {
        if (now >= c->deadline) late.push_back(fd);
      }
    }
    for (int fd : late) {
      ConnectionPtr c = unwatch(fd);
      if (!c) continue;
      if (c->framer.started() && !c->draining) {
        refuse(c, 408, fmt::format("the request did not arrive whole within {} s", limits_.request_timeout_s));
      } else {
        close(c);
      }
    }
  }
  std::map<int, ConnectionPtr> left;
  {
    std::lock_guard lk(mu_);
    left.swap(watched_);
  }
  for (auto& [fd, c] : left) close(c);
}

void FramingServer::read_from(const ConnectionPtr& c) {
  char buf[65536];
  const bool was_started = c->framer.started();
  for (int round = 0; round < 16; ++round) {  // at most 1 MiB per wake, so that one sender cannot starve the rest
    const ssize_t got = ::recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got <= 0) {  // the client is gone, or closed its side: nothing more can be answered
      if (ConnectionPtr mine = unwatch(c->fd)) close(mine);
      return;
    }
    if (c->draining) continue;
    if (c->framer.feed(std::string_view(buf, size_t(got))) != RequestFramer::State::kNeedMore) break;
  }
  if (c->draining) return;
  if (!was_started && c->framer.started()) {
    c->deadline = Clock::now() + std::chrono::seconds(limits_.request_timeout_s);
  }
  if (c->framer.wants_continue()) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)!::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    c->framer.continue_sent();
  }
  if (c->framer.state() == RequestFramer::State::kNeedMore) return;
  if (ConnectionPtr mine = unwatch(c->fd)) watch(mine);  // answers, or refuses
}

void FramingServer::answer(const ConnectionPtr& c) {
  ReplayStream strm(c->fd, c->framer.request(), limits_.write_timeout_s);
  const bool close_after = c->framer.close_after();
  bool closed = false;
  t_answering_fd = c->fd;
  const bool ok = process_request(strm, close_after, closed, nullptr);
  t_answering_fd = -1;
  if (!ok || closed || close_after) return close(c);
  c->framer.next();
  watch(c);
}

void FramingServer::refuse(const ConnectionPtr& c, int status, const std::string& message) {
  const std::string body = error_body ? error_body(status, message) : message;
  const std::string reply = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status,
      reason(status), body.size(), body);
  (void)!::send(c->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // Closing with unread bytes would reset the connection and could lose the answer at the client; so the write side
  // is shut and the rest is read and dropped, for at most a second.
  ::shutdown(c->fd, SHUT_WR);
  c->draining = true;
  c->deadline = Clock::now() + std::chrono::seconds(1);
  if (!poll_on(c)) close(c);
}

void FramingServer::close(const ConnectionPtr& c) {
  ::shutdown(c->fd, SHUT_RDWR);
  ::close(c->fd);
  std::lock_guard lk(mu_);
  --open_;
  all_closed_.notify_all();
}

}  // namespace seedling::serve
