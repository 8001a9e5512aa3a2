// Validates Kubernetes manifests offline against the Kubernetes API schemas.
//
//   node tests/deploy/validate.mjs FILE.yaml...   (multi-document YAML, e.g. kustomize output)
//
// Two checks per document, both from the npm package kubernetes-models (JSON schemas
// generated from the Kubernetes OpenAPI spec, pinned in package.json):
//   1. the package's validate(): types, required fields, enums and formats;
//   2. unknown fields, which validate() lets through (the schemas allow extra properties)
//      but the API server rejects under strict field validation: every key of every
//      object must be a property of its type, read from the package's type declarations.
// An apiVersion/kind the package does not know is an error too.
// Exit status: 0 all valid, 1 some document invalid, 2 usage or environment error.
import { readFileSync, existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const modulesDir = resolve(here, "node_modules");
const modelsDir = resolve(modulesDir, "kubernetes-models");

// --- Types from the .d.ts declarations -------------------------------------------------
// Each declaration file holds `export interface IName { "prop"?: TYPE; ... }`, where TYPE
// is a primitive, a string literal union, Array<T>, a map `{ [key: string]: T; }`, or a
// reference IIoK8s... imported from another declaration file.
const interfaces = new Map(); // file -> { props: Map<name, type> } | null (no interface)

function importPath(fromFile, spec) {
  if (spec.startsWith(".")) return resolve(dirname(fromFile), spec + ".d.ts");
  if (spec.startsWith("@kubernetes-models/")) return resolve(modulesDir, spec + ".d.ts");
  return null;
}

function parseType(text, imports) {
  const t = text.trim();
  const array = /^Array<(.*)>$/.exec(t);
  if (array) return { array: parseType(array[1], imports) };
  if (/^IIoK8s\w+$/.test(t) && imports.has(t)) return { ref: imports.get(t) };
  return { leaf: t };
}

function loadInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  let result = null;
  if (file && existsSync(file)) {
    const lines = readFileSync(file, "utf8").split("\n");
    const imports = new Map();
    for (const line of lines) {
      const m = /^import \{ (IIoK8s\w+) \} from "([^"]+)";$/.exec(line);
      if (m) imports.set(m[1], importPath(file, m[2]));
    }
    const start = lines.findIndex((l) => /^export interface I\w+( extends [\w, ]+)? \{$/.test(l));
    if (start >= 0) {
      const props = new Map();
      for (let i = start + 1; i < lines.length && lines[i] !== "}"; i++) {
        const m = /^ {4}"([^"]+)"\??: (.*)$/.exec(lines[i]);
        if (!m) continue;
        if (m[2] === "{") { // a map: `[key: string]: T;` on the next lines
          let value = { leaf: "unknown" };
          for (i++; i < lines.length && lines[i] !== "    };"; i++) {
            const v = /^\s+\[key: string\]: (.*);$/.exec(lines[i]);
            if (v) value = parseType(v[1], imports);
          }
          props.set(m[1], { map: value });
        } else {
          props.set(m[1], parseType(m[2].replace(/;$/, ""), imports));
        }
      }
      result = { props };
    }
  }
  interfaces.set(file, result);
  return result;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function unknownFields(value, type, path, errors) {
  if (type.array) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, type.array, `${path}/${i}`, errors));
  } else if (type.map) {
    if (isObject(value)) for (const [k, v] of Object.entries(value)) unknownFields(v, type.map, `${path}/${k}`, errors);
  } else if (type.ref) {
    const iface = loadInterface(type.ref);
    if (!iface || !isObject(value)) return; // a type alias (Quantity, Time, ...) or a type error
    for (const [k, v] of Object.entries(value)) {
      const prop = iface.props.get(k);
      if (prop) unknownFields(v, prop, `${path}/${k}`, errors);
      else errors.push(`${path || "/"}: unknown field "${k}"`);
    }
  }
}

// --- Documents ---------------------------------------------------------------------------
async function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^\w+$/.test(kind)) return null;
  const group = apiVersion; // "v1" (core) or "group/version"; both are package paths
  if (!/^[\w.-]+(\/[\w.-]+)?$/.test(group)) return null;
  const decl = resolve(modelsDir, group, kind + ".d.ts");
  if (!existsSync(decl)) return null;
  const mod = await import(`kubernetes-models/${group}`);
  return mod[kind] ? { Model: mod[kind], decl } : null;
}

async function validateDocument(doc) {
  const errors = [];
  const model = await modelFor(doc.apiVersion, doc.kind);
  if (!model) return [`unknown apiVersion/kind ${doc.apiVersion}/${doc.kind}`];
  const data = structuredClone(doc);
  // kustomize wraps long base64 values over lines; the API server's decoder (Go's
  // encoding/base64) ignores \r and \n, the schema's "byte" format does not.
  const base64Field = { Secret: "data", ConfigMap: "binaryData" }[doc.kind];
  if (base64Field && isObject(data[base64Field])) {
    for (const [k, v] of Object.entries(data[base64Field])) {
      if (typeof v === "string") data[base64Field][k] = v.replace(/[\r\n]/g, "");
    }
  }
  try {
    new model.Model(data).validate();
  } catch (e) {
    errors.push(e.message);
  }
  unknownFields(doc, { ref: model.decl }, "", errors);
  return errors;
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node validate.mjs FILE.yaml...");
    return 2;
  }
  if (!existsSync(modelsDir)) {
    console.error(`kubernetes-models is not installed in ${modulesDir} (scripts/install-deps.sh)`);
    return 2;
  }
  let invalid = 0;
  let count = 0;
  for (const file of files) {
    const parsed = parseAllDocuments(readFileSync(file, "utf8"));
    for (const d of parsed) {
      if (d.errors.length) {
        console.log(`INVALID ${file}: YAML: ${d.errors[0].message}`);
        invalid++;
        continue;
      }
      const doc = d.toJS();
      if (doc === null) continue;
      count++;
      const name = `${doc.kind}/${doc.metadata?.name ?? "?"}`;
      const errors = isObject(doc) ? await validateDocument(doc) : ["not a mapping"];
      if (errors.length) {
        invalid++;
        console.log(`INVALID ${name}: ${errors.join("; ")}`);
      } else {
        console.log(`valid   ${name}`);
      }
    }
  }
  console.log(`${count - invalid} valid, ${invalid} invalid`);
  return invalid || count === 0 ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
