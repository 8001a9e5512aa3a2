// node kiln-runner.mjs ARTIFACT: runs a wasm32 artifact for a test on the build machine, over
// the pipe protocol of runtime/tools/runner_protocol.h (the same one the native kiln-runner
// speaks under qemu-user):
//
//   request  := u32 num_inputs, tensor[num_inputs]
//   response := i32 status, then
//                 status == 0: u32 num_outputs, tensor[num_outputs]
//                 otherwise:   u32 length, message[length]  (the runtime's error, UTF-8)
//   tensor   := u8 dtype_code, u8 bits, u16 zero, u32 ndim, i64 shape[ndim],
//               u64 num_bytes, u8 data[num_bytes]
//
// Integers are little-endian. A load failure goes to stderr with exit status 2, before stdin
// is read; the end of stdin ends the runner with status 0.
import { readFileSync, writeSync } from 'node:fs';
import { dtypeCode, dtypeName, KilnError, loadModel } from './kiln.mjs';

const LOAD_FAILED_EXIT_STATUS = 2;
const STATUS_OK = 0;
const STATUS_FAILED = 1;

const ARRAYS = {
  f16: Uint16Array, f32: Float32Array, f64: Float64Array, i8: Int8Array, i16: Int16Array,
  i32: Int32Array, i64: BigInt64Array, u8: Uint8Array, u16: Uint16Array, u32: Uint32Array,
  u64: BigUint64Array, bool: Uint8Array,
};

// Reads stdin as a sequence of exact-length chunks; null at a clean end of input.
class Reader {
  constructor(stream) {
    this.iterator = stream[Symbol.asyncIterator]();
    this.buffer = Buffer.alloc(0);
    this.ended = false;
  }

  // `n` bytes, or null when stdin ended before the first of them (an error after that).
  async take(n) {
    while (this.buffer.length < n && !this.ended) {
      const { value, done } = await this.iterator.next();
      if (done) {
        this.ended = true;
      } else {
        this.buffer = this.buffer.length === 0 ? value : Buffer.concat([this.buffer, value]);
      }
    }
    if (this.buffer.length < n) {
      if (this.buffer.length === 0) return null;
      throw new Error(
          `truncated request: wanted ${n} bytes, stdin ended after ${this.buffer.length}`);
    }
    const chunk = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return chunk;
  }

  async need(n) {
    const chunk = await this.take(n);
    if (chunk === null) throw new Error('truncated request: stdin ended inside a request');
    return chunk;
  }
}

async function readTensor(reader) {
  const head = await reader.need(8);
  const code = head.readUInt8(0), bits = head.readUInt8(1), ndim = head.readUInt32LE(4);
  const dims = await reader.need(8 * ndim);
  const shape = [];
  for (let d = 0; d < ndim; ++d) shape.push(Number(dims.readBigInt64LE(8 * d)));
  const numBytes = Number((await reader.need(8)).readBigUInt64LE(0));
  const bytes = await reader.need(numBytes);
  // A fresh, aligned copy: a typed array cannot view an odd offset of the stdin buffer.
  const copy = new Uint8Array(numBytes);
  copy.set(bytes);
  const dtype = dtypeName(code, bits) ?? `dtype(code=${code}, bits=${bits}, lanes=1)`;
  const Ctor = ARRAYS[dtype];
  if (Ctor === undefined || numBytes % Ctor.BYTES_PER_ELEMENT !== 0) {
    return { dtype, shape, data: copy };  // the model's checks reject it with a message
  }
  return { dtype, shape, data: new Ctor(copy.buffer) };
}

function tensorBytes(tensor) {
  const { code, bits } = dtypeCode(tensor.dtype);
  const head = Buffer.alloc(8 + 8 * tensor.shape.length + 8);
  head.writeUInt8(code, 0);
  head.writeUInt8(bits, 1);
  head.writeUInt32LE(tensor.shape.length, 4);
  tensor.shape.forEach((d, i) => head.writeBigInt64LE(BigInt(d), 8 + 8 * i));
  const data = tensor.data;
  head.writeBigUInt64LE(BigInt(data.byteLength), 8 + 8 * tensor.shape.length);
  return [head, Buffer.from(data.buffer, data.byteOffset, data.byteLength)];
}

function respond(chunks) {
  for (const chunk of chunks) {
    for (let done = 0; done < chunk.length;) done += writeSync(1, chunk, done);
  }
}

function answer(model, inputs) {
  let outputs;
  try {
    outputs = model.run(inputs);
  } catch (e) {
    if (!(e instanceof KilnError)) throw e;
    const message = Buffer.from(e.message, 'utf8');
    const head = Buffer.alloc(8);
    head.writeInt32LE(STATUS_FAILED, 0);
    head.writeUInt32LE(message.length, 4);
    return [head, message];
  }
  const head = Buffer.alloc(8);
  head.writeInt32LE(STATUS_OK, 0);
  head.writeUInt32LE(outputs.length, 4);
  return [head, ...outputs.flatMap(tensorBytes)];
}

async function main() {
  const [path] = process.argv.slice(2);
  if (path === undefined) {
    process.stderr.write('usage: node kiln-runner.mjs ARTIFACT\n');
    process.exit(LOAD_FAILED_EXIT_STATUS);
  }
  let model;
  try {
    model = await loadModel(readFileSync(path), { name: path });
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(LOAD_FAILED_EXIT_STATUS);
  }
  const reader = new Reader(process.stdin);
  for (;;) {
    const count = await reader.take(4);
    if (count === null) break;
    const inputs = [];
    for (let i = count.readUInt32LE(0); i > 0; --i) inputs.push(await readTensor(reader));
    respond(answer(model, inputs));
  }
}

main().catch((e) => {
  process.stderr.write(`kiln-runner: ${e.stack ?? e}\n`);
  process.exit(1);
});
