#include "serve/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "chat/chat_session.h"
#include "core/error.h"
#include "serve/api.h"
#include "serve/framing_server.h"
#include "serve/origin_check.h"
#include "serve/page.h"
#include "serve/reply.h"
#include "serve/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace seedling::serve {

using Json = nlohmann::ordered_json;

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(e.body(), "application/json");
}

std::string sse(const Json& j) {
  return "data: " + json_text(j) + "\n\n";
}

const char* finish_reason(Finish f) {
  return f == Finish::kLength ? "length" : "stop";
}

// The generation of one request as its handler drives it: tokens from the scheduler into a Reply.
struct Generation {
  std::shared_ptr<Stream> stream;
  std::unique_ptr<Reply> reply;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  std::string finish;  // "" while running
  std::string error;   // set when the engine failed or the server is stopping
  int error_status = 500;
  std::deque<int32_t> pending;                 // received, not yet in the reply
  std::deque<TokenLogprobs> pending_logprobs;  // theirs, when the request asked
  std::vector<TokenLogprobs> logprobs;         // of the tokens in the reply so far
  Finish ended = Finish::kRunning;

  // Takes the next token (waiting for it when none is pending) and returns what it adds to the reply, so a stream
  // sends one event per token with text; at the end, what was held back. Sets `finish` at the end.
  Reply::Delta next() {
    if (pending.empty() && ended == Finish::kRunning) {
      Stream::Update u = stream->wait();
      pending.assign(u.tokens.begin(), u.tokens.end());
      pending_logprobs.assign(std::make_move_iterator(u.logprobs.begin()), std::make_move_iterator(u.logprobs.end()));
      ended = u.finish;
      error = u.error;
    }
    Reply::Delta d;
    if (!pending.empty()) {
      const int32_t t = pending.front();
      pending.pop_front();
      ++completion_tokens;
      if (!pending_logprobs.empty()) {
        logprobs.push_back(std::move(pending_logprobs.front()));
        pending_logprobs.pop_front();
      }
      d = reply->push(t);
      if (!reply->stopped()) return d;
      stream->cancel();
      finish = "stop";
    } else if (ended == Finish::kError) {
      finish = "error";
      return d;
    } else if (ended == Finish::kCancelled) {  // only the scheduler's stop ends a request its reader still reads
      finish = "error";
      error = "the server is shutting down; the request was ended before it finished";
      error_status = 503;
      return d;
    } else if (ended != Finish::kRunning) {
      finish = finish_reason(ended);
    } else {
      return d;
    }
    Reply::Delta last = reply->finish();
    d.reasoning += last.reasoning;
    d.content += last.content;
    for (auto& c : last.calls) d.calls.push_back(std::move(c));
    if (!reply->calls().empty() && finish == "stop") finish = "tool_calls";
    return d;
  }

  ApiError failure() const {
    return ApiError(error_status, error, "", error_status == 503 ? "server_shutting_down" : "internal_error");
  }

  // Waits for the end, for a reply that is sent whole; a client that hangs up meanwhile cancels the request (and
  // false is returned). The connection is looked at every 50 ms and at every token.
  bool run_to_end() {
    while (finish.empty()) {
      if (FramingServer::client_gone()) {
        stream->cancel();
        return false;
      }
      if (pending.empty() && ended == Finish::kRunning && !stream->ready_within(std::chrono::milliseconds(50))) {
        continue;
      }
      next();
    }
    return true;
  }

  // Whether next() would return without waiting: a token pending, the end known, or the stream ready now.
  bool ready() const { return !pending.empty() || ended != Finish::kRunning || stream->ready_within({}); }
};
using Generations = std::vector<std::shared_ptr<Generation>>;

// OpenAI's usage of a request's choices: the prompt counted once, the completions summed.
Json usage(const Generations& gens) {
  int completion = 0;
  for (const auto& g : gens) completion += g->completion_tokens;
  const int prompt = gens.front()->prompt_tokens;
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

// Waits for the end of every choice (run_to_end); false when the client left (every choice is then cancelled).
bool run_all_to_end(const Generations& gens) {
  for (const auto& g : gens) {
    if (!g->run_to_end()) {
      for (const auto& other : gens) other->stream->cancel();
      return false;
    }
  }
  return true;
}

// The first choice that failed, if any.
const Generation* failed(const Generations& gens) {
  for (const auto& g : gens) {
    if (g->finish == "error") return g.get();
  }
  return nullptr;
}

}  // namespace

struct Server::Impl {
  Model& model;
  ServerOptions opt;
  Tokenizer tok;
  ChatSession chat;
  std::vector<int32_t> stop_ids;
  Engine engine;
  Metrics metrics;
  Scheduler scheduler;
  FramingServer http;
  std::mutex render_mu;
  std::atomic<uint64_t> next_id{1};
  int64_t created = std::time(nullptr);

