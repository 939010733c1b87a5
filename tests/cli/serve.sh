#!/usr/bin/env bash
# `seedling serve` as a process, over raw HTTP with curl: --port 0 and the one "listening" line on stderr, the
# answers and OpenAI-style errors of each route (malformed JSON, wrong type, unknown route, oversized body, missing
# or wrong key), and SIGTERM / SIGINT ending it with exit status 0. Usage: serve.sh SEEDLING_BINARY TEST_DATA_DIR
source "$(dirname "$0")/lib/common.bash"
set +e
failures=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

# start [FLAGS...]: runs the server on a free port; sets $pid and $url once the listening line is there.
start() {
  "$bin" serve -m "$data/../../models/seedling-demo-moe" --port 0 "$@" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$tmp/err" && break
    sleep 0.05
  done
  url=$(sed -n 's|^seedling serve: listening on \(http://.*\)$|\1|p' "$tmp/err")
  check "one listening line" test "$(grep -c 'listening on' "$tmp/err")" -eq 1
  check "url printed" test -n "$url"
}

# status_is NAME WANT_STATUS WANT_PARAM CURL_ARGS...: the status, and an error body naming WANT_PARAM ("-": null).
status_is() {
  local name=$1 want=$2 param=$3
  shift 3
  local got
  got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$@")
  local p
  p=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"] and e["type"]; print(e["param"] if e["param"] is not None else "-")' "$tmp/body" 2>/dev/null || echo "?")
  if [ "$got" = "$want" ] && [ "$p" = "$param" ]; then
    echo "ok   $name: $got $(head -c 160 "$tmp/body")"
  else
    echo "FAIL $name: status $got (wanted $want), param '$p' (wanted '$param'): $(head -c 300 "$tmp/body")"
    failures=$((failures + 1))
  fi
}

start --api-key k3y --max-body 2K
auth=(-H "Authorization: Bearer k3y")
check "health" test "$(curl -s "$url/health")" = '{"status":"ok"}'
models=$(curl -s "${auth[@]}" "$url/v1/models")
check "model id is the folder name" test "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["data"][0]["id"])' "$models")" = "seedling-demo-moe"
out=$(curl -s "${auth[@]}" "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"ignore_eos":true}')
check "chat completion" test "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["usage"]["completion_tokens"])' "$out")" = 3
status_is "malformed JSON" 400 - "${auth[@]}" "$url/v1/chat/completions" -d '{"messages": ['
status_is "wrong type" 400 max_tokens "${auth[@]}" "$url/v1/completions" -d '{"prompt": "x", "max_tokens": "5"}'
status_is "unknown route" 404 - "${auth[@]}" "$url/v2/everything"
status_is "oversized body" 413 - "${auth[@]}" "$url/v1/completions" -d "{\"prompt\": \"$(head -c 4000 /dev/zero | tr '\0' x)\"}"
status_is "missing key" 401 - "$url/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}]}'
status_is "wrong key" 401 - -H "Authorization: Bearer nope" "$url/v1/models"
kill -TERM "$pid"
wait "$pid"
check "SIGTERM: exit 0" test $? -eq 0

# SIGINT while a long stream is running: the stream ends and the server exits 0. The stream is made long enough
# (30,000 tokens over a 32K context: tens of seconds) that no scheduling delay lets it finish first; 1,900 tokens
# took 1.4 s here, which a busy machine could outwait.
start --ctx 32768
curl -sN "$url/v1/completions" -d '{"prompt":"def f():","max_tokens":30000,"ignore_eos":true,"stream":true}' >"$tmp/stream" &
curl_pid=$!
for _ in $(seq 200); do  # until the stream runs (at most 10 s)
  grep -q '"text"' "$tmp/stream" 2>/dev/null && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
check "SIGINT during a stream: exit 0" test $? -eq 0
wait "$curl_pid" || true
check "the stream got tokens" grep -q '"text"' "$tmp/stream"
check "the stream ends with an error event, not finish_reason stop" grep -q '"code":"server_shutting_down"' "$tmp/stream"
check "no finish_reason stop in the cut stream" test "$(grep -c '"finish_reason":"stop"' "$tmp/stream")" -eq 0

# Model names: the served id and each --alias answer; any other is a 404 model_not_found. A path that is not UTF-8
# is a 404, and the server lives on.
start --alias gpt-x --alias gpt-y
for m in seedling-demo-moe gpt-x gpt-y; do
  check "model name $m: 200" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/completions" -d "{\"model\":\"$m\",\"prompt\":\"x\",\"max_tokens\":1}")" = 200
done
status_is "unknown model" 404 model "$url/v1/completions" -d '{"model":"gpt-z","prompt":"x","max_tokens":1}'
status_is "invalid UTF-8 path" 404 - "$url/%FF"
check "alive after /%FF" test "$(curl -s "$url/health")" = '{"status":"ok"}'
kill -TERM "$pid"
wait "$pid"

# A port in use: one error line, exit 1.
start
port=${url##*:}
"$bin" serve -m "$data/../../models/seedling-demo-moe" --port "$port" >"$tmp/out2" 2>"$tmp/err2"
rc=$?
check "port in use: exit 1" test "$rc" -eq 1
check "port in use: error line" grep -q "^seedling: error: cannot listen on 127.0.0.1:$port" "$tmp/err2"
kill -TERM "$pid"
wait "$pid"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures"
  exit 1
fi
echo "all passed"
