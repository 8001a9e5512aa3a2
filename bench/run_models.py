#!/usr/bin/python3
"""Kiln artifacts against ONNX Runtime (CPU) on the model suite: latency and peak memory.

    bench/run_models.py [--models NAME ...] [--threads 1 2] [--runs 20] [--per-round 5]
                        [--work DIR] [--kiln build/client/kiln] [--target x86_64]
                        [--tune TRIALS_PER_KERNEL [--tuning-cache DIR] [--tune-threads N]]
                        [--libraries openblas,dnnl]

For each model: generate it (tests/models/generate_models.py --size bench), compile it with
`kiln compile`, write one set of random inputs as .npy, run both once and compare outputs,
then for each thread count alternate `kiln bench` and bench/ort_runner.mjs in rounds (the side
that goes first swaps every round) until each has --runs timed runs after warm-up. Prints a
table: medians, the ratio Kiln/ORT and each side's peak RSS. Needs bench/install_ort.sh first.
With --tune, each model is first tuned (`kiln tune`, its symbolic dims at the values it runs
with) into the tuning database of --tuning-cache and compiled from its records; a second table
gives the tuning time and trials. With --tune-threads N, the target is the preset's description
with threads=N: kernels are tuned on N threads (records of their own) and artifacts start
with N threads. With --libraries, the target's description names those libraries, so the
tuner measures their calls against the generated kernels.
Timings on a shared machine are noisy: compare within one run, never across runs.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
NAMES = ["resnet18", "mobilenet_v2", "bert", "gpt", "llama"]

# Values of the models' symbolic dims. llama runs one decode step over a 128-token KV cache.
DIMS = {"batch": 1, "height": 224, "width": 224, "seq": 128, "past": 0}
DIMS_PER_MODEL = {"llama": {"seq": 1, "past": 128}}


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, **kwargs):
    """Runs a command; on failure prints its output and raises."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return result.stdout


def json_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            return json.loads(line[len(prefix) + 1:])
    raise RuntimeError(f"no '{prefix}' line in:\n{text[-2000:]}")


NP_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.BOOL: np.bool_, onnx.TensorProto.UINT8: np.uint8,
}


def random_input(name, dtype, shape, rng):
    """Floats in [-1, 1); masks and token types 0 or 1 (masks all ones); other ints in [0, 32)."""
    if dtype in (np.float32, np.float64):
        return rng.uniform(-1, 1, shape).astype(dtype)
    if "mask" in name:
        return np.ones(shape, dtype)
    if "token_type" in name or dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 32, shape).astype(dtype)


def write_inputs(model_path, dims, out_dir):
    """One .npy per graph input; returns [(name, path, shape)]."""
    model = onnx.load(model_path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    os.makedirs(out_dir, exist_ok=True)
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
                 for d in tensor_type.shape.dim]
        data = random_input(value.name, NP_DTYPES[tensor_type.elem_type], shape, rng)
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", value.name) + ".npy")
        np.save(path, data)
        inputs.append((value.name, path, shape))
    return inputs


def compare_outputs(kiln_dir, ort_dir):
    """(max abs diff, max relative diff, whether every output is close); relative to
    max(|ort|, 1e-3), close as numpy.allclose(rtol=1e-3, atol=1e-4)."""
    worst_abs, worst_rel, close = 0.0, 0.0, True
    for file in sorted(os.listdir(ort_dir)):
        ort = np.load(os.path.join(ort_dir, file)).astype(np.float64)
        kiln = np.load(os.path.join(kiln_dir, file)).astype(np.float64)
        if ort.shape != kiln.shape:
            raise RuntimeError(f"{file}: Kiln shape {kiln.shape}, ORT shape {ort.shape}")
        diff = np.abs(kiln - ort)
        worst_abs = max(worst_abs, float(diff.max(initial=0)))
        worst_rel = max(worst_rel, float((diff / np.maximum(np.abs(ort), 1e-3)).max(initial=0)))
        close = close and bool(np.allclose(kiln, ort, rtol=1e-3, atol=1e-4))
    return worst_abs, worst_rel, close


