// node serve.mjs ROOT...: serves GET /NAME from the first ROOT that has the file NAME (no
// subdirectories), on a free port of 127.0.0.1, and prints the port as the first line of
// stdout. For the browser test; it runs until killed.
import { createServer } from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.mjs': 'text/javascript',
  '.js': 'text/javascript',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};
const roots = process.argv.slice(2);

const server = createServer((request, response) => {
  const name = basename(new URL(request.url, 'http://localhost').pathname) || 'index.html';
  const root = roots.find((r) => existsSync(join(r, name)));
  if (request.method !== 'GET' || root === undefined) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { 'Content-Type': TYPES[extname(name)] ?? 'application/octet-stream' });
  response.end(readFileSync(join(root, name)));
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
