// Runs an ONNX model with ONNX Runtime (CPU) the way `kiln bench` runs an artifact: the same
// .npy inputs, a thread count, warm-up runs, then timed runs. Prints one line
// `ort-bench {json}` with every run's latency and the process's peak RSS; with --out, writes
// each output as DIR/<name>.npy (names sanitized like `kiln run` does) for comparison.
//
//   node bench/ort_runner.mjs MODEL.onnx --input NAME=FILE.npy ... [--threads N]
//        [--warmup N] [--repeat N] [--out DIR] [--profile PREFIX]
//
// --profile writes ORT's own profile (every node's kernel time in every run, Chrome trace
// JSON) to PREFIX_<date and time>.json: where the time of a model goes, node by node, to set
// beside `perf record` of the Kiln artifact.
import fs from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import ort from 'onnxruntime-node';

const DTYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i1': ['int8', Int8Array], '|i1': ['int8', Int8Array], '<i2': ['int16', Int16Array],
  '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array],
  '<u1': ['uint8', Uint8Array], '|u1': ['uint8', Uint8Array], '<u2': ['uint16', Uint16Array],
  '<u4': ['uint32', Uint32Array], '<u8': ['uint64', BigUint64Array],
  '|b1': ['bool', Uint8Array],
};

function fail(message) {
  console.error(`ort_runner: ${message}`);
  process.exit(2);
}

function readNpy(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = bytes[6];
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = bytes.toString('latin1', headerStart, headerStart + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? '';
  const dims = shapeText.split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (!(descr in DTYPES) || fortran) fail(`${file}: unsupported dtype ${descr} or Fortran order`);
  const [type, Array] = DTYPES[descr];
  const dataStart = headerStart + headerLength;
  const data = bytes.buffer.slice(bytes.byteOffset + dataStart, bytes.byteOffset + bytes.length);
  const values = new Array(data);
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(values) : values, dims);
}

function writeNpy(file, tensor) {
  const descr = Object.entries(DTYPES).find(([, [type]]) => type === tensor.type)?.[0];
  if (descr === undefined) fail(`output type ${tensor.type} cannot be written as .npy`);
  const shape = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]));
}

function parseArgs(argv) {
  const args = { model: '', inputs: [], threads: 1, warmup: 2, repeat: 20, out: '', profile: '' };
  for (let i = 0; i < argv.length; ++i) {
    const word = argv[i];
    if (!word.startsWith('--')) {
      if (args.model) fail(`unexpected argument '${word}'`);
      args.model = word;
      continue;
    }
    const value = argv[++i];
    if (value === undefined) fail(`${word} needs a value`);
    if (word === '--input') {
      const eq = value.indexOf('=');
      if (eq <= 0) fail(`--input expects NAME=FILE, got '${value}'`);
      args.inputs.push([value.slice(0, eq), value.slice(eq + 1)]);
    } else if (['--threads', '--warmup', '--repeat'].includes(word)) {
      args[word.slice(2)] = Number.parseInt(value, 10);
    } else if (word === '--out') {
      args.out = value;
    } else if (word === '--profile') {
      args.profile = value;
    } else {
      fail(`unknown flag '${word}'`);
    }
  }
  if (!args.model) fail('expected a model file');
  return args;
}

const args = parseArgs(process.argv.slice(2));
const session = await ort.InferenceSession.create(args.model, {
  executionProviders: ['cpu'],
  intraOpNumThreads: args.threads,
  interOpNumThreads: args.threads,
  executionMode: 'sequential',
  ...(args.profile && { enableProfiling: true, profileFilePrefix: args.profile }),
});
const feeds = Object.fromEntries(args.inputs.map(([name, file]) => [name, readNpy(file)]));
const rssBeforeRuns = process.memoryUsage().rss;
let results;
for (let i = 0; i < args.warmup; ++i) results = await session.run(feeds);
const latencies = [];
for (let i = 0; i < args.repeat; ++i) {
  const start = performance.now();
  results = await session.run(feeds);
  latencies.push(performance.now() - start);
}
if (args.out) {
  fs.mkdirSync(args.out, { recursive: true });
  results ??= await session.run(feeds);
  for (const [name, tensor] of Object.entries(results)) {
    writeNpy(path.join(args.out, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'), tensor);
  }
}
if (args.profile) session.endProfiling();
console.log('ort-bench ' + JSON.stringify({
  model: args.model,
  threads: args.threads,
  warmup: args.warmup,
  repeat: args.repeat,
  latencies_ms: latencies,
  peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
  rss_before_runs_bytes: rssBeforeRuns,
}));
