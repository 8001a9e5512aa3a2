// Kiln's runtime for wasm32 artifacts (`kiln compile m.onnx -t wasm32` -> model.wasm), for
// browsers and Node.js 20, without dependencies. It does what the C runtime does for a shared
// object (runtime/src): reads the signature, checks tensors against it with the same messages,
// computes output shapes, runs, and turns the artifact's error reports into messages that name
// the tensor.
//
//   import { loadModel } from './kiln.mjs';
//   const model = await loadModel(bytes);  // bytes of model.wasm
//   model.inputs;              // [{name: 'x', dtype: 'f32', dims: ['batch', 784]}]
//   const [y] = model.run([{dtype: 'f32', shape: [2, 784], data: new Float32Array(2 * 784)}]);
//   y.shape, y.data;           // [2, 10], Float32Array
//
// A tensor is {dtype, shape: number[], data: TypedArray}; i64 and u64 data are BigInt64Array
// and BigUint64Array, f16 is raw bits in a Uint16Array, bool is a Uint8Array. run and
// outputShapes take an array in signature order or an object keyed by input name. Failures
// throw a KilnError.
//
// The artifact (compiler/codegen/wasm_module.h) imports from module "kiln" the KilnEnv
// services without `self`: alloc(i64) -> ptr, free(ptr), shape_error(kind, index, dim,
// expected, actual) and index_error(input, dim, index, size, op); kiln_wasm_env() gives the
// address of its KilnEnv. Memory above __heap_base belongs to this file's allocator.

const ABI_VERSION = 3;

// DLPack dtype codes; bool is 6 (KILN_DL_BOOL).
const DTYPES = {
  f16: { code: 2, bits: 16, array: Uint16Array },
  f32: { code: 2, bits: 32, array: Float32Array },
  f64: { code: 2, bits: 64, array: Float64Array },
  i8: { code: 0, bits: 8, array: Int8Array },
  i16: { code: 0, bits: 16, array: Int16Array },
  i32: { code: 0, bits: 32, array: Int32Array },
  i64: { code: 0, bits: 64, array: BigInt64Array },
  u8: { code: 1, bits: 8, array: Uint8Array },
  u16: { code: 1, bits: 16, array: Uint16Array },
  u32: { code: 1, bits: 32, array: Uint32Array },
  u64: { code: 1, bits: 64, array: BigUint64Array },
  bool: { code: 6, bits: 8, array: Uint8Array },
};

// The signature dtype name for a DLPack (code, bits), or undefined.
export function dtypeName(code, bits) {
  return Object.keys(DTYPES).find((n) => DTYPES[n].code === code && DTYPES[n].bits === bits);
}

// The DLPack (code, bits) of a signature dtype name, or undefined.
export function dtypeCode(name) {
  const d = DTYPES[name];
  return d && { code: d.code, bits: d.bits };
}

// kiln/artifact_abi.h
const SHAPE_ERROR_OUTPUT = 1;
const SHAPE_ERROR_BOUND = 2;
const SHAPE_ERROR_VALUE = 3;
const SHAPE_ERROR_NO_DATA = 4;
const INDEX_SEQUENCE_LENGTH = -2;

// DLTensor (dlpack 0.6) on wasm32: data 0, device 4, ndim 12, dtype 16, shape 20, strides 24,
// byte_offset 32; 40 bytes.
const TENSOR_BYTES = 40;
const ALIGNMENT = 64;
const PAGE_BYTES = 65536;
const MAX_MEMORY_BYTES = 4 * 1024 * 1024 * 1024;

export class KilnError extends Error {
  constructor(message) {
    super(message);
    this.name = 'KilnError';
  }
}

// --- Signature (runtime/src/signature.cc) ---

function staticValue(dim) {
  return /^[0-9]+$/.test(dim) ? Number(dim) : -1;
}