  Impl(Model& m, ServerOptions o)
      : model(m),
        opt(std::move(o)),
        tok(Tokenizer::from_file(find_tokenizer_file(m.dir()))),
        chat(m.dir(), tok),
        stop_ids(chat.stop_ids(m.config())),
        engine(m, EngineOptions{opt.max_context, 256, 512}),
        scheduler(engine, {opt.max_seqs, opt.max_queue, opt.prompt_chunk}, &metrics),
        http(ConnectionLimits{opt.max_body, size_t(16) << 10, opt.timeout_s, 5, opt.timeout_s, opt.max_connections,
                              opt.max_seqs + opt.max_queue + 8}) {
    if (opt.model_id.empty()) opt.model_id = "seedling";
    routes();
  }

  // The vocabulary's bytes as a trie, built on the first structured-output request (about 0.1 s for 151k tokens).
  std::once_flag trie_once;
  std::shared_ptr<const grammar::TokenTrie> trie;
  std::shared_ptr<const grammar::TokenTrie> token_trie() {
    std::call_once(trie_once,
                   [&] { trie = grammar::TokenTrie::from_tokenizer(tok, size_t(model.config().vocab_size)); });
    return trie;
  }

  std::string new_id(const char* prefix) { return fmt::format("{}-{:x}{:08x}", prefix, created, next_id++); }

