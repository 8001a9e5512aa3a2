// node api_check.mjs MODEL.wasm: checks kiln.mjs's API and allocator on a compiled model
// (wasm_node_test.cc's matmul model: x f32[batch, 96] -> y f32[batch, 40]). The module's
// interface is exactly the artifact ABI plus the "kiln" imports; outputShapes needs no data;
// inputs may be keyed by name; wrong data is named; heap blocks are 64-byte aligned and
// disjoint, freed blocks are reused and merged, and repeated runs do not grow the memory.
// Prints "ok" or throws (exit status 1).
import { readFileSync } from 'node:fs';
import { loadModel } from '../../runtime/js/kiln.mjs';

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
}

const bytes = readFileSync(process.argv[2]);
const module = new WebAssembly.Module(bytes);
const imports = WebAssembly.Module.imports(module).map((i) => `${i.module}.${i.name}`).sort();
check(JSON.stringify(imports) === JSON.stringify(
    ['kiln.alloc', 'kiln.free', 'kiln.index_error', 'kiln.shape_error']),
    `imports are the host services only: ${imports}`);
const exports = WebAssembly.Module.exports(module).map((e) => e.name).sort();
check(JSON.stringify(exports) === JSON.stringify(
    ['__heap_base', 'kiln_abi_version', 'kiln_infer_shapes', 'kiln_run', 'kiln_signature',
     'kiln_wasm_env', 'memory']), `exports: ${exports}`);

const model = await loadModel(bytes);
check(JSON.stringify(model.inputs) === '[{"name":"x","dtype":"f32","dims":["batch","96"]}]',
      `inputs: ${JSON.stringify(model.inputs)}`);
check(JSON.stringify(model.outputShapes([{ dtype: 'f32', shape: [7, 96] }])) === '[[7,40]]',
      'output shapes from shapes alone');
const x = { dtype: 'f32', shape: [2, 96], data: new Float32Array(192).fill(1) };
const [byName] = model.run({ x });
const [byOrder] = model.run([x]);
check(byName.data.length === 80 && byName.data.every((v, i) => v === byOrder.data[i]),
      'inputs keyed by name run as inputs in order');
function failure(fn) {
  try {
    fn();
  } catch (e) {
    return `${e.name}: ${e.message}`;
  }
  return 'no error';
}
check(failure(() => model.run({ z: x })) === "KilnError: the model has no input 'z'",
      'an unknown input name');
check(failure(() => model.run([{ ...x, data: new Float32Array(191) }])) ===
      "KilnError: input 'x': data has 191 elements, shape [2, 96] needs 192", 'a short data array');
check(failure(() => model.run([{ ...x, data: new Float64Array(192) }])) ===
      "KilnError: input 'x': data must be a Float32Array for dtype f32, got Float64Array",
      'data of another type');
const heap = model.heap;
const base = heap.top;
check(base % 64 === 0 && base >= model.exports.__heap_base.value, `heap starts at ${base}`);

// Aligned, disjoint; a freed block is reused; neighbours merge; all freed -> back to base.
const a = heap.alloc(100), b = heap.alloc(0), c = heap.alloc(1000);
check([a, b, c].every((p) => p % 64 === 0), `aligned: ${a} ${b} ${c}`);
check(a + 128 <= b && b + 64 <= c, `disjoint: ${a} ${b} ${c}`);
heap.release(b);
check(heap.alloc(10) === b, 'a freed block is reused');
heap.release(a);
heap.release(b);
check(heap.free.length === 1 && heap.free[0].size === 192, 'freed neighbours merge');
check(heap.alloc(150) === a, 'a merged block serves a bigger request');
heap.release(a);
heap.release(c);
check(heap.top === base && heap.free.length === 0, 'everything freed returns to the top');
heap.release(12345);  // never handed out: ignored
check(heap.top === base, 'an unknown pointer is ignored');

// Memory grows for a big block and is reused afterwards.
const pages = model.exports.memory.buffer.byteLength;
const big = heap.alloc(64 << 20);
check(big !== 0 && model.exports.memory.buffer.byteLength > pages, 'memory grows');
heap.release(big);

// Runs leave nothing allocated and, after the first, never grow the memory.
const run = (batch) => model.run([{ dtype: 'f32', shape: [batch, 96],
                                    data: new Float32Array(batch * 96).fill(0.5) }]);
run(40);
const size = model.exports.memory.buffer.byteLength;
for (let i = 0; i < 50; ++i) run(1 + (i * 7) % 40);
check(model.exports.memory.buffer.byteLength === size, 'repeated runs do not grow memory');
check(heap.live.size === 0 && heap.top === base, 'a run frees what it allocated');
console.log('ok');