function parseTensorLine(words, line) {
  if (words.length < 4) throw new KilnError(`line ${line}: expected '<name> <dtype> <ndim>'`);
  const [, name, dtype, ndimText, ...dims] = words;
  if (!(dtype in DTYPES)) throw new KilnError(`line ${line}: unknown dtype '${dtype}'`);
  const ndim = staticValue(ndimText);
  if (ndim < 0) throw new KilnError(`line ${line}: bad rank '${ndimText}'`);
  if (dims.length !== ndim) {
    throw new KilnError(
      `line ${line}: tensor '${name}' has rank ${ndimText} but ${dims.length} dims`);
  }
  return { name, dtype, dims };
}

// {inputs, outputs} of the signature text, or a KilnError naming the bad line.
export function parseSignature(text) {
  const lines = text.split('\n');
  if (lines[0] !== 'kiln-signature 1') {
    throw new KilnError(`line 1: expected 'kiln-signature 1', got '${lines[0]}'`);
  }
  const signature = { inputs: [], outputs: [] };
  for (let i = 1; i < lines.length; ++i) {
    const words = lines[i].split(/[ \t\r]+/).filter((w) => w !== '');
    if (words.length === 0) continue;
    if (words[0] !== 'input' && words[0] !== 'output') {
      throw new KilnError(`line ${i + 1}: expected 'input' or 'output', got '${words[0]}'`);
    }
    const spec = parseTensorLine(words, i + 1);
    (words[0] === 'input' ? signature.inputs : signature.outputs).push(spec);
  }
  return signature;
}

// --- Tensor checks (runtime/src/tensor_check.cc) ---

function label(isOutput, name) {
  return `${isOutput ? 'output' : 'input'} '${name}'`;
}

function numElements(shape) {
  return shape.reduce((n, d) => n * d, 1);
}

// "" or the problem with shape values (negative, or a static dim that differs).
function checkShape(spec, isOutput, shape) {
  for (let d = 0; d < spec.dims.length; ++d) {
    const where = `${label(isOutput, spec.name)} dimension ${d}`;
    if (shape[d] < 0) return `${where}: negative size ${shape[d]}`;
    const expected = staticValue(spec.dims[d]);
    if (expected >= 0 && shape[d] !== expected) {
      return `${where}: expected ${spec.dims[d]}, got ${shape[d]}`;
    }
  }
  return '';
}

// Rank, dtype, shape and, with needData, data (a typed array of the dtype's kind holding
// exactly the shape's element count). Data may be absent (null) without needData.
function checkTensor(spec, isOutput, tensor, needData) {
  const where = label(isOutput, spec.name);
  if (tensor === null || typeof tensor !== 'object') return `${where}: missing`;
  const shape = tensor.shape;
  if (!Array.isArray(shape)) return `${where}: shape must be an array of dimensions`;
  if (shape.length !== spec.dims.length) {
    return `${where}: expected rank ${spec.dims.length}, got ${shape.length}`;
  }
  if (tensor.dtype !== spec.dtype) {
    return `${where}: expected dtype ${spec.dtype}, got ${tensor.dtype}`;
  }
  if (!shape.every((d) => Number.isSafeInteger(d))) {
    return `${where}: shape must hold integers, got [${shape.join(', ')}]`;
  }
  const error = checkShape(spec, isOutput, shape);
  if (error) return error;
  const data = tensor.data;
  if (data === null || data === undefined) {
    return needData && numElements(shape) > 0 ? `${where}: data is missing` : '';
  }
  const array = DTYPES[spec.dtype].array;
  if (!(data instanceof array)) {
    return `${where}: data must be a ${array.name} for dtype ${spec.dtype}, got ${
      data.constructor ? data.constructor.name : typeof data}`;
  }
  if (data.length !== numElements(shape)) {
    return `${where}: data has ${data.length} elements, shape [${shape.join(', ')}] needs ${
      numElements(shape)}`;
  }
  return '';
}

function checkCount(what, expected, actual) {
  return actual === expected ? '' : `expected ${expected} ${what}, got ${actual}`;
}