  void guarded(httplib::Response& res, const std::function<void()>& f) {
    try {
      f();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, e.what(), "", "internal_error"));
    }
  }

  // A request's `model`: absent, the served id or one of its aliases; any other is a 404.
  void check_model(const std::string& model) const {
    if (model.empty() || model == opt.model_id) return;
    if (std::find(opt.aliases.begin(), opt.aliases.end(), model) != opt.aliases.end()) return;
    throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", model, opt.model_id),
                   "model", "model_not_found");
  }

  // The client left before its reply: nothing can be sent; 499 (as nginx counts it) goes to the metrics.
  static void client_gone(httplib::Response& res) {
    res.status = 499;
    res.set_content(ApiError(499, "the client closed the connection", "", "client_closed_request").body(),
                    "application/json");
  }

  // 403 for a Host a keyless server does not answer (DNS rebinding) and for a page of another origin than the
  // server's own and the --cors ones; an allowed cross-origin caller gets Access-Control-Allow-Origin.
  void check_host_and_origin(const httplib::Request& req, httplib::Response& res) const {
    const std::string host = req.get_header_value("Host");
    std::vector<std::string> names = opt.allowed_hosts;
    names.push_back(opt.host);
    if (opt.api_key.empty() && !host_allowed(host, names)) {
      throw ApiError(
          403, fmt::format("the Host '{}' is not one this server answers without an API key (--allowed-host)", host),
          "", "host_not_allowed");
    }
    if (!req.has_header("Origin")) return;
    const std::string origin = req.get_header_value("Origin");
    if (!origin_allowed(origin, host, opt.cors)) {
      throw ApiError(403, fmt::format("pages of origin '{}' may not call this server (--cors)", origin), "",
                     "origin_not_allowed");
    }
    if (!opt.cors.empty()) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
  }

  void check_key(const httplib::Request& req) {
    if (opt.api_key.empty()) return;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.empty()) {
      throw ApiError(401, "missing API key: send the header 'Authorization: Bearer KEY'", "", "invalid_api_key");
    }
    if (auth != "Bearer " + opt.api_key) throw ApiError(401, "incorrect API key", "", "invalid_api_key");
  }

  // Submits a prompt once per choice (choice i samples with seed + i; each runs in its own slot, so they batch
  // together); 400 when it does not fit the context with its max_tokens, 503 when the queue is full (the choices
  // already submitted are then cancelled).
  Generations start(std::vector<int32_t> ids, const GenerationParams& g, const char* prompt_param, bool opens_reasoning,
                    bool tools, bool chat_reply) {
    const int ctx = engine.max_context();
    const int n = int(ids.size());
    if (n == 0) throw ApiError(400, "the prompt is empty: at least one token is needed", prompt_param, "invalid_value");
    if (n >= ctx) {
      throw ApiError(400, fmt::format("the prompt has {} tokens; the context limit is {}", n, ctx), prompt_param,
                     "context_length_exceeded");
    }
    const int max_tokens = g.max_tokens.value_or(ctx - n);
    if (int64_t(n) + max_tokens > ctx) {
      throw ApiError(400,
                     fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceed the context limit of {} tokens", n,
                                 max_tokens, ctx),
                     "max_tokens", "context_length_exceeded");
    }
    const int V = model.config().vocab_size;
    for (const auto& [t, b] : g.sampling.logit_bias) {
      if (t >= V) {
        throw ApiError(400, fmt::format("logit_bias: token id {} is out of range: the vocabulary has {} ids", t, V),
                       fmt::format("logit_bias.{}", t), "invalid_value");
      }
    }
    // Structured output: the grammar from the first token, or, when the prompt opens reasoning, from the token
    // that closes it (the reasoning itself is free text).
    const int32_t think_end = g.grammar && opens_reasoning ? tok.token_to_id("</think>") : -1;
    if (g.grammar && opens_reasoning && think_end < 0) {
      throw ApiError(400,
                     "structured output after the reasoning the template opens needs '</think>' as one token; send "
                     "chat_template_kwargs {\"enable_thinking\": false}",
                     "response_format", "unsupported_parameter");
    }
    Generations gens;
    for (int i = 0; i < g.n; ++i) {
      auto gen = std::make_shared<Generation>();
      gen->prompt_tokens = n;
      gen->reply = std::make_unique<Reply>(tok, g.stop, opens_reasoning, tools, chat_reply);
      SamplerParams sampling = g.sampling;
      sampling.seed += uint64_t(i);
      const std::vector<int32_t> ends = g.ignore_eos ? std::vector<int32_t>{} : stop_ids;
      std::shared_ptr<grammar::TokenConstraint> constraint;
      if (g.grammar) {
        constraint = std::make_shared<grammar::TokenConstraint>(g.grammar, token_trie(), ends);
        if (think_end >= 0) constraint->start_after(think_end);
      }
      gen->stream = scheduler.submit({ids, max_tokens, sampling, ends, g.logprobs, std::move(constraint)});
      if (!gen->stream) {
        for (const auto& earlier : gens) earlier->stream->cancel();
        throw ApiError(503,
                       fmt::format("the server is busy: {} requests are running and {} waiting; retry later",
                                   opt.max_seqs, opt.max_queue),
                       "", "queue_full");
      }
      gens.push_back(std::move(gen));
    }
    return gens;
  }

  // OpenAI's entry for one token: its text, log-probability and the text's UTF-8 bytes (a token that is part of a
  // character reads as U+FFFD here, so its bytes are those of U+FFFD).
  Json logprob_entry(int32_t id, float lp) const {
    const std::string text = tok.decode(std::vector<int32_t>{id}, false);
    Json bytes = Json::array();
    for (const unsigned char c : text) bytes.push_back(int(c));
    return {{"token", text}, {"logprob", lp}, {"bytes", bytes}};
  }
  bool is_stop(int32_t id) const { return std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end(); }
  // Chat's logprobs of the reply's tokens [from, to), stop ids left out as the text leaves them out.
  Json chat_logprobs(const std::vector<TokenLogprobs>& lps, size_t from, size_t to) const {
    Json content = Json::array();
    for (size_t i = from; i < to; ++i) {
      if (is_stop(lps[i].token)) continue;
      Json e = logprob_entry(lps[i].token, lps[i].logprob);
      Json top = Json::array();
      for (const auto& [id, lp] : lps[i].top) top.push_back(logprob_entry(id, lp));
      e["top_logprobs"] = top;
      content.push_back(std::move(e));
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  // The legacy completions form: tokens, token_logprobs, top_logprobs (text -> logprob), text_offset (from *offset,
  // advanced by each token's text).
  Json completion_logprobs(const std::vector<TokenLogprobs>& lps, size_t from, size_t to, size_t* offset) const {
    Json tokens = Json::array(), values = Json::array(), tops = Json::array(), offsets = Json::array();
    for (size_t i = from; i < to; ++i) {
      if (is_stop(lps[i].token)) continue;
      const std::string text = tok.decode(std::vector<int32_t>{lps[i].token}, false);
      tokens.push_back(text);
      values.push_back(lps[i].logprob);
      Json top = Json::object();
      for (const auto& [id, lp] : lps[i].top) top[tok.decode(std::vector<int32_t>{id}, false)] = lp;
      tops.push_back(std::move(top));
      offsets.push_back(*offset);
      *offset += text.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }

  // Streams the choices `gens` as server-sent events; `chunk(i, delta, finish)` wraps choice i's delta into its
  // event object. `logprobs_of(i, from, to)` (empty: none asked) gives the logprobs of choice i's tokens [from, to);
  // each event carries those of the tokens since its choice's last one. Choices are sent as their tokens come, each
  // with its own finish event; usage (when asked) and [DONE] follow the last.
  void stream_events(httplib::Response& res, Generations gens, bool include_usage,
                     std::function<Json(size_t i, const Reply::Delta*, const char* finish)> chunk, std::string id,
                     std::function<Json(size_t i, size_t from, size_t to)> logprobs_of = {}) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [gens, include_usage, chunk, id, logprobs_of, sent = std::vector<size_t>(gens.size(), 0)](
            size_t, httplib::DataSink& sink) mutable {
          auto send = [&](size_t i, Json j) {
            if (include_usage) j["usage"] = nullptr;
            if (logprobs_of && !j["choices"].empty()) {
              j["choices"][0]["logprobs"] = logprobs_of(i, sent[i], gens[i]->logprobs.size());
              sent[i] = gens[i]->logprobs.size();
            }
            const std::string s = sse(j);
            return sink.write(s.data(), s.size());
          };
          const auto cancel_all = [&] {
            for (const auto& g : gens) g->stream->cancel();
            return false;
          };
          for (size_t i = 0; i < gens.size(); ++i) {
            Reply::Delta first;
            if (!send(i, chunk(i, &first, nullptr))) return cancel_all();
          }
          std::vector<bool> closed(gens.size(), false);
          for (size_t open = gens.size(); open > 0;) {
            bool moved = false;
            for (size_t i = 0; i < gens.size(); ++i) {
              Generation& g = *gens[i];
              if (closed[i] || (gens.size() > 1 && !g.ready())) continue;
              moved = true;
              Reply::Delta d = g.next();  // one choice alone: waits for its next token
              if (!d.empty() && !send(i, chunk(i, &d, nullptr))) return cancel_all();
              if (g.finish.empty()) continue;
              if (g.finish == "error") {
                cancel_all();
                const std::string e = "data: " + g.failure().body() + "\n\n";
                sink.write(e.data(), e.size());
                const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
                sink.done();
                return true;
              }
              if (!send(i, chunk(i, nullptr, g.finish.c_str()))) return cancel_all();
              closed[i] = true;
              --open;
            }
            // Several choices and none ready: wait for the first open one (at most 20 ms, then look at all again).
            for (size_t i = 0; !moved && i < gens.size(); ++i) {
              if (!closed[i]) {
                gens[i]->stream->ready_within(std::chrono::milliseconds(20));
                break;
              }
            }
          }
          if (include_usage) {
            Json u = chunk(0, nullptr, nullptr);
            u["choices"] = Json::array();
            u["usage"] = usage(gens);
            const std::string s = sse(u);
            if (!sink.write(s.data(), s.size())) return false;
          }
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        },
        [gens](bool) {
          for (const auto& g : gens) g->stream->cancel();
        });
  }

  void chat_completions(const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    ChatRequest cr = parse_chat_request(body, chat.template_uses_tools());
    check_model(cr.gen.model);
    std::string prompt;
    try {
      std::lock_guard lk(render_mu);
      prompt = chat.render_messages(cr.messages, cr.tools, cr.template_kwargs);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages",
                     "template_error");
    }
    const bool tools = !cr.tools.is_null();
    auto gens = start(tok.encode(prompt, false), cr.gen, "messages", prompt_opens_reasoning(prompt), tools, true);
    const std::string id = new_id("chatcmpl");
    const int64_t now = std::time(nullptr);
    const std::string model_id = opt.model_id;
    // Tool call ids derive from the completion id; choice i > 0 derives its own from id-i.
    const auto choice_id = [id](size_t i) { return i == 0 ? id : fmt::format("{}-{}", id, i); };
    if (!cr.gen.stream) {
      if (!run_all_to_end(gens)) return client_gone(res);
      if (const Generation* bad = failed(gens)) throw bad->failure();
      Json choices = Json::array();
      for (size_t i = 0; i < gens.size(); ++i) {
        const Generation& g = *gens[i];
        choices.push_back(
            {{"index", i},
             {"message", chat_message(*g.reply, choice_id(i))},
             {"logprobs", cr.gen.logprobs >= 0 ? chat_logprobs(g.logprobs, 0, g.logprobs.size()) : Json(nullptr)},
             {"finish_reason", g.finish}});
      }
      Json out = {{"id", id},          {"object", "chat.completion"}, {"created", now},
                  {"model", model_id}, {"choices", choices},          {"usage", usage(gens)}};
      res.set_content(json_text(out), "application/json");
      return;
    }
    auto tool_index = std::make_shared<std::vector<int>>(gens.size(), 0);
    stream_events(
        res, gens, cr.gen.include_usage,
        [id, now, model_id, tool_index, choice_id](size_t i, const Reply::Delta* d, const char* finish) {
          Json delta = Json::object();
          int& tools_sent = (*tool_index)[i];
          if (d != nullptr && d->empty() && tools_sent == 0 && finish == nullptr) {
            delta = {{"role", "assistant"}, {"content", ""}};  // the first event
          } else if (d != nullptr) {
            delta = chat_delta(*d, &tools_sent, choice_id(i));
          }
          return Json{{"id", id},
                      {"object", "chat.completion.chunk"},
                      {"created", now},
                      {"model", model_id},
                      {"choices", Json::array({{{"index", i},
                                                {"delta", delta},
                                                {"logprobs", nullptr},
                                                {"finish_reason", finish ? Json(finish) : Json(nullptr)}}})}};
        },
        id,
        cr.gen.logprobs >= 0
            ? std::function<Json(size_t, size_t, size_t)>(
                  [this, gens](size_t i, size_t from, size_t to) { return chat_logprobs(gens[i]->logprobs, from, to); })
            : std::function<Json(size_t, size_t, size_t)>());
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    CompletionRequest cr = parse_completion_request(body);
    check_model(cr.gen.model);
    std::vector<int32_t> ids = cr.prompt_ids;
    if (ids.empty()) ids = tok.encode(cr.prompt, false);
    if (ids.empty()) throw ApiError(400, "the prompt encodes to no tokens", "prompt", "invalid_value");
    const int V = model.config().vocab_size;
    for (int32_t t : ids) {
      if (t >= V) {
        throw ApiError(400, fmt::format("token id {} is out of range: the vocabulary has {} ids", t, V), "prompt",
                       "invalid_value");
      }
    }
    auto gens = start(std::move(ids), cr.gen, "prompt", false, false, false);
    const std::string id = new_id("cmpl");
    const int64_t now = std::time(nullptr);
    const std::string model_id = opt.model_id;
    auto choice = [](size_t i, const std::string& text, const char* finish) {
      return Json{
          {"text", text}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", finish ? Json(finish) : Json()}};
    };
    if (!cr.gen.stream) {
      if (!run_all_to_end(gens)) return client_gone(res);
      if (const Generation* bad = failed(gens)) throw bad->failure();
      Json choices = Json::array();
      for (size_t i = 0; i < gens.size(); ++i) {
        const Generation& g = *gens[i];
        Json c = choice(i, g.reply->content(), g.finish.c_str());
        if (cr.gen.logprobs >= 0) {
          size_t offset = 0;
          c["logprobs"] = completion_logprobs(g.logprobs, 0, g.logprobs.size(), &offset);
        }
        choices.push_back(std::move(c));
      }
      Json out = {{"id", id},          {"object", "text_completion"}, {"created", now},
                  {"model", model_id}, {"choices", choices},          {"usage", usage(gens)}};
      res.set_content(json_text(out), "application/json");
      return;
    }
    stream_events(
        res, gens, cr.gen.include_usage,
        [id, now, model_id, choice](size_t i, const Reply::Delta* d, const char* finish) {
          return Json{{"id", id},
                      {"object", "text_completion"},
                      {"created", now},
                      {"model", model_id},
                      {"choices", Json::array({choice(i, d ? d->content : "", finish)})}};
        },
        id,
        cr.gen.logprobs >= 0 ? std::function<Json(size_t, size_t, size_t)>(
                                   [this, gens, offsets = std::make_shared<std::vector<size_t>>(gens.size(), 0)](
                                       size_t i, size_t from, size_t to) {
                                     return completion_logprobs(gens[i]->logprobs, from, to, &(*offsets)[i]);
                                   })
                             : std::function<Json(size_t, size_t, size_t)>());
  }

  // POST /v1/responses: the Responses API over the chat path (the same template, sampling, reply parsing and
  // scheduler). The whole response, or its events: response.created, .in_progress, then per output item
  // (reasoning, message, function calls, in that order) output_item.added, its deltas and output_item.done, and
  // response.completed (response.incomplete when max_output_tokens cut it).
  void responses(const httplib::Request& req, httplib::Response& res) {
    const Json body = parse_body(req.body);
    ResponsesRequest rr = parse_responses_request(body, chat.template_uses_tools());
    const GenerationParams& g = rr.chat.gen;
    check_model(g.model);
    std::string prompt;
    try {
      std::lock_guard lk(render_mu);
      prompt = chat.render_messages(rr.chat.messages, rr.chat.tools, rr.chat.template_kwargs);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template refused the input: {}", e.what()), "input", "template_error");
    }
    Generations gens =
        start(tok.encode(prompt, false), g, "input", prompt_opens_reasoning(prompt), !rr.chat.tools.is_null(), true);
    auto gen = gens.front();
    const std::string id = new_id("resp");
    const int64_t now = std::time(nullptr);
    // The response object at any point: its status, output and usage as they are.
    auto object = [this, id, now, echo = rr.echo, gen](const char* status, Json output) {
      Json o = {{"id", id}, {"object", "response"}, {"created_at", now}, {"status", status}, {"error", nullptr}};
      o["incomplete_details"] =
          std::string(status) == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
      for (auto it = echo.begin(); it != echo.end(); ++it) o[it.key()] = it.value();
      o["model"] = opt.model_id;
      o["output"] = std::move(output);
      o["previous_response_id"] = nullptr;
      o["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
      o["store"] = false;
      o["truncation"] = "disabled";
      const int in = gen->prompt_tokens, out = gen->completion_tokens;
      // The reply does not attribute tokens to its parts: the reasoning's count is its text encoded again.
      const std::string& reasoning = gen->reply->reasoning();
      const int reasoning_tokens = reasoning.empty() ? 0 : int(tok.encode(reasoning, false).size());
      o["usage"] = {{"input_tokens", in},
                    {"input_tokens_details", {{"cached_tokens", gen->stream->reused_tokens()}}},
                    {"output_tokens", out},
                    {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                    {"total_tokens", in + out}};
      return o;
    };
    const auto status_of = [](const std::string& finish) { return finish == "length" ? "incomplete" : "completed"; };
    if (!g.stream) {
      if (!gen->run_to_end()) return client_gone(res);
      if (gen->finish == "error") throw gen->failure();
      res.set_content(json_text(object(status_of(gen->finish), response_output(*gen->reply, id))), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [gen, id, object, status_of](size_t, httplib::DataSink& sink) {
          int sequence = 0;
          Json output = Json::array();  // items completed so far
          // The item open now: "" none, "reasoning" or "message", with its text so far.
          std::string open_kind, open_text;
          int calls = 0;
          auto event = [&](const char* type, Json j) {
            Json e = {{"type", type}, {"sequence_number", sequence++}};
            e.update(j);
            j = std::move(e);
            const std::string s = fmt::format("event: {}\ndata: {}\n\n", type, json_text(j));
            return sink.write(s.data(), s.size());
          };
          auto item_of = [&](const char* status) {
            return open_kind == "reasoning" ? response_reasoning_item(id, open_text, status)
                                            : response_message_item(id, open_text, status);
          };
          auto close = [&] {
            if (open_kind.empty()) return true;
            const int index = int(output.size());
            const Json item = item_of("completed");
            const bool ok =
                (open_kind == "reasoning" ? event("response.reasoning_text.done", {{"item_id", item["id"]},
                                                                                   {"output_index", index},
                                                                                   {"content_index", 0},
                                                                                   {"text", open_text}})
                                          : event("response.output_text.done", {{"item_id", item["id"]},
                                                                                {"output_index", index},
                                                                                {"content_index", 0},
                                                                                {"text", open_text}}) &&
                                                event("response.content_part.done", {{"item_id", item["id"]},
                                                                                     {"output_index", index},
                                                                                     {"content_index", 0},
                                                                                     {"part", item["content"][0]}})) &&
                event("response.output_item.done", {{"output_index", index}, {"item", item}});
            output.push_back(item);
            open_kind.clear();
            open_text.clear();
            return ok;
          };
          auto open = [&](const char* kind) {
            if (open_kind == kind) return true;
            if (!close()) return false;
            open_kind = kind;
            const int index = int(output.size());
            const Json item = item_of("in_progress");
            Json added = item;
            added["content"] = Json::array();
            if (!event("response.output_item.added", {{"output_index", index}, {"item", added}})) return false;
            return open_kind != "message" ||
                   event("response.content_part.added",
                         {{"item_id", item["id"]},
                          {"output_index", index},
                          {"content_index", 0},
                          {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
          };
          auto text = [&](const char* kind, const std::string& delta) {
            if (delta.empty()) return true;
            if (!open(kind)) return false;
            open_text += delta;
            const int index = int(output.size());
            return event(open_kind == "reasoning" ? "response.reasoning_text.delta" : "response.output_text.delta",
                         {{"item_id", item_of("in_progress")["id"]},
                          {"output_index", index},
                          {"content_index", 0},
                          {"delta", delta}});
          };
          auto call = [&](const ToolCall& c) {
            if (!close()) return false;
            const int index = int(output.size());
            Json item = response_call_item(c, id, calls++, "in_progress");
            Json added = item;
            added["arguments"] = "";
            const bool ok = event("response.output_item.added", {{"output_index", index}, {"item", added}}) &&
                            event("response.function_call_arguments.delta",
                                  {{"item_id", item["id"]}, {"output_index", index}, {"delta", c.arguments}}) &&
                            event("response.function_call_arguments.done",
                                  {{"item_id", item["id"]}, {"output_index", index}, {"arguments", c.arguments}});
            item["status"] = "completed";
            output.push_back(item);
            return ok && event("response.output_item.done", {{"output_index", index}, {"item", item}});
          };
          if (!event("response.created", {{"response", object("in_progress", Json::array())}}) ||
              !event("response.in_progress", {{"response", object("in_progress", Json::array())}})) {
            return gen->stream->cancel(), false;
          }
          while (gen->finish.empty()) {
            const Reply::Delta d = gen->next();
            bool ok = text("reasoning", d.reasoning) && text("message", d.content);
            for (const ToolCall& c : d.calls) ok = ok && call(c);
            if (!ok) return gen->stream->cancel(), false;
          }
          if (gen->finish == "error") {
            const ApiError e = gen->failure();
            event("error", {{"code", e.code}, {"message", e.message}, {"param", nullptr}});
          } else {
            // A reply with no text and no calls still has its (empty) message, as the whole response does.
            if (output.empty() && open_kind.empty() && !open("message")) return false;
            if (!close()) return false;
            const char* status = status_of(gen->finish);
            event(std::string(status) == "incomplete" ? "response.incomplete" : "response.completed",
                  {{"response", object(status, output)}});
          }
          sink.done();
          return true;
        },
        [gen](bool) { gen->stream->cancel(); });
  }

  // vLLM's /tokenize: {"prompt": text} (llama.cpp's "content" too) or {"messages": [...]} rendered by the chat
  // template (add_generation_prompt, default true), add_special_tokens (default true for a prompt, as the
  // tokenizer's post-processor has it; false for messages, whose template writes them) -> {count, max_model_len,
  // tokens}.
  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const Json b = parse_body(req.body);
    for (auto it = b.begin(); it != b.end(); ++it) {
      static const std::set<std::string> known = {
          "model", "prompt", "content", "messages", "add_special_tokens", "add_generation_prompt"};
      if (!known.count(it.key())) {
        throw ApiError(400, fmt::format("unknown parameter '{}'", it.key()), it.key(), "unknown_parameter");
      }
    }
    if (b.contains("model")) {
      if (!b["model"].is_string()) throw ApiError(400, "'model' must be a string", "model", "invalid_type");
      check_model(b["model"].get<std::string>());
    }
    const auto flag = [&](const char* key, bool dflt) {
      if (!b.contains(key)) return dflt;
      if (!b[key].is_boolean()) throw ApiError(400, fmt::format("'{}' must be a boolean", key), key, "invalid_type");
      return b[key].get<bool>();
    };
    const int given = int(b.contains("prompt")) + int(b.contains("content")) + int(b.contains("messages"));
    if (given != 1) {
      throw ApiError(400, "give exactly one of 'prompt' (or 'content') and 'messages'", "prompt", "invalid_value");
    }
    std::vector<int32_t> ids;
    if (b.contains("messages")) {
      ChatRequest cr = parse_chat_request(Json{{"messages", b["messages"]}}, chat.template_uses_tools());
      Json kwargs = cr.template_kwargs;
      kwargs["add_generation_prompt"] = flag("add_generation_prompt", true);
      std::string prompt;
      try {
        std::lock_guard lk(render_mu);
        prompt = chat.render_messages(cr.messages, cr.tools, kwargs);
      } catch (const Error& e) {
        throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages",
                       "template_error");
      }
      ids = tok.encode(prompt, flag("add_special_tokens", false));
    } else {
      const char* key = b.contains("prompt") ? "prompt" : "content";
      if (!b[key].is_string()) throw ApiError(400, fmt::format("'{}' must be a string", key), key, "invalid_type");
      try {
        ids = tok.encode(b[key].get<std::string>(), flag("add_special_tokens", true));
      } catch (const Error& e) {
        throw ApiError(400, e.what(), key, "invalid_value");
      }
    }
    res.set_content(json_text({{"count", ids.size()}, {"max_model_len", engine.max_context()}, {"tokens", ids}}),
                    "application/json");
  }

  // vLLM's /detokenize: {"tokens": [ids]} -> {"prompt": text}, special tokens kept.
  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const Json b = parse_body(req.body);
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (it.key() != "model" && it.key() != "tokens") {
        throw ApiError(400, fmt::format("unknown parameter '{}'", it.key()), it.key(), "unknown_parameter");
      }
    }
    if (b.contains("model")) {
      if (!b["model"].is_string()) throw ApiError(400, "'model' must be a string", "model", "invalid_type");
      check_model(b["model"].get<std::string>());
    }
    if (!b.contains("tokens") || !b["tokens"].is_array()) {
      throw ApiError(400, "'tokens' must be an array of token ids", "tokens", "invalid_type");
    }
    const int V = model.config().vocab_size;
    std::vector<int32_t> ids;
    for (const Json& t : b["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V) {
        throw ApiError(400, fmt::format("'tokens' must hold token ids in [0, {}), got {}", V, t.dump()), "tokens",
                       "invalid_value");
      }
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    res.set_content(json_text({{"prompt", tok.decode(ids, false)}}), "application/json");
  }

  Json model_json() const {
    return {{"id", opt.model_id}, {"object", "model"}, {"created", created}, {"owned_by", "seedling"}};
  }

  void routes() {
    http.error_body = [](int status, const std::string& message) {
      static const std::map<int, const char*> codes = {
          {400, "invalid_http"},         {408, "request_timeout"},           {413, "request_too_large"},
          {417, "expectation_failed"},   {431, "headers_too_large"},         {501, "not_implemented"},
          {503, "too_many_connections"}, {505, "http_version_not_supported"}};
      auto it = codes.find(status);
      return ApiError(status, message, "", it == codes.end() ? "" : it->second).body();
    };
    // Without it httplib answers an exception with "500" and its message in an EXCEPTION_WHAT header.
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, what, "", "internal_error"));
    });
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      try {
        check_host_and_origin(req, res);
        if (req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;  // a CORS preflight
        const bool open = req.path == "/" || req.path == "/health" || req.path == "/index.html";
        if (!open) check_key(req);
      } catch (const ApiError& e) {
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.content_length_ > 0) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 404) {
            send_error(res, ApiError(404, fmt::format("unknown route: {} {}", req.method, req.path), "", "not_found"));
          } else if (res.status == 413) {
            send_error(res, ApiError(413,
                                     fmt::format("the request body is larger than the limit of {} bytes (--max-body)",
                                                 opt.max_body),
                                     "", "request_too_large"));
          } else {
            send_error(res, ApiError(res.status, fmt::format("HTTP error {}", res.status), "", ""));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      static const std::set<std::string> known = {"/",
                                                  "/health",
                                                  "/metrics",
                                                  "/v1/models",
                                                  "/tokenize",
                                                  "/detokenize",
                                                  "/v1/completions",
                                                  "/v1/chat/completions",
                                                  "/v1/responses"};
      metrics.count_request(known.count(req.path) ? req.path : "other", res.status);
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      const std::string_view page = chat_page();
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
    http.Options(".*", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(Json{{"object", "list"}, {"data", Json::array({model_json()})}}.dump(), "application/json");
    });
    http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string asked = req.matches[1];
      if (asked != opt.model_id && std::find(opt.aliases.begin(), opt.aliases.end(), asked) == opt.aliases.end()) {
        return send_error(res, ApiError(404, fmt::format("the model '{}' does not exist", std::string(req.matches[1])),
                                        "model", "model_not_found"));
      }
      res.set_content(model_json().dump(), "application/json");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { chat_completions(req, res); });
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { completions(req, res); });
    });
    http.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { responses(req, res); });
    });
    http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { tokenize(req, res); });
    });
    http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { detokenize(req, res); });
    });
  }
};