class Model:
    def __init__(self, name, args):
        self.name = name
        self.args = args
        self.dir = os.path.join(args.work, name)
        self.onnx = os.path.join(args.work, "models", name + ".onnx")
        self.target = args.compile_target
        self.artifact = None  # the folder `kiln compile` names
        self.dims = dict(DIMS, **DIMS_PER_MODEL.get(name, {}))

    def prepare(self):
        generator = os.path.join(ROOT, "tests/models/generate_models.py")
        # A model written by an older generator is stale: write it again.
        if not os.path.exists(self.onnx) or os.path.getmtime(self.onnx) < os.path.getmtime(generator):
            log(f"[{self.name}] generating")
            run([sys.executable, generator, "--out",
                 os.path.dirname(self.onnx), "--size", "bench", "--only", self.name])
        self.tuning = None
        cache_flags = []
        if self.args.tune:
            cache_flags = ["--cache", self.args.tuning_cache]
            self.tuning = self.tune(cache_flags)
        log(f"[{self.name}] compiling for {self.args.target}")
        start = time.time()
        out = run([self.args.kiln, "compile", self.onnx, "--target", self.target, "--out",
                   os.path.join(self.dir, "artifact"), *cache_flags])
        # "<folder>: <artifact path>"; a description's folder is named after its hash.
        self.artifact = os.path.dirname(out.strip().splitlines()[-1].split(": ", 1)[1])
        self.compile_s = time.time() - start
        self.inputs = write_inputs(self.onnx, self.dims, os.path.join(self.dir, "inputs"))

    def tune(self, cache_flags):
        """`kiln tune` of the model; (seconds, its summary line). Its whole output (the table
        and every failed trial) is kept in the model's folder as tune.txt."""
        log(f"[{self.name}] tuning for {self.args.target}, {self.args.tune} trials per kernel")
        dims = [f for name, value in self.dims.items() for f in ("--dim", f"{name}={value}")]
        start = time.time()
        out = run([self.args.kiln, "tune", self.onnx, "--target", self.target,
                   "--trials-per-kernel", str(self.args.tune), *dims, *cache_flags])
        os.makedirs(self.dir, exist_ok=True)
        report = os.path.join(self.dir, "tune.txt")
        with open(report, "w") as f:
            f.write(out)
        summary = out.strip().splitlines()[-1]
        log(f"[{self.name}] {summary} (all of it: {report})")
        return time.time() - start, summary

    def input_flags(self):
        return [f for name, path, _ in self.inputs for f in ("--input", f"{name}={path}")]

    def shape_text(self):
        return " ".join(f"{name}{shape}" for name, _, shape in self.inputs).replace(" ", "")

    def check_agreement(self):
        kiln_out, ort_out = os.path.join(self.dir, "kiln_out"), os.path.join(self.dir, "ort_out")
        for d in (kiln_out, ort_out):
            shutil.rmtree(d, ignore_errors=True)
        run([self.args.kiln, "run", self.artifact, *self.input_flags(), "--out", kiln_out])
        run(["node", os.path.join(BENCH_DIR, "ort_runner.mjs"), self.onnx, *self.input_flags(),
             "--warmup", "0", "--repeat", "0", "--out", ort_out])
        return compare_outputs(kiln_out, ort_out)

    def kiln_round(self, threads, repeat):
        out = run([self.args.kiln, "bench", self.artifact, *self.input_flags(), "--threads",
                   str(threads), "--warmup", str(self.args.warmup), "--repeat", str(repeat)])
        return json_line(out, "kiln-bench")

    def ort_round(self, threads, repeat):
        out = run(["node", os.path.join(BENCH_DIR, "ort_runner.mjs"), self.onnx,
                   *self.input_flags(), "--threads", str(threads), "--warmup",
                   str(self.args.warmup), "--repeat", str(repeat)])
        return json_line(out, "ort-bench")

    def measure(self, threads):
        """Alternating rounds until each side has args.runs samples."""
        samples = {"kiln": [], "ort": []}
        peak = {"kiln": 0, "ort": 0}
        sides = [("kiln", self.kiln_round), ("ort", self.ort_round)]
        round_index = 0
        while len(samples["kiln"]) < self.args.runs:
            repeat = min(self.args.per_round, self.args.runs - len(samples["kiln"]))
            for side, round_fn in sides if round_index % 2 == 0 else sides[::-1]:
                result = round_fn(threads, repeat)
                samples[side] += result["latencies_ms"]
                peak[side] = max(peak[side], result["peak_rss_bytes"])
            round_index += 1
        return {side: (statistics.median(samples[side]), peak[side]) for side in samples}


