// The server over HTTP, in this process, with httplib's client: every error a status and an OpenAI-style body
// naming the parameter; stop strings, usage and streaming = not streaming; tools through a tool-capable template;
// a client that disconnects mid-stream frees its slot (seen in /metrics).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "chat/chat_session.h"
#include "model/model.h"
#include "serve/server.h"
#include "test_util.h"

namespace seedling::serve {

using Json = nlohmann::json;

namespace {
std::string demo_dir() {
  return std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe";
}

class Running {
 public:
  Running(Model& model, ServerOptions o) : server_(model, std::move(o)) {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.run(); });
    for (int i = 0; i < 500; ++i) {  // until it answers
      auto r = client().Get("/health");
      if (r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the server never answered /health";
  }
  ~Running() {
    server_.stop();
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& h = {}) const {
    return client().Post(path.c_str(), h, body, "application/json");
  }
  // A value of /metrics: the line that starts with `name` followed by a space (-1 and a failure when absent).
  double metric(const std::string& name) const {
    const double v = metric_or(name, -1);
    if (v == -1) ADD_FAILURE() << "no metric " << name;
    return v;
  }
  // The request counters are bumped by httplib's logger, after the response is written: a client can read
  // /metrics before that. So wait (10 ms polls, at most 10 s) until the counter reaches `want`, and return it.
  double counter_reaching(const std::string& name, double want) const {
    double v = -1;
    for (int i = 0; i < 1000 && (v = metric_or(name, -1)) < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (v == -1) ADD_FAILURE() << "no metric " << name;
    return v;
  }
  Server& server() { return server_; }
  int port() const { return port_; }

 private:
  double metric_or(const std::string& name, double absent) const {
    auto r = client().Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    const std::string text = r ? r->body : "";
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? absent : std::stod(text.substr(at + name.size() + 2));
  }

  Server server_;
  int port_ = 0;
  std::thread thread_;
};

// After its client hung up, a request of 1900 tokens is cancelled: its slot is free within 10 s, and generation
// stopped before its end.
void expect_cancelled_after_hang_up(const Running& s) {
  const auto hung_up = std::chrono::steady_clock::now();
  while (s.metric("seedling_slots_in_use") > 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - hung_up, std::chrono::seconds(10)) << "the slot was never freed";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double generated = s.metric("seedling_generated_tokens_total");
  EXPECT_LT(generated, 1900);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(s.metric("seedling_generated_tokens_total"), generated);  // nothing runs for it any more
}

// A raw TCP connection to the server, for what httplib's client never sends (bad framing, half-sent requests,
// pipelining).
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  // False once the server has closed its side.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(size_t(n));
    }
    return true;
  }
  // What the server sends until it closes the connection or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The status of the first HTTP response in `reply` (0: none).
int status_of(const std::string& reply) {
  return reply.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(reply.c_str() + 9) : 0;
}

// How many HTTP responses `reply` holds.
int responses_in(const std::string& reply) {
  int n = 0;
  for (size_t at = reply.find("HTTP/1.1 "); at != std::string::npos; at = reply.find("HTTP/1.1 ", at + 1)) ++n;
  return n;
}

// The JSON body of a one-response reply.
Json body_of(const std::string& reply) {
  const size_t at = reply.find("\r\n\r\n");
  return Json::parse(at == std::string::npos ? "" : reply.substr(at + 4), nullptr, false);
}

// This process's resident set, in bytes.
double rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  }
  return 0;
}

ServerOptions options() {
  ServerOptions o;
  o.port = 0;
  o.model_id = "demo";
  o.max_body = 4096;
  return o;
}

// Expects an OpenAI-style error with this status, naming `param` (empty: null).
void expect_error(const httplib::Result& r, int status, const std::string& param, const std::string& code = "") {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const Json j = Json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
  EXPECT_EQ(e["type"], status >= 500 ? "server_error" : "invalid_request_error") << r->body;
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r->body;
  } else {
    EXPECT_EQ(e["param"], param) << r->body;
  }
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r->body;
  }
  EXPECT_TRUE(e.contains("code")) << r->body;
}

// The events of an SSE body, [DONE] last.
std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    std::string e = body.substr(at, end - at);
    EXPECT_EQ(e.rfind("data: ", 0), 0u) << e;
    out.push_back(e.substr(6));
    at = end + 2;
  }
  return out;
}

const std::string kUser = R"("messages": [{"role": "user", "content": "def fib(n):"}])";

class Http : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(demo_dir()).release(); }
  static void TearDownTestSuite() { delete model_; }
  static Model* model_;
};
Model* Http::model_ = nullptr;
}  // namespace