Server::Server(Model& model, ServerOptions options) : impl_(std::make_unique<Impl>(model, std::move(options))) {}

Server::~Server() {
  stop();
}

int Server::bind() {
  const ServerOptions& o = impl_->opt;
  if (o.port < 0 || o.port > 65535) fail("--port must be between 0 and 65535, got {}", o.port);
  // cpp-httplib listens with a backlog of 5: clients that connect at once (64 in tests/server/load.mjs) overflow it,
  // the kernel drops their SYNs and they retry after 1, 3, 7, 15 ... s. So its socket is listened on again, with a
  // backlog of SOMAXCONN, after the bind. SO_REUSEADDR rather than its default SO_REUSEPORT, which let a second
  // server bind a port a first one listens on and share its connections.
  auto listening = std::make_shared<int>(-1);
  impl_->http.set_socket_options([listening](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = sock;
  });
  int port = o.port;
  if (o.port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on {}: no free port", o.host);
  } else if (!impl_->http.bind_to_port(o.host, o.port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port);
  }
  if (::listen(*listening, SOMAXCONN) != 0) fail("cannot listen on {}:{}: {}", o.host, port, std::strerror(errno));
  return port;
}

void Server::run() {
  impl_->http.serve();
}

void Server::stop() {
  impl_->scheduler.stop();
  impl_->http.stop();
}

const Metrics& Server::metrics() const {
  return impl_->metrics;
}

int Server::max_context() const {
  return impl_->engine.max_context();
}

}  // namespace seedling::serve