def mib(n):
    return f"{n / 2**20:.0f}"


def print_table(rows):
    header = ("| model | inputs | threads | Kiln median ms | ORT median ms | Kiln/ORT "
              "| Kiln peak RSS MiB | ORT peak RSS MiB | max abs diff | max rel diff |")
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=NAMES, default=NAMES)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per side (min 20)")
    parser.add_argument("--per-round", type=int, default=5, help="timed runs per round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per round")
    parser.add_argument("--work", default="/tmp/kiln-bench")
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build/client/kiln"))
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS_PER_KERNEL",
                        help="tune each model first (0: default schedules)")
    parser.add_argument("--tuning-cache", default="/tmp/kiln-bench/tuning",
                        help="folder of the tuning database (kiln.db)")
    parser.add_argument("--tune-threads", type=int, default=0,
                        help="tune (and start artifacts) on N threads: the preset with threads=N")
    parser.add_argument("--libraries", default="",
                        help="libraries the target has (openblas,dnnl): the preset with "
                             "libraries=..., so the tuner may pick a library's call")
    args = parser.parse_args()
    args.compile_target = args.target
    if args.tune_threads or args.libraries:
        presets = dict(line.split("\t", 1) for line in run([args.kiln, "targets"]).splitlines())
        args.compile_target = presets[args.target]
        if args.tune_threads:
            args.compile_target += f";threads={args.tune_threads}"
        if args.libraries:
            args.compile_target += f";libraries={args.libraries}"

    if not os.path.exists(os.path.join(BENCH_DIR, "node_modules/onnxruntime-node")):
        sys.exit("run bench/install_ort.sh first")
    rows, notes, tuning_rows = [], [], []
    for name in args.models:
        model = Model(name, args)
        try:
            model.prepare()
            abs_diff, rel_diff, agree = model.check_agreement()
        except RuntimeError as error:
            log(f"[{name}] FAILED: {error}")
            reason = next((l for l in str(error).splitlines() if l.startswith("error: ")),
                          str(error).splitlines()[0])
            notes.append(f"{name}: {reason}")
            rows.append((name, "-", "-", "failed", "-", "-", "-", "-", "-", "-"))
            continue
        if model.tuning:
            tuning_rows.append((name, f"{model.tuning[0]:.0f}", model.tuning[1]))
        log(f"[{name}] compiled in {model.compile_s:.1f} s; outputs differ by at most "
            f"{abs_diff:.2e} abs, {rel_diff:.2e} rel{'' if agree else ': MISMATCH, not timed'}")
        if not agree:
            rows.append((name, model.shape_text(), "-", "mismatch", "-", "-", "-", "-",
                         f"{abs_diff:.1e}", f"{rel_diff:.1e}"))
            continue
        for threads in args.threads:
            log(f"[{name}] timing with {threads} thread(s)")
            result = model.measure(threads)
            (kiln_ms, kiln_rss), (ort_ms, ort_rss) = result["kiln"], result["ort"]
            rows.append((name, model.shape_text(), threads, f"{kiln_ms:.2f}", f"{ort_ms:.2f}",
                         f"{kiln_ms / ort_ms:.2f}", mib(kiln_rss), mib(ort_rss),
                         f"{abs_diff:.1e}", f"{rel_diff:.1e}"))
    cpu = next((l.split(":", 1)[1].strip() for l in run(["lscpu"]).splitlines()
                if l.startswith("Model name")), platform.processor())
    print(f"{cpu}, {time.strftime('%Y-%m-%d')}, target {args.compile_target}, "
          f"{args.runs} timed runs per side after {args.warmup} warm-up runs per round")
    print_table(rows)
    if tuning_rows:
        print(f"\nTuning ({args.tune} trials per kernel, database {args.tuning_cache}):\n")
        print("| model | tuning s | kiln tune summary |\n|---|---|---|")
        for row in tuning_rows:
            print("| " + " | ".join(row) + " |")
    if notes:
        print("\n" + "\n".join(f"- {note}" for note in notes))


if __name__ == "__main__":
    main()