// --- Memory: a first-fit allocator over the linear memory above __heap_base ---

class Heap {
  constructor(memory, base) {
    this.memory = memory;
    this.top = Math.ceil(base / ALIGNMENT) * ALIGNMENT;  // everything above is unused
    this.free = [];  // {ptr, size}, sorted by ptr, never adjacent (merged)
    this.live = new Map();  // ptr -> size
  }

  // A 64-byte aligned block of at least `bytes` (a distinct one even for 0), or 0 when memory
  // cannot grow enough.
  alloc(bytes) {
    if (!(bytes >= 0) || bytes > MAX_MEMORY_BYTES) return 0;
    const size = (Math.floor(bytes / ALIGNMENT) + 1) * ALIGNMENT;
    let ptr = this.takeFree(size);
    if (ptr === 0) ptr = this.takeTop(size);
    if (ptr !== 0) this.live.set(ptr, size);
    return ptr;
  }

  // Pointers this heap never handed out (or already freed) are ignored, as in CallEnv::Free.
  release(ptr) {
    const size = this.live.get(ptr);
    if (size === undefined) return;
    this.live.delete(ptr);
    const after = this.free.findIndex((b) => b.ptr > ptr);
    const i = after < 0 ? this.free.length : after;
    this.free.splice(i, 0, { ptr, size });
    // Merge with the next block, then with the previous one.
    if (i + 1 < this.free.length && ptr + size === this.free[i + 1].ptr) {
      this.free[i].size += this.free[i + 1].size;
      this.free.splice(i + 1, 1);
    }
    if (i > 0 && this.free[i - 1].ptr + this.free[i - 1].size === ptr) {
      this.free[i - 1].size += this.free[i].size;
      this.free.splice(i, 1);
    }
    // A free block at the top goes back to the untouched space.
    const last = this.free[this.free.length - 1];
    if (last.ptr + last.size === this.top) {
      this.top = last.ptr;
      this.free.pop();
    }
  }

  // First fit: the front of the lowest free block that is big enough.
  takeFree(size) {
    const i = this.free.findIndex((b) => b.size >= size);
    if (i < 0) return 0;
    const block = this.free[i];
    const ptr = block.ptr;
    block.ptr += size;
    block.size -= size;
    if (block.size === 0) this.free.splice(i, 1);
    return ptr;
  }

  takeTop(size) {
    const end = this.top + size;
    if (end > MAX_MEMORY_BYTES) return 0;
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      try {
        this.memory.grow(Math.ceil((end - have) / PAGE_BYTES));
      } catch (e) {
        return 0;  // the engine's limit: the caller reports a failed allocation
      }
    }
    const ptr = this.top;
    this.top = end;
    return ptr;
  }
}

// --- Error reports (runtime/src/call_env.cc) ---

// "input 'y' dimension 0 (batch)", naming the symbolic dim when there is one.
function dimLabel(signature, isOutput, index, dim) {
  const specs = isOutput ? signature.outputs : signature.inputs;
  if (index < 0 || index >= specs.length) {
    return `${isOutput ? 'output #' : 'input #'}${index} dimension ${dim}`;
  }
  const spec = specs[index];
  let text = `${label(isOutput, spec.name)} dimension ${dim}`;
  if (dim >= 0 && dim < spec.dims.length && staticValue(spec.dims[dim]) < 0) {
    text += ` (${spec.dims[dim]})`;
  }
  return text;
}