TEST_F(Http, BadRequestsGetStatusAndErrorNamingTheParameter) {
  Running s(*model_, options());
  const std::string chat = "/v1/chat/completions";
  expect_error(s.post(chat, "{\"messages\": [1,"), 400, "", "invalid_json");
  expect_error(s.post(chat, "[1, 2]"), 400, "", "invalid_json");
  expect_error(s.post(chat, "{\"temperature\": \"hot\", " + kUser + "}"), 400, "temperature", "invalid_type");
  expect_error(s.post(chat, "{\"max_tokens\": 0, " + kUser + "}"), 400, "max_tokens", "invalid_value");
  expect_error(s.post(chat, "{\"max_tokens\": 2.5, " + kUser + "}"), 400, "max_tokens", "invalid_type");
  expect_error(s.post(chat, "{\"messages\": \"hi\"}"), 400, "messages", "invalid_type");
  expect_error(s.post(chat, "{}"), 400, "messages");
  expect_error(s.post(chat, R"({"messages": [{"role": "wizard", "content": "x"}]})"), 400, "messages[0].role");
  expect_error(s.post(chat, "{\"stop\": [1], " + kUser + "}"), 400, "stop", "invalid_type");
  expect_error(s.post(chat, "{\"stream\": 1, " + kUser + "}"), 400, "stream", "invalid_type");
  expect_error(s.post(chat, "{\"n\": 17, " + kUser + "}"), 400, "n", "invalid_value");
  expect_error(s.post(chat, "{\"top_logprobs\": 2, " + kUser + "}"), 400, "top_logprobs");
  expect_error(s.post("/v1/completions", R"({"prompt": "x", "logprobs": 6})"), 400, "logprobs");
  expect_error(s.post(chat, "{\"frobnicate\": true, " + kUser + "}"), 400, "frobnicate", "unknown_parameter");
  // The demo model's template has no tools.
  expect_error(s.post(chat, R"({"tools": [{"type": "function", "function": {"name": "f"}}], )" + kUser + "}"), 400,
               "tools", "unsupported_parameter");
  expect_error(s.post(chat, "{\"max_tokens\": 100000, " + kUser + "}"), 400, "max_tokens", "context_length_exceeded");
  expect_error(s.post("/v1/completions", "{\"prompt\": 5}"), 400, "prompt", "invalid_type");
  expect_error(s.post("/v1/completions", "{\"prompt\": \"x\", \"echo\": true}"), 400, "echo");
  expect_error(s.client().Get("/v1/nothing"), 404, "", "not_found");
  expect_error(s.client().Get("/v1/models/other"), 404, "model", "model_not_found");
  expect_error(s.post(chat, "{\"pad\": \"" + std::string(5000, 'x') + "\"}"), 413, "", "request_too_large");
  EXPECT_GE(s.counter_reaching("seedling_requests_total{path=\"/v1/chat/completions\",status=\"400\"}", 14), 14);
}

