#!/usr/bin/env bash
# Smoke test of the production topology (CI runs it after `npm test`): scripts/split-deployment.sh on
# FRESH databases and free ports, then test/split-smoke.ts drives the main flows through the API and
# SMTP roles (sign up, domains, a delivered send, inbound to a webhook, a scheduled send cancelled).
# Two of each role (API, SMTP, IMAP, worker) on one Temporal server and one PostgreSQL: the driver also
# sends through the second API and mails through the second SMTP ingress.
# Everything it started is stopped and its databases are dropped on exit; failure exits non-zero.
#   SMOKE_READY_TIMEOUT_MS  how long the roles may take to answer /api/health (default 240000; the
#                           first run on a machine builds temporal-server first, 2-4 minutes, before this clock)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# A free port in [lo, hi) with none of the given offsets from it in use either.
pick_port() {
  local lo=$1 hi=$2; shift 2
  for _ in $(seq 1 200); do
    local p=$(( lo + RANDOM % (hi - lo) )) busy=0
    for off in 0 "$@"; do in_use $((p + off)) && { busy=1; break; }; done
    [ "$busy" = 0 ] && { echo "$p"; return; }
  done
  echo "split-smoke: no free port in [$lo, $hi)" >&2; return 1
}

id="$(date +%s)_$$"
export DATA_DIR; DATA_DIR="$(mktemp -d "${TMPDIR:-/tmp}/svc-split-smoke-XXXXXX")"
export SVC_DB="svc_smoke_$id" TEMPORAL_DB="temporal_smoke_$id" TEMPORAL_VISIBILITY_DB="temporal_vis_smoke_$id"
# Temporal's ports keep their distance to the frontend port (split-deployment.sh): check them all.
# Below Linux's ephemeral range (32768+), so no outgoing connection takes a port between check and bind.
TEMPORAL_PORT="$(pick_port 21000 27000 1 2 6 10 -300 -299 -298 -294)"
# Two of each role: the second listens on the base port + 1 (split-deployment.sh), so that one is checked too.
PORT="$(pick_port 27100 29000 1)"; SMTP_PORT="$(pick_port 29000 30800 1)"; DNS_PORT="$(pick_port 30800 32600)"
IMAP_PORT="$(pick_port 19000 19500 1)"; IMAPS_PORT="$(pick_port 19500 20000 1)"
SUBMISSION_PORT="$(pick_port 18000 18500 1)"; SUBMISSIONS_PORT="$(pick_port 18500 19000 1)"
export TEMPORAL_PORT PORT SMTP_PORT DNS_PORT IMAP_PORT IMAPS_PORT SUBMISSION_PORT SUBMISSIONS_PORT
export API=2 SMTP=2 SUBMISSION=2 IMAP=2 WORKERS=2
export SPLIT_CLEANUP=1 NODE_ENV=development OUTBOUND_MODE=capture SERVICE_DOMAIN=smoke.svc.test ALLOW_PRIVATE_NETWORKS=1
export PUBLIC_URL="http://127.0.0.1:$PORT" DNS_SERVERS="127.0.0.1:$DNS_PORT"
export SECRET_KEY; SECRET_KEY="smoke-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
LOG="$DATA_DIR/split.log"

split_pid="" driver_pid=""
finish() {
  local status=$?
  trap - EXIT INT TERM
  set +e
  [ -n "$driver_pid" ] && kill -TERM "$driver_pid" 2>/dev/null
  if [ "$status" != 0 ] && [ -f "$DATA_DIR/split/temporal.log" ]; then
    echo "split-smoke: last lines of temporal.log:" >&2; tail -n 20 "$DATA_DIR/split/temporal.log" >&2
  fi
  if [ -n "$split_pid" ]; then
    kill -TERM "$split_pid" 2>/dev/null
    wait "$split_pid" 2>/dev/null
  fi
  if [ "$status" = 0 ]; then
    grep -E '^(split:|\[(temporal|db|api|smtp|submission|worker|dns)\])' "$LOG" | sed 's/^/  | /'
  else
    echo "split-smoke: FAILED (status $status). Last lines of the deployment's output:" >&2
    tail -n 80 "$LOG" >&2 2>/dev/null
  fi
  # split-deployment.sh dropped its databases; make sure of it even if it died early.
  for db in "$SVC_DB" "$TEMPORAL_DB" "$TEMPORAL_VISIBILITY_DB"; do
    psql -h "${PG_HOST:-127.0.0.1}" -p "${PG_PORT:-5432}" -U "${PG_USER:-postgres}" -d postgres -qtA \
      -c "drop database if exists $db with (force)" >/dev/null 2>&1 || true
  done
  rm -rf "$DATA_DIR"
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash scripts/split-deployment.sh --build-only
echo "split-smoke: databases $SVC_DB, $TEMPORAL_DB, $TEMPORAL_VISIBILITY_DB; Temporal on $TEMPORAL_PORT, API $PORT, SMTP $SMTP_PORT, DNS $DNS_PORT"
bash scripts/split-deployment.sh > "$LOG" 2>&1 &
split_pid=$!
SMOKE_API_URL="http://127.0.0.1:$PORT" SMOKE_SMTP_PORT="$SMTP_PORT" SMOKE_SUBMISSION_PORTS="$SUBMISSION_PORT,$((SUBMISSION_PORT + 1))" \
  SMOKE_API_URL2="http://127.0.0.1:$((PORT + 1))" SMOKE_SMTP_PORT2="$((SMTP_PORT + 1))" SMOKE_SERVICE_DOMAIN="$SERVICE_DOMAIN" SMOKE_SPLIT_PID="$split_pid" \
  SMOKE_TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT" \
  node --import tsx test/split-smoke.ts &
driver_pid=$!
# In the background and waited for, so a TERM or Ctrl-C reaches the trap at once.
wait "$driver_pid"