function shapeErrorMessage(signature, kind, index, dim, expected, actual) {
  if (kind === SHAPE_ERROR_VALUE && index < 0) {
    return "the inputs do not meet the model's shape constraints: a size computed from " +
        `them is ${actual}, expected ${expected}`;
  }
  if (kind === SHAPE_ERROR_VALUE || kind === SHAPE_ERROR_NO_DATA) {
    let input = dimLabel(signature, false, index, -1);
    input = input.substring(0, input.lastIndexOf(' dimension'));
    if (kind === SHAPE_ERROR_NO_DATA) {
      return `${input}: its values decide shapes, so its data must be given`;
    }
    return `${input} holds values that do not fit: a size computed from them is ${actual}, ` +
        `expected ${expected}`;
  }
  const where = dimLabel(signature, kind === SHAPE_ERROR_OUTPUT, index, dim);
  if (kind === SHAPE_ERROR_BOUND) {
    return `${where}: ${actual} exceeds the bound ${expected} the artifact was compiled with ` +
        '(--dim-bound)';
  }
  return `${where}: expected ${expected}, got ${actual}`;
}

function indexErrorMessage(signature, input, dim, index, size, op) {
  const range = (dim >= 0 ? `dimension ${dim} of size ` : 'size ') + size;
  const where = op + (dim >= 0 ? ` axis ${dim}` : '');
  const named = input >= 0 && input < signature.inputs.length;
  if (dim === INDEX_SEQUENCE_LENGTH) {
    const what =
        index < 0n ? ', a negative length' : `, more than the sequence length ${size - 1n}`;
    return (named ? `${label(false, signature.inputs[input].name)} holds `
                  : `op ${op}: the model computed length `) +
        index + what + (named ? ` (${op})` : '');
  }
  if (!named) return `op ${op}: index ${index} (computed by the model) out of range for ${range}`;
  return `${label(false, signature.inputs[input].name)} holds index ${index}, out of range for ` +
      `${range} (${where})`;
}

// --- Model ---

const decoder = new TextDecoder();

class Model {
  constructor(instance, signature) {
    const exports = instance.exports;
    this.exports = exports;
    this.inputs = signature.inputs;
    this.outputs = signature.outputs;
    this.signature = signature;
    this.heap = new Heap(exports.memory, Number(exports.__heap_base.value));
    this.env = exports.kiln_wasm_env();
    this.call = null;  // the report and workspace of the call in flight
    this.trapped = false;
  }

  // The imports the artifact calls back; they act on the call in flight.
  static imports(model) {
    return {
      kiln: {
        alloc: (bytes) => model().workspaceAlloc(bytes),
        free: (ptr) => model().workspaceFree(ptr),
        shape_error: (kind, index, dim, expected, actual) =>
          model().report(shapeErrorMessage(model().signature, kind, index, dim, expected, actual)),
        index_error: (input, dim, index, size, op) => model().report(
            indexErrorMessage(model().signature, input, dim, index, size, model().readString(op))),
      },
    };
  }

  workspaceAlloc(bytes) {
    const ptr = this.heap.alloc(Number(bytes));
    if (ptr === 0) {
      this.report(`workspace allocation of ${bytes} bytes failed`);
    } else {
      this.call.workspace.add(ptr);
    }
    return ptr;
  }

  workspaceFree(ptr) {
    ptr >>>= 0;
    if (!this.call.workspace.delete(ptr)) return;
    this.heap.release(ptr);
  }

  report(message) {
    // Keep the first report: later ones usually follow from it.
    if (this.call.error === null) this.call.error = message;
  }

  readString(ptr) {
    const bytes = new Uint8Array(this.exports.memory.buffer);
    let end = ptr >>> 0;
    while (bytes[end] !== 0) ++end;
    return decoder.decode(bytes.subarray(ptr >>> 0, end));
  }

  // The output shapes for `inputs` (data may be null except for inputs whose values decide
  // shapes).
  outputShapes(inputs) {
    return this.withCall((call) => {
      const tensors = this.orderInputs(inputs);
      this.check(this.inputs, false, tensors, false);
      return this.inferShapes(call, tensors);
    });
  }

