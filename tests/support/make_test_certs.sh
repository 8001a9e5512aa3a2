#!/usr/bin/env bash
# Writes a throwaway PKI into DIR for the TLS tests: a CA, a server certificate for 127.0.0.1
# and localhost, a client certificate signed by the CA, and a client certificate signed by
# another CA (which a mutual-TLS server must refuse). EC keys: quick to make.
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }
ca() {  # NAME
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=kiln test $1" -days 2 -out "$1.crt" 2>/dev/null
}
leaf() {  # NAME CA EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=kiln test $1" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
ca ca
ca other-ca
leaf server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf rogue other-ca "extendedKeyUsage=clientAuth"