TEST_F(Http, ApiKeyIsRequiredOnTheApiButNotOnHealth) {
  ServerOptions o = options();
  o.api_key = "s3cret";
  Running s(*model_, o);
  const std::string body = "{\"max_tokens\": 2, " + kUser + "}";
  expect_error(s.post("/v1/chat/completions", body), 401, "", "invalid_api_key");
  expect_error(s.post("/v1/chat/completions", body, {{"Authorization", "Bearer nope"}}), 401, "", "invalid_api_key");
  expect_error(s.client().Get("/v1/models"), 401, "", "invalid_api_key");
  expect_error(s.client().Get("/metrics"), 401, "", "invalid_api_key");
  auto ok = s.post("/v1/chat/completions", body, {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(Http, ModelsHealthAndPage) {
  Running s(*model_, options());
  auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "demo");
  auto page = s.client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, test::read_file(std::string(SEEDLING_TEST_DATA) + "/../../src/serve/page/index.html"));
}

// A stop string taken from the middle of a greedy completion cuts it there, streamed or not, with finish "stop";
// usage counts the prompt's tokens and what was generated.
TEST_F(Http, StopStringsUsageAndStreamingEqualNotStreaming) {
  Running s(*model_, options());
  auto full = s.post("/v1/completions", R"({"prompt": "import os\n", "max_tokens": 40, "temperature": 0})");
  ASSERT_TRUE(full);
  ASSERT_EQ(full->status, 200) << full->body;
  const Json f = Json::parse(full->body);
  const std::string text = f["choices"][0]["text"];
  EXPECT_EQ(f["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(f["usage"]["completion_tokens"], 40);
  EXPECT_EQ(f["usage"]["total_tokens"], f["usage"]["prompt_tokens"].get<int>() + 40);
  ASSERT_GT(text.size(), 20u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const std::string want = text.substr(0, text.find(stop));
  Json req = {{"prompt", "import os\n"}, {"max_tokens", 40}, {"temperature", 0}, {"stop", {stop, "@@never@@"}}};
  auto cut = s.post("/v1/completions", req.dump());
  ASSERT_TRUE(cut);
  const Json c = Json::parse(cut->body);
  EXPECT_EQ(c["choices"][0]["text"], want);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(c["usage"]["completion_tokens"].get<int>(), 40);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto streamed = s.post("/v1/completions", req.dump());
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> ev = events(streamed->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string got;
  std::string finish;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    const Json j = Json::parse(ev[i]);
    got += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
    EXPECT_TRUE(j["usage"].is_null());
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(finish, "stop");
  const Json usage = Json::parse(ev[ev.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], c["usage"]);
}

TEST_F(Http, ChatStreamedEqualsNotStreamedWithASeed) {
  Running s(*model_, options());
  Json req = {
      {"messages",
       {{{"role", "system"}, {"content", "You write Python."}}, {{"role", "user"}, {"content", "sort a list"}}}},
      {"max_tokens", 24},
      {"temperature", 0.9},
      {"seed", 7}};
  auto whole = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const Json w = Json::parse(whole->body);
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["model"], "demo");
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  req["stream"] = true;
  auto streamed = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(streamed);
  const std::vector<std::string> ev = events(streamed->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(Json::parse(ev[0])["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const Json j = Json::parse(ev[i]);
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    const Json& d = j["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(content, w["choices"][0]["message"]["content"]);
  EXPECT_EQ(Json::parse(ev[ev.size() - 2])["choices"][0]["finish_reason"], w["choices"][0]["finish_reason"]);
}

// n choices: choice i is the request alone with seed + i (each runs in its own slot, batched with the others), the
// prompt is counted once in usage, and streamed choices interleave with their own index and finish event.
TEST_F(Http, NChoicesAreTheRequestAloneWithSeedPlusI) {
  Running s(*model_, options());
  Json req = {{"messages", {{{"role", "user"}, {"content", "sort a list"}}}},
              {"max_tokens", 12},
              {"temperature", 0.9},
              {"seed", 40},
              {"n", 3}};
  auto many = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(many);
  ASSERT_EQ(many->status, 200) << many->body;
  const Json m = Json::parse(many->body);
  ASSERT_EQ(m["choices"].size(), 3u);
  int completion = 0;
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    const Json& c = m["choices"][size_t(i)];
    EXPECT_EQ(c["index"], i);
    Json one = req;
    one.erase("n");
    one["seed"] = 40 + i;
    auto alone = s.post("/v1/chat/completions", one.dump());
    ASSERT_TRUE(alone);
    const Json a = Json::parse(alone->body);
    EXPECT_EQ(c["message"], a["choices"][0]["message"]) << "choice " << i;
    EXPECT_EQ(c["finish_reason"], a["choices"][0]["finish_reason"]);
    completion += a["usage"]["completion_tokens"].get<int>();
    EXPECT_EQ(m["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);
    distinct.insert(c["message"]["content"].get<std::string>());
  }
  EXPECT_EQ(m["usage"]["completion_tokens"], completion);
  EXPECT_GT(distinct.size(), 1u) << "three seeds at temperature 0.9 gave one text: the seeds are not per choice";
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto streamed = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(streamed);
  const std::vector<std::string> ev = events(streamed->body);
  ASSERT_GE(ev.size(), 8u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::vector<std::string> content(3);
  std::vector<int> finishes(3, 0);
  for (size_t e = 0; e + 2 < ev.size(); ++e) {
    const Json j = Json::parse(ev[e]);
    ASSERT_EQ(j["choices"].size(), 1u);
    const size_t i = j["choices"][0]["index"].get<size_t>();
    ASSERT_LT(i, 3u);
    const Json& d = j["choices"][0]["delta"];
    if (d.contains("content")) content[i] += d["content"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) ++finishes[i];
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(content[i], m["choices"][i]["message"]["content"]) << "choice " << i;
    EXPECT_EQ(finishes[i], 1) << "choice " << i;
  }
  EXPECT_EQ(Json::parse(ev[ev.size() - 2])["usage"], m["usage"]);
  // Completions too, greedy: every choice is the same text.
  auto greedy = s.post("/v1/completions", R"({"prompt": "import os\n", "max_tokens": 8, "temperature": 0, "n": 2})");
  ASSERT_TRUE(greedy);
  const Json g = Json::parse(greedy->body);
  ASSERT_EQ(g["choices"].size(), 2u);
  EXPECT_EQ(g["choices"][1]["index"], 1);
  EXPECT_EQ(g["choices"][0]["text"], g["choices"][1]["text"]);
  EXPECT_EQ(g["usage"]["completion_tokens"], 16);
}

// The Responses API's events: "event: TYPE" then "data: {...}" with the same type inside.
std::vector<Json> response_events(const std::string& body) {
  std::vector<Json> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    const std::string e = body.substr(at, end - at);
    at = end + 2;
    const size_t nl = e.find('\n');
    EXPECT_EQ(e.rfind("event: ", 0), 0u) << e;
    EXPECT_NE(nl, std::string::npos) << e;
    if (nl == std::string::npos) break;
    EXPECT_EQ(e.compare(nl + 1, 6, "data: "), 0) << e;
    Json j = Json::parse(e.substr(nl + 7));
    EXPECT_EQ(j["type"], e.substr(7, nl - 7));
    out.push_back(std::move(j));
  }
  return out;
}

// /v1/responses runs the chat path: instructions + input give the chat request's prompt, the output message its
// text, the usage its counts; max_output_tokens reached is status incomplete; the stream's deltas make the same
// text and its last event holds the whole response.
TEST_F(Http, ResponsesAreTheChatReplyInTheResponsesShape) {
  Running s(*model_, options());
  const Json chat_req = {
      {"messages",
       {{{"role", "system"}, {"content", "You write Python."}}, {{"role", "user"}, {"content", "sort a list"}}}},
      {"max_tokens", 10},
      {"temperature", 0.8},
      {"seed", 5}};
  auto c = s.post("/v1/chat/completions", chat_req.dump());
  ASSERT_TRUE(c);
  const Json chat = Json::parse(c->body);
  Json req = {{"instructions", "You write Python."},
              {"input", "sort a list"},
              {"max_output_tokens", 10},
              {"temperature", 0.8},
              {"seed", 5},
              {"store", false}};
  auto r = s.post("/v1/responses", req.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json resp = Json::parse(r->body);
  EXPECT_EQ(resp["object"], "response");
  EXPECT_EQ(resp["model"], "demo");
  const std::string want_status = chat["choices"][0]["finish_reason"] == "length" ? "incomplete" : "completed";
  EXPECT_EQ(resp["status"], want_status);
  if (want_status == "incomplete") {
    EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  } else {
    EXPECT_TRUE(resp["incomplete_details"].is_null());
  }
  ASSERT_EQ(resp["output"].size(), 1u) << resp.dump();
  const Json& msg = resp["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(resp["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(resp["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(resp["instructions"], "You write Python.");
  EXPECT_EQ(resp["max_output_tokens"], 10);
  // The same as input items with text parts.
  Json items = req;
  items["input"] = Json::parse(R"([{"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": "sort "},
                                                 {"type": "input_text", "text": "a list"}]}])");
  auto r2 = s.post("/v1/responses", items.dump());
  ASSERT_TRUE(r2);
  EXPECT_EQ(Json::parse(r2->body)["output"][0]["content"], msg["content"]);
  EXPECT_EQ(msg["id"], "msg_" + resp["id"].get<std::string>());
  req["stream"] = true;
  auto streamed = s.post("/v1/responses", req.dump());
  ASSERT_TRUE(streamed);
  const std::vector<Json> ev = response_events(streamed->body);
  ASSERT_GE(ev.size(), 6u);
  EXPECT_EQ(ev.front()["type"], "response.created");
  EXPECT_EQ(ev[1]["type"], "response.in_progress");
  EXPECT_EQ(ev.back()["type"], want_status == "incomplete" ? "response.incomplete" : "response.completed");
  std::string text;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["sequence_number"], i);
    if (ev[i]["type"] == "response.output_text.delta") text += ev[i]["delta"].get<std::string>();
  }
  EXPECT_EQ(text, msg["content"][0]["text"]);
  Json last = ev.back()["response"];
  ASSERT_EQ(last["output"].size(), 1u);
  EXPECT_EQ(last["output"][0]["content"], msg["content"]);
  EXPECT_EQ(last["output"][0]["id"], "msg_" + last["id"].get<std::string>());
  EXPECT_EQ(last["usage"]["output_tokens"], resp["usage"]["output_tokens"]);
  // What the Responses API sends that this server cannot honour is a 400 naming it.
  const std::string in = R"("input": "hi")";
  expect_error(s.post("/v1/responses", "{\"previous_response_id\": \"resp_1\", " + in + "}"), 400,
               "previous_response_id", "unsupported_parameter");
  expect_error(s.post("/v1/responses", R"({"text": {"format": {"type": "json_schema"}}, )" + in + "}"), 400,
               "text.format.schema", "missing_required_parameter");
  expect_error(s.post("/v1/responses", R"({"tools": [{"type": "web_search"}], )" + in + "}"), 400, "tools[0].type",
               "unsupported_parameter");
  expect_error(s.post("/v1/responses", R"({"max_output_tokens": 0, )" + in + "}"), 400, "max_output_tokens",
               "invalid_value");
  expect_error(s.post("/v1/responses", R"({"frobnicate": 1, )" + in + "}"), 400, "frobnicate", "unknown_parameter");
  expect_error(s.post("/v1/responses", "{}"), 400, "input", "missing_required_parameter");
  expect_error(s.post("/v1/responses", R"({"input": [{"type": "image", "url": "x"}]})"), 400, "input[0].type",
               "unsupported_parameter");
}

namespace {
// A schema with every kind of node the matcher has (bounded so the demo model's output always ends), and a check of
// a value against it written out by hand.
const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12, "description": "annotations are ignored"},
    "age": {"type": "integer"},
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
    "at": {"$ref": "#/$defs/point"},
    "note": {"anyOf": [{"type": "null"}, {"type": "number"}]}
  },
  "required": ["name", "age", "ok", "color", "at"],
  "additionalProperties": false,
  "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                      "required": ["x", "y"], "additionalProperties": false}}})";

// Code points of a UTF-8 string.
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// "" when `v` satisfies kPersonSchema, else what is wrong.
std::string person_problem(const Json& v) {
  if (!v.is_object()) return "not an object";
  const std::set<std::string> known = {"name", "age", "ok", "color", "tags", "at", "note"};
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!known.count(it.key())) return "unknown key " + it.key();
  }
  for (const char* k : {"name", "age", "ok", "color", "at"}) {
    if (!v.contains(k)) return std::string("missing ") + k;
  }
  if (!v["name"].is_string() || code_points(v["name"].get<std::string>()) > 12) return "name";
  if (!v["age"].is_number_integer()) return "age";
  if (!v["ok"].is_boolean()) return "ok";
  if (!v["color"].is_string() || !std::set<std::string>{"red", "green", "blue"}.count(v["color"].get<std::string>())) {
    return "color";
  }
  if (v.contains("tags")) {
    if (!v["tags"].is_array() || v["tags"].size() > 3) return "tags";
    for (const Json& t : v["tags"]) {
      if (!t.is_string() || code_points(t.get<std::string>()) > 5) return "tags item";
    }
  }
  const Json& at = v["at"];
  if (!at.is_object() || at.size() != 2 || !at.contains("x") || !at.contains("y") || !at["x"].is_number() ||
      !at["y"].is_number()) {
    return "at";
  }
  if (v.contains("note") && !v["note"].is_null() && !v["note"].is_number()) return "note";
  return "";
}

Json structured_request(int seed, double temperature) {
  return {{"messages", {{{"role", "user"}, {"content", "Describe a person as JSON."}}}},
          {"max_tokens", 300},
          {"temperature", temperature},
          {"seed", seed},
          {"response_format",
           {{"type", "json_schema"},
            {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", Json::parse(kPersonSchema)}}}}}};
}
}  // namespace

// Structured output with the demo model (a model of Python code, which left alone writes no JSON): for every seed,
// greedy or sampled, the reply parses and satisfies the schema, and ends with "stop"; n choices are each the request
// alone with seed + i (batched = alone); streamed = not streamed; max_tokens cuts it with "length"; json_object
// gives an object; /v1/responses' text.format the same; a keyword the matcher does not check is a 400 naming it.
TEST_F(Http, StructuredOutputFollowsTheSchemaForEverySeed) {
  Running s(*model_, options());
  const std::string chat = "/v1/chat/completions";
  std::set<std::string> distinct;
  for (int seed = 1; seed <= 6; ++seed) {
    for (double temperature : {0.0, 1.0}) {
      auto r = s.post(chat, structured_request(seed, temperature).dump());
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const Json reply = Json::parse(r->body);
      const std::string content = reply["choices"][0]["message"]["content"].get<std::string>();
      EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << content;
      const Json v = Json::parse(content, nullptr, false);
      EXPECT_EQ(person_problem(v), "") << "seed " << seed << ", temperature " << temperature << ": " << content;
      distinct.insert(content);
    }
  }
  EXPECT_GT(distinct.size(), 3u) << "sampling gave few distinct replies";
  // n = 3 at temperature 1: each choice is its seed alone, though they ran batched
  Json req = structured_request(20, 1.0);
  req["n"] = 3;
  auto many = s.post(chat, req.dump());
  ASSERT_TRUE(many);
  ASSERT_EQ(many->status, 200) << many->body;
  const Json m = Json::parse(many->body);
  ASSERT_EQ(m["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto alone = s.post(chat, structured_request(20 + i, 1.0).dump());
    ASSERT_TRUE(alone);
    const Json a = Json::parse(alone->body);
    EXPECT_EQ(m["choices"][size_t(i)]["message"], a["choices"][0]["message"]) << "choice " << i;
    EXPECT_EQ(person_problem(Json::parse(a["choices"][0]["message"]["content"].get<std::string>())), "");
  }
  // streamed = not streamed
  req = structured_request(3, 1.0);
  auto whole = s.post(chat, req.dump());
  req["stream"] = true;
  auto streamed = s.post(chat, req.dump());
  ASSERT_TRUE(whole && streamed);
  std::string text, finish;
  for (const std::string& e : events(streamed->body)) {
    if (e == "[DONE]") continue;
    const Json j = Json::parse(e);
    const Json& d = j["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, Json::parse(whole->body)["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, "stop");
  // cut by max_tokens
  req = structured_request(3, 1.0);
  req["max_tokens"] = 4;
  auto cut = s.post(chat, req.dump());
  ASSERT_TRUE(cut);
  const Json c = Json::parse(cut->body);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["completion_tokens"], 4);
  EXPECT_TRUE(Json::parse(whole->body)["choices"][0]["message"]["content"].get<std::string>().starts_with(
      c["choices"][0]["message"]["content"].get<std::string>()));
  // json_object
  for (int seed = 1; seed <= 3; ++seed) {
    Json o = {{"messages", {{{"role", "user"}, {"content", "JSON please"}}}},
              {"max_tokens", 400},
              {"seed", seed},
              {"response_format", {{"type", "json_object"}}}};
    auto r = s.post(chat, o.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const Json j = Json::parse(r->body);
    const std::string content = j["choices"][0]["message"]["content"].get<std::string>();
    if (j["choices"][0]["finish_reason"] == "stop") {
      EXPECT_TRUE(Json::parse(content, nullptr, false).is_object()) << content;
    } else {
      EXPECT_EQ(content.front(), '{') << content;
    }
  }
  // /v1/responses: text.format json_schema, flat; echoed in the response
  Json rr = {
      {"input", "Describe a person as JSON."},
      {"max_output_tokens", 300},
      {"seed", 5},
      {"text",
       {{"format",
         {{"type", "json_schema"}, {"name", "person"}, {"strict", true}, {"schema", Json::parse(kPersonSchema)}}}}}};
  auto resp = s.post("/v1/responses", rr.dump());
  ASSERT_TRUE(resp);
  ASSERT_EQ(resp->status, 200) << resp->body;
  const Json rj = Json::parse(resp->body);
  EXPECT_EQ(rj["status"], "completed");
  EXPECT_EQ(rj["text"]["format"]["type"], "json_schema");
  EXPECT_EQ(person_problem(Json::parse(rj["output"][0]["content"][0]["text"].get<std::string>(), nullptr, false)), "")
      << rj["output"].dump();
  // refused schemas and formats, named
  Json bad = structured_request(1, 0.0);
  bad["response_format"]["json_schema"]["schema"]["properties"]["name"]["pattern"] = "^[A-Z]";
  auto r1 = s.post(chat, bad.dump());
  expect_error(r1, 400, "response_format.json_schema.schema", "unsupported_schema_keyword");
  EXPECT_NE(r1->body.find("pattern"), std::string::npos) << r1->body;
  EXPECT_NE(r1->body.find("#/properties/name"), std::string::npos) << r1->body;
  bad = structured_request(1, 0.0);
  bad["response_format"] = {{"type", "xml"}};
  expect_error(s.post(chat, bad.dump()), 400, "response_format.type", "invalid_value");
  bad["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}};
  expect_error(s.post(chat, bad.dump()), 400, "response_format.json_schema.schema", "missing_required_parameter");
  bad["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"schema", {{"enum", Json::array()}}}}}};
  expect_error(s.post(chat, bad.dump()), 400, "response_format.json_schema.schema", "invalid_schema");
  rr["text"]["format"]["schema"] = {{"type", "string"}, {"format", "email"}};
  auto r2 = s.post("/v1/responses", rr.dump());
  expect_error(r2, 400, "text.format.schema", "unsupported_schema_keyword");
  EXPECT_NE(r2->body.find("format"), std::string::npos);
}

TEST_F(Http, QueueFullIs503WithRetryAfter) {
  ServerOptions o = options();
  o.max_seqs = 1;
  o.max_queue = 0;
  Running s(*model_, o);
  std::thread busy(
      [&] { s.post("/v1/completions", R"({"prompt": "def f():", "max_tokens": 1500, "ignore_eos": true})"); });
  for (int i = 0; i < 2000 && s.metric("seedling_slots_in_use") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(s.metric("seedling_slots_in_use"), 1);
  auto r = s.post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  expect_error(r, 503, "", "queue_full");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  s.server().stop();  // ends the busy request
  busy.join();
}

// The client reads a few events of a long stream and hangs up: the slot is free again long before the request
// could have finished, and it stopped generating.
TEST_F(Http, DisconnectMidStreamFreesTheSlot) {
  Running s(*model_, options());
  httplib::Client c = s.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "application/json");
  req.body = "{\"max_tokens\": 1900, \"ignore_eos\": true, \"stream\": true, " + kUser + "}";
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 4; };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  EXPECT_FALSE(c.send(req, res, err));  // the receiver cancelled
  expect_cancelled_after_hang_up(s);
}

TEST_F(Http, MetricsCountRequestsTokensAndLatencies) {
  Running s(*model_, options());
  auto r = s.post("/v1/chat/completions", "{\"max_tokens\": 5, \"temperature\": 0, \"stop\": \"@@\", " + kUser + "}");
  ASSERT_TRUE(r);
  const Json j = Json::parse(r->body);
  const int generated = j["usage"]["completion_tokens"];
  EXPECT_EQ(s.counter_reaching("seedling_requests_total{path=\"/v1/chat/completions\",status=\"200\"}", 1), 1);
  EXPECT_EQ(s.metric("seedling_generated_tokens_total"), generated);
  EXPECT_EQ(s.metric("seedling_prompt_tokens_total") + s.metric("seedling_prompt_tokens_reused_total"),
            j["usage"]["prompt_tokens"].get<double>());
  EXPECT_EQ(s.metric("seedling_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(s.metric("seedling_token_latency_seconds_count"), generated - 1);
  EXPECT_EQ(s.metric("seedling_slots"), 8);
  EXPECT_EQ(s.metric("seedling_queue_depth"), 0);
  EXPECT_GE(s.metric("seedling_expert_cache_hits_total"), 0);
  EXPECT_GE(s.metric("seedling_expert_cache_misses_total"), 0);
}

// A model folder with a tool-capable template (Qwen3's): tools and tool messages render through it; the prompt the
// server fed is the one ChatSession renders for the same messages. Forced tool choice is refused.
TEST_F(Http, ToolsGoThroughAToolCapableTemplate) {
  test::ScratchDir dir("serve-tools");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::create_symlink(std::filesystem::absolute(demo_dir() + "/" + f), dir / f);
  }
  test::write_file(dir / "chat_template.jinja", test::read_file(test::data_path("templates/qwen3.jinja")));
  auto model = Model::load(dir.str());
  Running s(*model, options());
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}])");
  nlohmann::ordered_json req = {{"messages", messages}, {"tools", tools}, {"max_tokens", 4}, {"temperature", 0}};
  auto r = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  // The same conversation rendered here, with the arguments as a mapping as the server passes them.
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(dir.str()));
  ChatSession chat(dir.str(), tok);
  nlohmann::ordered_json rendered = messages;
  rendered[1]["content"] = "";
  rendered[1]["tool_calls"][0]["function"]["arguments"] = {{"city", "Paris"}};
  const std::string prompt = chat.render_messages(rendered, tools, nlohmann::ordered_json::object());
  EXPECT_NE(prompt.find("<tool_response>\n18 C, sunny\n</tool_response>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("\"name\": \"get_weather\""), std::string::npos) << prompt;
  EXPECT_EQ(Json::parse(r->body)["usage"]["prompt_tokens"], tok.encode(prompt, false).size());
  // The same conversation as Responses input items, its tools in their flat form: the same prompt.
  const nlohmann::ordered_json responses_req = nlohmann::ordered_json::parse(R"({
      "input": [{"role": "user", "content": "Weather in Paris?"},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                 "arguments": "{\"city\": \"Paris\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"}],
      "tools": [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "max_output_tokens": 4, "temperature": 0})");
  auto rr = s.post("/v1/responses", responses_req.dump());
  ASSERT_TRUE(rr);
  ASSERT_EQ(rr->status, 200) << rr->body;
  EXPECT_EQ(Json::parse(rr->body)["usage"]["input_tokens"], tok.encode(prompt, false).size());
  EXPECT_EQ(Json::parse(rr->body)["tools"][0]["name"], "get_weather");
  req["tool_choice"] = "required";
  expect_error(s.post("/v1/chat/completions", req.dump()), 400, "tool_choice", "unsupported_parameter");
  req["tool_choice"] = "none";
  auto none = s.post("/v1/chat/completions", req.dump());
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 200) << none->body;
  EXPECT_LT(Json::parse(none->body)["usage"]["prompt_tokens"], tok.encode(prompt, false).size());
}

// A path that is not UTF-8 once decoded used to abort the process (nlohmann's type_error.316, thrown while the 404
// body was built from the path): it is a 404 in OpenAI's shape, and the server goes on.
TEST_F(Http, InvalidUtf8InThePathIsA404NotACrash) {
  Running s(*model_, options());
  RawConnection c(s.port());
  ASSERT_TRUE(c.send("GET /%FF HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  const std::string reply = c.read_all();
  EXPECT_EQ(status_of(reply), 404) << reply;
  const Json e = body_of(reply);
  EXPECT_TRUE(e.is_object() && e["error"]["code"] == "not_found") << reply;
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// Invalid UTF-8 in a body was a 500 "HTTP error 500" with httplib's EXCEPTION_WHAT header: it is malformed JSON.
TEST_F(Http, InvalidUtf8InTheBodyIsA400InOpenAIsShape) {
  Running s(*model_, options());
  auto r = s.post("/v1/completions", "{\"prompt\": \"a\xff\xfe\"}");
  expect_error(r, 400, "", "invalid_json");
  EXPECT_FALSE(r->has_header("EXCEPTION_WHAT"));
}

// A 40 MB chunked body is refused at the chunk that passes --max-body (the default 8 MiB here): 413 within a
// second, having held no more than the limit (the old server read it all: 1.29 GB of RSS, then a 400).
TEST_F(Http, AChunkedBodyOverTheLimitIs413AtOnce) {
  ServerOptions o = options();
  o.max_body = size_t(8) << 20;
  Running s(*model_, o);
  RawConnection c(s.port());
  const double rss_before = rss_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
  for (size_t sent = 0; sent < (size_t(40) << 20) && c.send(chunk); sent += 0x10000) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) break;
  }
  const std::string reply = c.read_all(std::chrono::milliseconds(1000));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(status_of(reply), 413) << reply.substr(0, 200);
  EXPECT_TRUE(body_of(reply).is_object() && body_of(reply)["error"]["code"] == "request_too_large") << reply;
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(rss_bytes() - rss_before, 100e6);
}

// 200 connections that sent half a request hold no thread: others are served at once; each half-sent request is
// answered 408 once its whole-request deadline (--timeout, 1 s here) has passed.
TEST_F(Http, HalfSentRequestsDoNotLockOthersOut) {
  ServerOptions o = options();
  o.timeout_s = 1;
  Running s(*model_, o);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<RawConnection>(s.port()));
    ASSERT_TRUE(
        slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"pr"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  httplib::Client c("127.0.0.1", s.port());
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(1, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto health = c.Get("/health");
  auto done = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200) << done->body;
  EXPECT_EQ(status_of(slow.front()->read_all(std::chrono::milliseconds(3000))), 408);
}

// Framing RFC 9112 rejects is a 400 and the connection closes (no request smuggling through a disagreement on where
// a body ends); a negative Content-Length used to hang the connection, conflicting ones were accepted.
TEST_F(Http, FramingRfc9112RejectsIs400) {
  Running s(*model_, options());
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n";
  const std::string body = R"({"prompt": "x", "max_tokens": 1})";
  for (const std::string& bad : {
           post + "Content-Length: 32\r\nContent-Length: 33\r\n\r\n" + body,
           post + "Content-Length: 32, 33\r\n\r\n" + body,
           post + "Content-Length: -1\r\n\r\n" + body,
           post + "Content-Length: +32\r\n\r\n" + body,
           post + "Content-Length: 32\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + body + "\r\n0\r\n\r\n",
           post + "Transfer-Encoding: chunked, identity\r\n\r\n" + body,
           post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n",
           post + "Content-Length: 32\r\n folded: line\r\n\r\n" + body,
           post + "Content-Length : 32\r\n\r\n" + body,
           std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: 32\r\n\r\n") + body,
           post + "Host: y\r\nContent-Length: 32\r\n\r\n" + body,
       }) {
    RawConnection c(s.port());
    ASSERT_TRUE(c.send(bad));
    const std::string reply = c.read_all(std::chrono::milliseconds(2000));
    EXPECT_EQ(status_of(reply), 400) << bad << "\n->\n" << reply;
    EXPECT_TRUE(body_of(reply).is_object() && body_of(reply).contains("error")) << reply;
  }
  // Equal values repeated are one value (RFC 9110 8.6).
  RawConnection c(s.port());
  ASSERT_TRUE(c.send(post + "Content-Length: 32\r\nContent-Length: 32\r\nConnection: close\r\n\r\n" + body));
  EXPECT_EQ(status_of(c.read_all()), 200);
}

// Requests sent back to back on one connection, before any answer (pipelining), are all answered in order: chunked
// and with Content-Length; the old server dropped all but the first.
TEST_F(Http, PipelinedRequestsAreAnsweredInOrder) {
  Running s(*model_, options());
  RawConnection c(s.port());
  const std::string body = R"({"prompt": "x", "max_tokens": 1, "seed": 1})";
  ASSERT_TRUE(
      c.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
             "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
             fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body) +
             "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  const std::string reply = c.read_all();
  EXPECT_EQ(responses_in(reply), 3) << reply;
  const size_t health = reply.find("{\"status\":\"ok\"}"), completion = reply.find("\"text_completion\"");
  const size_t models = reply.find("\"object\":\"list\"");
  EXPECT_TRUE(health < completion && completion < models) << reply;
}

// OpenAI's fields that change nothing here are accepted: store, metadata, service_tier, reasoning_effort, an empty
// logit_bias, tools with tool_choice "none" on a template without tools (the demo model's).
TEST_F(Http, HarmlessOpenAIFieldsAreAccepted) {
  Running s(*model_, options());
  auto r = s.post("/v1/chat/completions", R"({"store": false, "metadata": {"k": "v"}, "service_tier": "auto",
      "reasoning_effort": "low", "logit_bias": {}, "tool_choice": "none", "max_tokens": 1,
      "tools": [{"type": "function", "function": {"name": "f"}}], )" +
                                              kUser + "}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// logit_bias steers the draw (a +100 on one token makes greedy pick it, -100 on the greedy token moves it off), the
// penalties are accepted in OpenAI's range, and bad entries are 400s naming the entry.
TEST_F(Http, LogitBiasAndPenaltiesAreHonoured) {
  Running s(*model_, options());
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(demo_dir()));
  const auto one_token = [&](const std::string& extra) {
    auto r = s.post("/v1/completions", R"({"prompt": "The cat", "max_tokens": 1, "temperature": 0)" + extra + "}");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    return r ? Json::parse(r->body)["choices"][0]["text"].get<std::string>() : std::string();
  };
  const std::string greedy = one_token("");
  for (const int32_t id : {300, 1234}) {
    EXPECT_EQ(one_token(fmt::format(R"(, "logit_bias": {{"{}": 100}})", id)),
              tok.decode(std::vector<int32_t>{id}, false))
        << id;
  }
  const std::vector<int32_t> greedy_ids = tok.encode(greedy, false);
  ASSERT_EQ(greedy_ids.size(), 1u) << greedy;
  EXPECT_NE(one_token(fmt::format(R"(, "logit_bias": {{"{}": -100}})", greedy_ids[0])), greedy);
  EXPECT_EQ(one_token(R"(, "presence_penalty": 1.5, "frequency_penalty": -0.5)"), greedy);  // nothing drawn yet
  const std::string rest = ", " + kUser + "}";
  expect_error(s.post("/v1/chat/completions", R"({"logit_bias": {"x": 1})" + rest), 400, "logit_bias.x");
  expect_error(s.post("/v1/chat/completions", R"({"logit_bias": {"5": 101})" + rest), 400, "logit_bias.5");
  expect_error(s.post("/v1/chat/completions", R"({"logit_bias": {"5": "up"})" + rest), 400, "logit_bias.5");
  expect_error(s.post("/v1/chat/completions", R"({"logit_bias": {"99999999": 1})" + rest), 400, "logit_bias.99999999");
  expect_error(s.post("/v1/chat/completions", R"({"presence_penalty": 2.5)" + rest), 400, "presence_penalty");
  expect_error(s.post("/v1/chat/completions", R"({"frequency_penalty": "a")" + rest), 400, "frequency_penalty");
}

// /tokenize and /detokenize (vLLM's): a prompt's ids are the tokenizer's, a conversation's count is what a chat
// completion of it reports as prompt_tokens, and detokenize inverts tokenize.
TEST_F(Http, TokenizeAndDetokenize) {
  Running s(*model_, options());
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(demo_dir()));
  const std::string text = "Hello, world! 3 + 4 = 7";
  auto r = s.post("/tokenize", Json{{"prompt", text}}.dump());
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), tok.encode(text, true));
  EXPECT_EQ(j["count"], j["tokens"].size());
  EXPECT_GT(j["max_model_len"].get<int>(), 0);
  auto llama_form = s.post("/tokenize", Json{{"content", text}, {"add_special_tokens", false}}.dump());
  ASSERT_TRUE(llama_form && llama_form->status == 200);
  EXPECT_EQ(Json::parse(llama_form->body)["tokens"].get<std::vector<int32_t>>(), tok.encode(text, false));
  auto d = s.post("/detokenize", Json{{"tokens", j["tokens"]}}.dump());
  ASSERT_TRUE(d && d->status == 200);
  EXPECT_EQ(Json::parse(d->body)["prompt"], tok.decode(j["tokens"].get<std::vector<int32_t>>(), false));
  const Json messages = Json::parse(R"([{"role": "user", "content": "What is 2 + 2?"}])");
  auto m = s.post("/tokenize", Json{{"messages", messages}}.dump());
  auto c = s.post("/v1/chat/completions", Json{{"messages", messages}, {"max_tokens", 1}}.dump());
  ASSERT_TRUE(m && c && m->status == 200 && c->status == 200);
  EXPECT_EQ(Json::parse(m->body)["count"], Json::parse(c->body)["usage"]["prompt_tokens"]);
  auto no_gen = s.post("/tokenize", Json{{"messages", messages}, {"add_generation_prompt", false}}.dump());
  ASSERT_TRUE(no_gen && no_gen->status == 200);
  EXPECT_LT(Json::parse(no_gen->body)["count"], Json::parse(m->body)["count"]);
  expect_error(s.post("/tokenize", Json{{"prompt", "a"}, {"messages", messages}}.dump()), 400, "prompt");
  expect_error(s.post("/tokenize", R"({"prompt": 5})"), 400, "prompt");
  expect_error(s.post("/tokenize", R"({"prompt": "a", "frob": 1})"), 400, "frob");
  expect_error(s.post("/tokenize", R"({"prompt": "a", "model": "gpt-5"})"), 404, "model", "model_not_found");
  expect_error(s.post("/detokenize", R"({"tokens": [1, -2]})"), 400, "tokens");
  expect_error(s.post("/detokenize", R"({"tokens": [99999999]})"), 400, "tokens");
  expect_error(s.post("/detokenize", R"({"tokens": "1 2"})"), 400, "tokens");
}

// A model name the server does not serve is a 404 model_not_found (it was answered by the loaded model), unless it
// is one of the --alias names.
TEST_F(Http, AnUnknownModelIs404UnlessItIsAnAlias) {
  ServerOptions o = options();
  o.aliases = {"gpt-4o-mini"};
  Running s(*model_, o);
  const std::string rest = ", \"max_tokens\": 1, " + kUser + "}";
  expect_error(s.post("/v1/chat/completions", "{\"model\": \"gpt-5\"" + rest), 404, "model", "model_not_found");
  expect_error(s.post("/v1/completions", R"({"model": "gpt-5", "prompt": "x"})"), 404, "model", "model_not_found");
  for (const char* name : {"demo", "gpt-4o-mini"}) {
    auto r = s.post("/v1/chat/completions", fmt::format("{{\"model\": \"{}\"", name) + rest);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Json::parse(r->body)["model"], "demo");
  }
  auto alias = s.client().Get("/v1/models/gpt-4o-mini");
  ASSERT_TRUE(alias);
  EXPECT_EQ(alias->status, 200);
}

// A client that hangs up while its non-streamed reply is generated cancels it: the slot is freed and generation
// stops, long before max_tokens (it used to run to its end).
TEST_F(Http, DisconnectBeforeANonStreamedReplyCancelsIt) {
  Running s(*model_, options());
  RawConnection c(s.port());
  const std::string body = "{\"max_tokens\": 1900, \"ignore_eos\": true, " + kUser + "}";
  ASSERT_TRUE(c.send(fmt::format(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{}", body.size(), body)));
  for (int i = 0; i < 1000 && s.metric("seedling_slots_in_use") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(s.metric("seedling_slots_in_use"), 1) << "the request never ran";
  c.close();
  expect_cancelled_after_hang_up(s);
}

// Stopping the server (SIGTERM) ends a running stream with an error event, never with finish_reason "stop" as if it
// had finished.
TEST_F(Http, ShutdownEndsAStreamWithAnErrorEvent) {
  Running s(*model_, options());
  std::string body;
  std::thread client([&] {
    httplib::Client c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = R"({"prompt": "def f():", "max_tokens": 1900, "ignore_eos": true, "stream": true})";
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      body.append(d, n);
      return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    c.send(req, res, err);
  });
  for (int i = 0; i < 1000 && s.metric("seedling_generated_tokens_total") < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.server().stop();
  client.join();
  const std::vector<std::string> ev = events(body);
  ASSERT_GE(ev.size(), 2u) << body;
  EXPECT_EQ(ev.back(), "[DONE]");
  const Json last = Json::parse(ev[ev.size() - 2], nullptr, false);
  EXPECT_TRUE(last.contains("error")) << ev[ev.size() - 2];
  EXPECT_EQ(body.find("\"finish_reason\":\"stop\""), std::string::npos) << body;
}

// A keyless server answers only Host headers that cannot be rebound (IP literals, localhost, --allowed-host) and only
// pages of its own origin or a --cors one: a foreign page's request is a 403 before it runs; a --cors origin gets its
// preflight and Access-Control-Allow-Origin.
TEST_F(Http, KeylessServerRefusesForeignHostsAndOrigins) {
  ServerOptions o = options();
  o.cors = {"http://app.example"};
  o.allowed_hosts = {"box.lan"};
  Running s(*model_, o);
  const std::string port = std::to_string(s.port());
  auto get = [&](const httplib::Headers& h) { return s.client().Get("/v1/models", h); };
  expect_error(get({{"Host", "evil.example:" + port}}), 403, "", "host_not_allowed");
  for (const std::string& host : {"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "box.lan:" + port}) {
    auto r = get({{"Host", host}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << host;
  }
  const std::string body = R"({"prompt": "x", "max_tokens": 1})";
  expect_error(s.post("/v1/completions", body, {{"Origin", "http://evil.example"}}), 403, "", "origin_not_allowed");
  auto own = s.post("/v1/completions", body, {{"Origin", "http://127.0.0.1:" + port}});
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
  auto preflight = s.client().Options("/v1/completions",
                                      {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  auto cross = s.post("/v1/completions", body, {{"Origin", "http://app.example"}});
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 200) << cross->body;
  EXPECT_EQ(cross->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
}

}  // namespace seedling::serve