  // Runs the model; returns the outputs as tensors in signature order.
  run(inputs) {
    return this.withCall((call) => {
      const tensors = this.orderInputs(inputs);
      this.check(this.inputs, false, tensors, true);
      const shapes = this.inferShapes(call, tensors);
      const outputs = this.outputs.map((spec, i) => ({ dtype: spec.dtype, shape: shapes[i] }));
      const inPtr = this.writeTensors(call, this.inputs, tensors, true);
      const outPtr = this.writeTensors(call, this.outputs, outputs, false);
      const result = this.enter(() => this.exports.kiln_run(this.env, inPtr, outPtr));
      // An index error lets the host code run on, so it fails the call even after a 0 return.
      if (result !== 0 || call.error !== null) this.fail(call);
      return outputs.map((tensor, i) => this.readData(tensor, this.outputs[i], outPtr, i));
    });
  }

  // Runs fn(call) with a fresh call state; frees what the call allocated, however it ends.
  withCall(fn) {
    if (this.call !== null) throw new KilnError('the model is already running (re-entrant call)');
    const call = { error: null, workspace: new Set(), blocks: [] };
    this.call = call;
    try {
      return fn(call);
    } finally {
      for (const ptr of call.workspace) this.heap.release(ptr);
      for (const ptr of call.blocks) this.heap.release(ptr);
      this.call = null;
    }
  }

  orderInputs(inputs) {
    if (Array.isArray(inputs)) return inputs;
    if (inputs === null || typeof inputs !== 'object') {
      throw new KilnError('inputs must be an array of tensors or an object keyed by input name');
    }
    const known = new Set(this.inputs.map((s) => s.name));
    const unknown = Object.keys(inputs).find((name) => !known.has(name));
    if (unknown !== undefined) throw new KilnError(`the model has no input '${unknown}'`);
    return this.inputs.map((spec) => inputs[spec.name] ?? null);
  }

  check(specs, isOutput, tensors, needData) {
    let error = checkCount(isOutput ? 'outputs' : 'inputs', specs.length, tensors.length);
    for (let i = 0; !error && i < tensors.length; ++i) {
      error = checkTensor(specs[i], isOutput, tensors[i], needData);
    }
    if (error) throw new KilnError(error);
  }

  // kiln_infer_shapes, then the same checks as the C runtime on what it computed.
  inferShapes(call, inputs) {
    const inPtr = this.writeTensors(call, this.inputs, inputs, true);
    const shapeOnly =
        this.outputs.map((spec) => ({ dtype: spec.dtype, shape: spec.dims.map(() => 0) }));
    const outPtr = this.writeTensors(call, this.outputs, shapeOnly, false, /*withData=*/false);
    const result = this.enter(() => this.exports.kiln_infer_shapes(this.env, inPtr, outPtr));
    if (result !== 0) this.fail(call);
    const view = new DataView(this.exports.memory.buffer);
    return this.outputs.map((spec, i) => {
      const shapePtr = view.getUint32(outPtr + i * TENSOR_BYTES + 20, true);
      const shape = spec.dims.map((_, d) => Number(view.getBigInt64(shapePtr + 8 * d, true)));
      const error = checkShape(spec, true, shape);
      if (error) throw new KilnError(`the artifact computed a bad shape: ${error}`);
      return shape;
    });
  }

  // A trap (a bug in the artifact, or its stack exhausted) becomes a KilnError too. A trap
  // leaves the module's stack pointer where it was, so the model must be loaded again.
  enter(fn) {
    if (this.trapped) throw new KilnError('the artifact trapped before; load the model again');
    try {
      return fn();
    } catch (e) {
      if (!(e instanceof WebAssembly.RuntimeError)) throw e;
      this.trapped = true;
      throw new KilnError(`the artifact trapped: ${e.message}; load the model again`);
    }
  }

  fail(call) {
    throw new KilnError(call.error ?? 'workspace allocation failed');
  }

  // A block of the heap for this call only, or a KilnError.
  block(call, bytes) {
    const ptr = this.heap.alloc(bytes);
    if (ptr === 0) throw new KilnError(`cannot allocate ${bytes} bytes of wasm memory`);
    call.blocks.push(ptr);
    return ptr;
  }

