#!/usr/bin/python3
"""Two Kiln artifacts of one model, side by side: a before/after measure of a compiler change.

    bench/ab_artifacts.py BEFORE_DIR AFTER_DIR [--shape NAME=D0,D1,... ...]
                          [--input NAME=FILE ...] [--threads 1 2] [--rounds 10] [--repeat 20]
                          [--kiln build/client/kiln]

Each round runs `kiln bench` on both artifacts (--repeat timed runs each, after warm-up), the
side that goes first swapping every round, so that a machine whose speed drifts slows both
alike. Prints, per thread count, the median over rounds of each side's round median and the
ratio after / before (below 1: the change is faster). Compile the two artifacts with the two
builds of `kiln` (the same tuning records, or none); run them with one `kiln`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_median(args, artifact, threads):
    """One `kiln bench` of `artifact`: the median of its timed runs, in ms."""
    flags = [f"--shape={s}" for s in args.shape] + [f"--input={i}" for i in args.input]
    command = [args.kiln, "bench", artifact, *flags, "--threads", str(threads), "--repeat",
               str(args.repeat)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    for line in result.stdout.splitlines():
        if line.startswith("kiln-bench "):
            return json.loads(line[len("kiln-bench "):])["median_ms"]
    sys.exit(f"{' '.join(command)} printed no kiln-bench line:\n{result.stdout[-2000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--shape", action="append", default=[], help="NAME=D0,D1,...")
    parser.add_argument("--input", action="append", default=[], help="NAME=FILE")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "client", "kiln"))
    args = parser.parse_args()
    print("| threads | rounds | before ms | after ms | after / before |")
    print("|---|---|---|---|---|")
    for threads in args.threads:
        medians = {"before": [], "after": []}
        for round_index in range(args.rounds):
            sides = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
            for side in sides:
                medians[side].append(bench_median(args, getattr(args, side), threads))
            print(f"threads {threads} round {round_index + 1}: before "
                  f"{medians['before'][-1]:.3f} ms, after {medians['after'][-1]:.3f} ms",
                  file=sys.stderr, flush=True)
        before, after = (statistics.median(medians[s]) for s in ("before", "after"))
        print(f"| {threads} | {args.rounds} | {before:.3f} | {after:.3f} | {after / before:.2f} |")


if __name__ == "__main__":
    main()
