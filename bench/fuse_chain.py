#!/usr/bin/python3
"""Compile time of operator fusion on long elementwise chains.

    bench/fuse_chain.py [--lengths 250 500 1000 2000] [--kiln build/client/kiln]
                        [--reference OTHER_KILN] [--work DIR]

Writes an ONNX model per length (x[n, 16] through a chain of unary ops, every third an Add of
x, so the chain reads x throughout) and times `kiln inspect MODEL --after legalize` and
`--after fuse_ops`; the difference is fusion's time. With --reference, a second kiln build is
timed on the same models, alternately, for a side-by-side ratio. Medians of --runs runs.
"""
import argparse
import os
import statistics
import subprocess
import time

import onnx
from onnx import TensorProto, helper

UNARY = ["Relu", "Neg", "Abs", "Exp", "Sigmoid"]


def chain_model(length, path):
    nodes, previous = [], "x"
    for i in range(length):
        out = "y" if i == length - 1 else f"t{i}"
        if i % 3 == 2:
            nodes.append(helper.make_node("Add", [previous, "x"], [out]))
        else:
            nodes.append(helper.make_node(UNARY[i % len(UNARY)], [previous], [out]))
        previous = out
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def seconds(kiln, model, after):
    start = time.monotonic()
    subprocess.run([kiln, "inspect", model, "--after", after], check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def fusion_seconds(kiln, model):
    return seconds(kiln, model, "fuse_ops") - seconds(kiln, model, "legalize")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--kiln", default=os.path.join(root, "build/client/kiln"))
    parser.add_argument("--reference", help="another kiln build to time side by side")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default="/tmp/kiln-bench/fuse-chain")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    kilns = [args.kiln] + ([args.reference] if args.reference else [])
    print("| ops | fusion s |" + (" reference s | ratio |" if args.reference else ""))
    print("|---|---|" + ("---|---|" if args.reference else ""))
    for length in args.lengths:
        model = os.path.join(args.work, f"chain{length}.onnx")
        chain_model(length, model)
        times = [[] for _ in kilns]
        for _ in range(args.runs):  # the builds alternate
            for i, kiln in enumerate(kilns):
                times[i].append(fusion_seconds(kiln, model))
        medians = [statistics.median(t) for t in times]
        row = f"| {length} | {medians[0]:.2f} |"
        if args.reference:
            row += f" {medians[1]:.2f} | {medians[0] / medians[1]:.2f} |"
        print(row, flush=True)

if __name__ == "__main__":
    main()