  // A DLTensor array for `tensors` in wasm memory: shapes, and data copied in (inputs) or
  // allocated (outputs, withData). Input data that is absent stays NULL.
  writeTensors(call, specs, tensors, isInput, withData = true) {
    const array = this.block(call, TENSOR_BYTES * Math.max(tensors.length, 1));
    tensors.forEach((tensor, i) => {
      const dtype = DTYPES[specs[i].dtype];
      const bytes = numElements(tensor.shape) * dtype.bits / 8;
      const shapePtr = this.block(call, 8 * tensor.shape.length);
      let dataPtr = 0;
      if (withData && (!isInput || tensor.data)) dataPtr = this.block(call, bytes);
      const memory = this.exports.memory.buffer;  // after the allocations: they may grow it
      const view = new DataView(memory);
      tensor.shape.forEach((d, k) => view.setBigInt64(shapePtr + 8 * k, BigInt(d), true));
      if (isInput && dataPtr !== 0) {
        const data = tensor.data;
        const source = new Uint8Array(data.buffer, data.byteOffset, bytes);
        new Uint8Array(memory, dataPtr, bytes).set(source);
      }
      const at = array + i * TENSOR_BYTES;
      new Uint8Array(memory, at, TENSOR_BYTES).fill(0);
      view.setUint32(at, dataPtr, true);
      view.setInt32(at + 4, 1, true);  // kDLCPU
      view.setInt32(at + 12, tensor.shape.length, true);
      view.setUint8(at + 16, dtype.code);
      view.setUint8(at + 17, dtype.bits);
      view.setUint16(at + 18, 1, true);  // lanes
      view.setUint32(at + 20, shapePtr, true);
    });
    return array;
  }

  // Output i's data, copied out of wasm memory.
  readData(tensor, spec, tensors, i) {
    const view = new DataView(this.exports.memory.buffer);
    const dataPtr = view.getUint32(tensors + i * TENSOR_BYTES, true);
    const Ctor = DTYPES[spec.dtype].array;
    const count = numElements(tensor.shape);
    const end = dataPtr + count * Ctor.BYTES_PER_ELEMENT;
    const bytes = this.exports.memory.buffer.slice(dataPtr, end);
    return { dtype: spec.dtype, shape: tensor.shape, data: new Ctor(bytes) };
  }
}

// Instantiates a model.wasm (bytes, or a compiled WebAssembly.Module) and reads its signature.
// `name` appears in load errors.
export async function loadModel(wasm, { name = 'model.wasm' } = {}) {
  let model = null;
  const imports = Model.imports(() => model);
  let instance;
  try {
    const module = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
    instance = await WebAssembly.instantiate(module, imports);
  } catch (e) {
    throw new KilnError(`cannot load artifact '${name}': ${e.message}`);
  }
  const exports = instance.exports;
  for (const symbol of ['kiln_abi_version', 'kiln_signature', 'kiln_infer_shapes', 'kiln_run',
                        'kiln_wasm_env', 'memory', '__heap_base']) {
    if (!(symbol in exports)) throw new KilnError(`artifact '${name}' does not export '${symbol}'`);
  }
  // Checked before the signature is read: another ABI version may mean another format.
  const version = exports.kiln_abi_version();
  if (version !== ABI_VERSION) {
    throw new KilnError(`artifact '${name}' has ABI version ${version}; this runtime supports ` +
                        `version ${ABI_VERSION}`);
  }
  const bytes = new Uint8Array(exports.memory.buffer);
  const start = exports.kiln_signature() >>> 0;
  let end = start;
  while (end < bytes.length && bytes[end] !== 0) ++end;
  let signature;
  try {
    signature = parseSignature(decoder.decode(bytes.subarray(start, end)));
  } catch (e) {
    throw new KilnError(`artifact '${name}': bad signature: ${e.message}`);
  }
  model = new Model(instance, signature);
  return model;
}
