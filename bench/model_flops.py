#!/usr/bin/env python3
"""Multiply-add work of each benchmark model at the dims run_models.py runs it with, and the
least time that work can take on this machine.

FLOPs are 2 x multiply-adds of MatMul, Gemm and Conv nodes (the element-wise rest is small
and memory-bound); shapes come from ONNX shape inference with the symbolic dims fixed. Where
inference gives up (a mask built by Where from a Slice of a constant, say), the script fills
in that node's output shape by broadcasting its inputs and infers again.

    bench/model_flops.py [--peak GFLOPS] [--ort-ms model=MS ...] [models...]

With --peak (bench/peak_flops' one-thread rate) it also prints the least time at that rate,
and with --ort-ms each model's ONNX Runtime median, what rate that is and what rate 0.8x of
it would need.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_models import DIMS, DIMS_PER_MODEL  # noqa: E402

MODELS = ["resnet18", "mobilenet_v2", "bert", "gpt", "llama"]
SAME_SHAPE = {"Softmax", "Erf", "Tanh", "Relu", "Sigmoid", "Cast", "Identity", "Sqrt",
              "LayerNormalization", "Neg", "Exp", "Log"}
BROADCAST = {"Add", "Sub", "Mul", "Div", "Where", "Pow", "Equal", "Less", "Greater"}


def broadcast(shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        dims = [s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0]
        out.append(max(dims))
    return out


def shapes_of(model):
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        dims = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[v.name] = [d.dim_value for d in dims]
    return shapes


def evaluate(node, values):
    """The value of a small index computation (shapes, masks) from its inputs' values, or
    None: enough of the model to learn a mask's shape where inference does not."""
    args = [values.get(name) for name in node.input]
    if any(a is None for a in args):
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    if op == "Constant":
        return numpy_helper.to_array(attrs["value"])
    if op == "Unsqueeze":
        return np.expand_dims(args[0], tuple(int(a) for a in args[1]))
    if op == "Gather":
        return np.take(args[0], args[1], axis=attrs.get("axis", 0))
    if op == "Concat":
        return np.concatenate(args, axis=attrs["axis"])
    if op == "Slice":
        return sliced(args[0], args[1:])
    if op == "Cast":
        return args[0]
    if op == "Div":
        integral = np.issubdtype(args[0].dtype, np.integer)
        return (np.floor_divide if integral else np.divide)(*args)
    if op in ("Add", "Sub", "Mul", "Equal", "Where"):
        ops = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal,
               "Where": np.where}
        return ops[op](*args)
    if op == "Range":
        return np.arange(args[0], args[1], args[2])
    return None


def sliced(data, args):
    """data[...] as ONNX Slice with inputs starts, ends, axes, steps."""
    starts, ends = args[:2]
    axes = args[2] if len(args) > 2 else range(len(starts))
    steps = args[3] if len(args) > 3 else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


def filled_in(node, shapes, values):
    """The output shape of `node` from its inputs' shapes (and index values), or None."""
    inputs = [shapes.get(name) for name in node.input if name]
    if not inputs or any(s is None for s in inputs):
        return None
    if node.op_type == "Slice" and all(name in values for name in node.input[1:]):
        # A view of no memory with the input's shape, sliced.
        view = np.lib.stride_tricks.as_strided(np.empty(1), inputs[0], [0] * len(inputs[0]))
        return list(sliced(view, [values[name] for name in node.input[1:]]).shape)
    if node.op_type == "Concat":
        axis = helper.get_attribute_value(node.attribute[0])
        out = list(inputs[0])
        out[axis] = sum(s[axis] for s in inputs)
        return out
    if node.op_type in SAME_SHAPE:
        return inputs[0]
    if node.op_type in BROADCAST:
        return broadcast(inputs)
    return None


def infer(model):
    """Shape inference, repeated after filling in what it could not infer."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
              if np.prod(t.dims) <= 1 << 22}
    while True:
        model = shape_inference.infer_shapes(model, data_prop=True)
        shapes = shapes_of(model)
        # Inference knows the element types where it lost the shapes.
        elem_types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
        added = False
        for node in model.graph.node:
            if node.op_type == "Shape" and shapes.get(node.input[0]) is not None:
                values[node.output[0]] = np.array(shapes[node.input[0]], dtype=np.int64)
            elif len(node.output) == 1 and node.output[0] not in values:
                value = evaluate(node, values)
                if value is not None:
                    values[node.output[0]] = np.asarray(value)
            out = node.output[0]
            if out in shapes:
                continue
            shape = list(values[out].shape) if out in values else filled_in(node, shapes, values)
            if shape is not None:
                model.graph.value_info.append(
                    helper.make_tensor_value_info(out, elem_types.get(out, 0), shape))
                shapes[out] = shape
                added = True
        if not added:
            return model, shapes


def flops(path, dims):
    model = onnx.load(path)
    for value in model.graph.input:
        for d in value.type.tensor_type.shape.dim:
            if d.dim_param in dims:
                d.dim_value = dims[d.dim_param]
    model, shapes = infer(model)
    total, unknown = 0, []
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        a, out = shapes.get(node.input[0]), shapes.get(node.output[0])
        if a is None or out is None:
            unknown.append(node.name)
            continue
        if node.op_type == "Conv":
            depth = int(np.prod(shapes[node.input[1]][1:]))
        elif node.op_type == "Gemm":
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            depth = a[0] if trans_a else a[1]
        else:
            depth = a[-1]
        total += 2 * int(np.prod(out)) * depth
    return total, unknown


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--work", default="/tmp/kiln-bench")
    parser.add_argument("--peak", type=float, help="GFLOP/s of one thread (bench/peak_flops)")
    parser.add_argument("--ort-ms", nargs="*", default=[], metavar="MODEL=MS")
    args = parser.parse_args()
    ort = {k: float(v) for k, v in (item.split("=") for item in args.ort_ms)}
    print("| model | GFLOP | least ms at peak | ORT ms | ORT GFLOP/s | 0.8x ORT needs GFLOP/s |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        dims = dict(DIMS, **DIMS_PER_MODEL.get(name, {}))
        total, unknown = flops(os.path.join(args.work, "models", f"{name}.onnx"), dims)
        if unknown:
            sys.exit(f"{name}: no shape for {', '.join(unknown)}")
        gflop = total / 1e9
        least = f"{gflop / args.peak * 1e3:.2f}" if args.peak else ""
        ms = ort.get(name)
        rates = (f"{ms:.2f} | {gflop / ms * 1e3:.1f} | {gflop / (0.8 * ms) * 1e3:.1f}"
                 if ms else " | | ")
        print(f"| {name} | {gflop:.3f} | {least} | {rates} |")


if __name__ == "__main__":
    main()
