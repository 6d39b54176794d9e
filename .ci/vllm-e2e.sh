#!/usr/bin/env bash
# The whole pipeline against a real vLLM (CPU build, `.ci/vllm-install.sh`)
# serving SmolLM2-135M with n-gram speculation and per-request acceptance,
# on 127.0.0.1 only, every figure checked against vLLM's own counters.
#
# 1. installs vLLM and converts the model (kept in target/: seconds on a
#    second run);
# 2. starts `vllm serve` with n-gram speculation and
#    `--per-request-spec-decode-metrics summary`, and runs `speedbench
#    profile` four times over fixtures/llama_e2e.jsonl at temperature 0:
#    chat and completions, streaming and not, c=1 and c=4, each between two
#    snapshots of `/metrics` taken by this script (not by speedbench);
# 3. the same server without speculation, one run, and `compare`;
# 4. tunes: `speedbench tune` starts the baseline and n-gram at two budgets
#    itself, two load levels each;
# 5. runs the checks in bins/speedbench/tests/it/vllm_e2e.rs on those runs
#    and snapshots. Every server is stopped by its PID (the tune's by theirs).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT="${VLLM_E2E_OUT:-$ROOT/target/vllm-e2e}"
MODEL_DIR="${VLLM_MODEL_DIR:-$ROOT/target/vllm-model/smollm2-135m}"
SPEEDBENCH="$ROOT/target/debug/speedbench"

echo "== vllm: install"
PY="$(bash .ci/vllm-install.sh)"
VENV="$(dirname "$(dirname "$PY")")"
"$PY" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"), "torch", m.version("torch"))'

cargo build -q -p speedbench-cli

# A free loopback port, chosen by the kernel (no fixed port: two CI runs
# on one machine must not meet).
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# No pipe into a reader that stops early (head, grep -q, awk's exit): under
# pipefail the writer's SIGPIPE (exit 141) ends the script.
IOMP="$(find "$VENV" -name 'libiomp5.so' -print -quit)"
TCMALLOC="$(ldconfig -p | awk '!lib && /libtcmalloc_minimal.so.4 /{lib=$NF} END{print lib}')"

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID"
        # vLLM's engine core is a child process: give both time to go.
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap stop_server EXIT

start_server() { # log-file, extra vllm serve args...
    local log="$1"
    shift
    env VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=auto HF_HUB_OFFLINE=1 \
        VLLM_NO_USAGE_STATS=1 LD_PRELOAD="$TCMALLOC:$IOMP" \
        "$VENV/bin/vllm" serve "$MODEL_DIR" --served-model-name smollm2-135m \
        --host 127.0.0.1 --port "$PORT" --dtype bfloat16 --max-model-len 2048 \
        --max-num-seqs 4 --enforce-eager "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 1500); do
        if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1).status == 200 else 1)" 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "vllm serve exited; its log:" >&2
            tail -50 "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "vllm serve not healthy after 300 s; its log:" >&2
    tail -50 "$log" >&2
    return 1
}

snapshot() { # file
    python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=10).read().decode())" >"$1"
}

profile() { # run-dir, extra speedbench args...
    local dir="$1"
    shift
    snapshot "$dir.before.prom"
    "$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --model smollm2-135m \
        --input-file fixtures/llama_e2e.jsonl --osl 64 \
        --extra-inputs temperature:0 --timeout 300 \
        --server-metrics-shutdown-delay 0 \
        --output-artifact-dir "$dir" "$@" 2>"$dir.stderr" | tee "$dir.stdout"
    # The counters of the run's last requests may land a moment late.
    sleep 1
    snapshot "$dir.after.prom"
}

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== speculative server (n-gram, 4 tokens, per-request summary)"
start_server "$OUT/server-spec.log" \
    --speculative-config '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}' \
    --per-request-spec-decode-metrics summary
# The preflight is one more request between a run's snapshots: its own
# counts (printed) are taken off the first run's; the others skip it, so
# their by-position counters are the records' alone.
profile "$OUT/chat-stream-c1" --streaming --concurrency 1
profile "$OUT/chat-c4" --concurrency 4 --no-preflight
profile "$OUT/completions-stream-c4" --endpoint-type completions --streaming --concurrency 4 --no-preflight
profile "$OUT/completions-c1" --endpoint-type completions --concurrency 1 --no-preflight
stop_server

echo "== the same server without speculation"
start_server "$OUT/server-base.log"
profile "$OUT/base-chat-stream-c1" --streaming --concurrency 1
# Synthetic prompts of exactly 48 tokens by vLLM's own /tokenize
# (completions: no chat template), outputs forced to 16 (ignore_eos).
snapshot "$OUT/synthetic.before.prom"
"$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --model smollm2-135m --isl 48 --osl 16 \
    --num-dataset-entries 4 --request-count 4 --endpoint-type completions --streaming \
    --concurrency 2 --extra-inputs temperature:0 --timeout 300 --no-preflight \
    --server-metrics-shutdown-delay 0 --output-artifact-dir "$OUT/synthetic"
sleep 1
snapshot "$OUT/synthetic.after.prom"
# The same, counted by the model's own tokenizer.json (--tokenizer), as for
# a server without /tokenize.
snapshot "$OUT/synthetic-local.before.prom"
"$SPEEDBENCH" profile --url "127.0.0.1:$PORT" --model smollm2-135m --isl 48 --osl 16 \
    --tokenizer "$MODEL_DIR" --num-dataset-entries 4 --request-count 4 \
    --endpoint-type completions --streaming --concurrency 2 --extra-inputs temperature:0 \
    --timeout 300 --no-preflight --server-metrics-shutdown-delay 0 \
    --output-artifact-dir "$OUT/synthetic-local"
sleep 1
snapshot "$OUT/synthetic-local.after.prom"
stop_server

"$SPEEDBENCH" compare --baseline "$OUT/base-chat-stream-c1" --speculative "$OUT/chat-stream-c1" | tee "$OUT/compare.stdout"

# speedbench tune against the real vLLM: the baseline and n-gram at two
# budgets, streamed (the prediction from one run needs times per pass), at
# two load levels; the tune starts, readies and stops every server itself.
echo "== speedbench tune: baseline, n-gram with 2 and 4 tokens, concurrency 1 and 2"
# VLLM_SERVER_DEV_MODE turns on POST /reset_prefix_cache, which the tune
# calls before every run on a server that already served one.
VLLM="env VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=auto HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 LD_PRELOAD=$TCMALLOC:$IOMP $VENV/bin/vllm serve $MODEL_DIR --served-model-name smollm2-135m --host 127.0.0.1 --port {port} --dtype bfloat16 --max-model-len 2048 --max-num-seqs 4 --enforce-eager"
"$SPEEDBENCH" tune --model smollm2-135m --input-file fixtures/llama_e2e.jsonl --streaming --osl 32 \
    --extra-inputs temperature:0 --timeout 300 \
    --server-cmd "$VLLM --per-request-spec-decode-metrics summary --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":{k},\"prompt_lookup_max\":4,\"prompt_lookup_min\":2}'" \
    --param k=2,4 --baseline-cmd "$VLLM" --concurrency 1,2 --ready-timeout 300 --stop-grace 30 \
    --output-artifact-dir "$OUT/tune"

echo "== checks"
SPEEDBENCH_VLLM_E2E="$OUT" cargo test -q -p speedbench-cli --test it vllm_e2e:: -- --nocapture
