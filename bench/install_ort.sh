#!/usr/bin/env bash
# Installs ONNX Runtime for Node (CPU) into bench/node_modules for bench/run_models.py.
# ONNXRUNTIME_NODE_INSTALL=skip: the package's install step otherwise tries to download GPU
# libraries from outside and fails; the CPU library ships inside the package.
set -euo pipefail
cd "$(dirname "$0")"
ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund
node -e "import('onnxruntime-node').then(o => console.log('onnxruntime-node', o.env.versions.common))"
