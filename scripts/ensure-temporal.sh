#!/usr/bin/env bash
# Builds the Temporal CLI (dev server + Web UI inside) once per machine and links it into .temporal/bin.
# Runs from `npm install` (postinstall); `npm start` also finds `temporal` on PATH if that is all there is.
#   TEMPORAL_CLI_VERSION  CLI tag to build (default v1.5.1: Server 1.29.1, UI 2.42.1)
#   SVC_TEMPORAL_CACHE    where the built binary is kept between clones (default ~/.cache/svc-mail)
#   SKIP_TEMPORAL_BUILD=1 skip (when TEMPORAL_ADDRESS points at an existing server)
set -euo pipefail
cd "$(dirname "$0")/.."
# Go may be installed without being on PATH (a bare CI environment): look in the usual place too.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
export HOME="${HOME:-/root}"
VERSION="${TEMPORAL_CLI_VERSION:-v1.5.1}"
BIN_DIR="$PWD/.temporal/bin"
CACHE_DIR="${SVC_TEMPORAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-mail}/temporal-$VERSION"

if [ -x "$BIN_DIR/temporal" ]; then exit 0; fi
if [ "${SKIP_TEMPORAL_BUILD:-}" = "1" ]; then echo "ensure-temporal: SKIP_TEMPORAL_BUILD=1, not building"; exit 0; fi
mkdir -p "$BIN_DIR"

if [ ! -x "$CACHE_DIR/temporal" ]; then
  if ! command -v go >/dev/null 2>&1; then
    if command -v temporal >/dev/null 2>&1; then
      echo "ensure-temporal: no Go toolchain; using temporal on PATH ($(command -v temporal))"
      exit 0
    fi
    echo "ensure-temporal: needs Go (to build the Temporal CLI) or 'temporal' on PATH; or set TEMPORAL_ADDRESS to an existing server" >&2
    exit 1
  fi
  echo "ensure-temporal: building Temporal CLI $VERSION (first time on this machine: a few minutes)..."
  mkdir -p "$CACHE_DIR"
  GOBIN="$CACHE_DIR" go install "github.com/temporalio/cli/cmd/temporal@$VERSION"
fi
ln -sf "$CACHE_DIR/temporal" "$BIN_DIR/temporal"
echo "ensure-temporal: $("$BIN_DIR/temporal" --version)"
