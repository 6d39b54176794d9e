"""speedbench's driver for the upstream SPEED-Bench prepare step.

speedbench writes this file to a temporary directory and runs it with the
Python interpreter chosen by --python / SPEEDBENCH_PYTHON. It contains none
of the prepare step's logic: it imports the prepare script (NeMo-Skills'
nemo_skills/dataset/speed-bench/prepare.py, verified against its pinned
sha256 by speedbench, or a local script the user named) as a module, hands
it the SPEED-Bench config speedbench already downloaded, and writes the
resolved rows as JSON lines.

    python driver.py --probe
    python driver.py --script PREPARE.py --config CONFIG --output OUT.jsonl FILE.parquet...

Exit status 3 means a Python package is missing; the module is named on a
line starting with MISSING.
"""

import argparse
import importlib
import importlib.util
import json
import sys
import types

MISSING = "speedbench-driver: missing module: "
EXIT_MISSING = 3


def require(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(getattr(e, "name", None) or name, e)


def missing(name, error):
    print(f"{MISSING}{name} ({error})", file=sys.stderr, flush=True)
    sys.exit(EXIT_MISSING)


def load_script(path):
    # The script logs through nemo_skills.utils.get_logger_name, which only
    # names a logger; outside a NeMo-Skills install a stand-in provides it.
    if importlib.util.find_spec("nemo_skills") is None:
        package = types.ModuleType("nemo_skills")
        package.__path__ = []
        utils = types.ModuleType("nemo_skills.utils")
        utils.get_logger_name = lambda file: "speed_bench_prepare"
        package.utils = utils
        sys.modules["nemo_skills"] = package
        sys.modules["nemo_skills.utils"] = utils
    spec = importlib.util.spec_from_file_location("speed_bench_prepare", path)
    if spec is None or spec.loader is None:
        sys.exit(f"speedbench-driver: cannot import {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as e:
        missing(e.name or "?", e)
    for name in ("_resolve_external_data", "HLE_RNG"):
        if not hasattr(module, name):
            sys.exit(f"speedbench-driver: {path} has no `{name}`: not a SPEED-Bench prepare script")
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true", help="check the packages and exit")
    parser.add_argument("--script")
    parser.add_argument("--config")
    parser.add_argument("--output")
    parser.add_argument("parquet", nargs="*")
    args = parser.parse_args()

    datasets = require("datasets")
    numpy = require("numpy")
    if args.probe:
        print(
            f"Python {sys.version.split()[0]}, datasets {datasets.__version__}, "
            f"numpy {numpy.__version__}",
            flush=True,
        )
        return
    if not (args.script and args.config and args.output and args.parquet):
        parser.error("--script, --config, --output and at least one Parquet file are required")

    module = load_script(args.script)
    # Results depend on the rows alone: never reuse a cached map() result.
    datasets.disable_caching()
    dataset = datasets.Dataset.from_parquet(args.parquet, split="test", keep_in_memory=True)
    # HLE throughput prompts consume this module-global stream; a config's
    # output must not depend on what ran before it in the same interpreter.
    module.HLE_RNG = numpy.random.default_rng(42)
    dataset = module._resolve_external_data(dataset, args.config)
    dataset = dataset.map(
        lambda example: {
            "messages": [{"role": "user", "content": turn} for turn in example["turns"]]
        },
        remove_columns=["turns"],
    )
    with open(args.output, "w", encoding="utf-8") as out:
        for row in dataset:
            out.write(json.dumps(row, ensure_ascii=False, default=str))
            out.write("\n")
    print(f"speedbench-driver: wrote {len(dataset)} rows", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
