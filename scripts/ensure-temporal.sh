#!/usr/bin/env bash
# Builds the Temporal CLI (dev server + Web UI) once into .temporal/bin, or reuses one already there or on PATH.
# Runs from `npm install` (postinstall) and again from `npm start` if the binary is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
BIN_DIR="$PWD/.temporal/bin"
if [ -x "$BIN_DIR/temporal" ]; then exit 0; fi
if [ "${SKIP_TEMPORAL_BUILD:-}" = "1" ]; then echo "ensure-temporal: SKIP_TEMPORAL_BUILD=1, not building"; exit 0; fi
if command -v temporal >/dev/null 2>&1; then
  echo "ensure-temporal: using temporal on PATH ($(command -v temporal))"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "ensure-temporal: no Go toolchain and no 'temporal' on PATH; set TEMPORAL_ADDRESS to use an existing server" >&2
  exit 0
fi
mkdir -p "$BIN_DIR"
echo "ensure-temporal: building Temporal CLI $VERSION into .temporal/bin (first time only, a few minutes)..."
GOBIN="$BIN_DIR" go install "github.com/temporalio/cli/cmd/temporal@$VERSION"
echo "ensure-temporal: built $("$BIN_DIR/temporal" --version)"
