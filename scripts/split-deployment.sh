#!/usr/bin/env bash
# The production topology on this machine, without Docker (DESIGN.md): the full Temporal server on the
# local PostgreSQL, and the service's API, SMTP ingress and worker as three processes sharing one
# DATABASE_URL and TEMPORAL_ADDRESS. Builds temporal-server and temporal-sql-tool once per machine from
# the Go module proxy (about 2 minutes warm), sets up their schemas, starts everything, stops on Ctrl-C
# (or when any process exits: then the exit status is non-zero). `--build-only` builds and exits.
#   PG_HOST, PG_PORT, PG_USER  PostgreSQL (default 127.0.0.1, 5432, postgres; trust auth)
#   SVC_DB                     the service's database (default svc_split)
#   TEMPORAL_DB, TEMPORAL_VISIBILITY_DB  Temporal's databases (default temporal, temporal_visibility)
#   TEMPORAL_PORT              frontend gRPC port (default 7233); Temporal's other ports keep their
#                              distance to it (history +1, matching +2, worker +6, HTTP +10, membership -300…)
#   DATA_DIR                   the roles' DATA_DIR (default ./.data); Temporal's config and log go to DATA_DIR/split
#   SPLIT_CLEANUP=1            on exit, also drop the three databases and remove DATA_DIR/split (smoke tests)
#   API, SMTP, SUBMISSION, IMAP, WORKERS  how many processes of each role (default 1 each, at most 9). The
#                              n-th (from 0) of a role listens on its base port + n: PORT (3000), SMTP_PORT (2525),
#                              SUBMISSION_PORT (1587), SUBMISSIONS_PORT (1465), IMAP_PORT (1143), IMAPS_PORT (1993);
#                              only the first API serves DNS_PORT.
#   PORT, SMTP_PORT, SECRET_KEY, SERVICE_DOMAIN… are passed through to the roles.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
VERSION=v1.29.1
BIN="${SVC_TEMPORAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-mail}/temporal-server-$VERSION"
PG_HOST="${PG_HOST:-127.0.0.1}" PG_PORT="${PG_PORT:-5432}" PG_USER="${PG_USER:-postgres}"
SVC_DB="${SVC_DB:-svc_split}"
TEMPORAL_DB="${TEMPORAL_DB:-temporal}" TEMPORAL_VISIBILITY_DB="${TEMPORAL_VISIBILITY_DB:-temporal_visibility}"
P="${TEMPORAL_PORT:-7233}"
DATA_DIR="${DATA_DIR:-./.data}"
API="${API:-1}" SMTP="${SMTP:-1}" SUBMISSION="${SUBMISSION:-1}" IMAP="${IMAP:-1}" WORKERS="${WORKERS:-1}"
for n in "$API" "$SMTP" "$SUBMISSION" "$IMAP" "$WORKERS"; do
  [[ "$n" =~ ^[1-9]$ ]] || { echo "split: API, SMTP, SUBMISSION, IMAP and WORKERS must be 1 to 9 (got '$n')" >&2; exit 2; }
done
for db in "$SVC_DB" "$TEMPORAL_DB" "$TEMPORAL_VISIBILITY_DB"; do
  [[ "$db" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "split: database name '$db' must match [a-z_][a-z0-9_]*" >&2; exit 2; }
done
if [ ! -x "$BIN/server" ] || [ ! -x "$BIN/sql" ]; then
  echo "split: building temporal-server and temporal-sql-tool $VERSION (once per machine)..."
  mkdir -p "$BIN"
  GOBIN="$BIN" go install "go.temporal.io/server/cmd/server@$VERSION"
  GOBIN="$BIN" go install "go.temporal.io/server/cmd/tools/sql@$VERSION"
fi
MOD="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION"
[ -d "$MOD/schema" ] || go mod download "go.temporal.io/server@$VERSION"
[ "${1:-}" = --build-only ] && exit 0

mkdir -p "$DATA_DIR/split/config/dynamicconfig"
WORK="$(cd "$DATA_DIR/split" && pwd)"
sql_in() { local db=$1; shift; psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$db" -v ON_ERROR_STOP=1 -qtA "$@"; }

pids=()
cleaned=0
cleanup() {
  local status=$?
  [ "$cleaned" = 1 ] && return; cleaned=1
  set +e
  # Roles first (they drain their work), then the server; anything still alive after 20 s is killed.
  for group in roles server; do
    local list=()
    if [ "$group" = roles ]; then list=("${pids[@]:1}"); else list=("${pids[@]:0:1}"); fi
    for p in "${list[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 1 200); do
      local alive=0
      for p in "${list[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break; sleep 0.1
    done
    for p in "${list[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  done
  wait 2>/dev/null || true
  if [ "${SPLIT_CLEANUP:-}" = 1 ]; then
    for db in "$SVC_DB" "$TEMPORAL_DB" "$TEMPORAL_VISIBILITY_DB"; do sql_in postgres -c "drop database if exists $db with (force)" || status=1; done
    rm -rf "$WORK"
    echo "split: dropped $SVC_DB, $TEMPORAL_DB, $TEMPORAL_VISIBILITY_DB and removed $WORK"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


sqltool() {
  "$BIN/sql" --plugin postgres12 --ep "$PG_HOST" -p "$PG_PORT" -u "$PG_USER" "$@" >>"$WORK/sql-tool.log" 2>&1 \
    || { echo "split: temporal-sql-tool $* failed:" >&2; tail -20 "$WORK/sql-tool.log" >&2; return 1; }
}
for db in "$TEMPORAL_DB" "$TEMPORAL_VISIBILITY_DB"; do
  [ -n "$(sql_in postgres -c "select 1 from pg_database where datname = '$db'")" ] || sqltool --db "$db" create-database
done
[ -n "$(sql_in "$TEMPORAL_DB" -c "select 1 from pg_tables where tablename = 'schema_version'")" ] \
  || sqltool --db "$TEMPORAL_DB" setup-schema -v 0.0
sqltool --db "$TEMPORAL_DB" update-schema -d "$MOD/schema/postgresql/v12/temporal/versioned"
[ -n "$(sql_in "$TEMPORAL_VISIBILITY_DB" -c "select 1 from pg_tables where tablename = 'schema_version'")" ] \
  || sqltool --db "$TEMPORAL_VISIBILITY_DB" setup-schema -v 0.0
sqltool --db "$TEMPORAL_VISIBILITY_DB" update-schema -d "$MOD/schema/postgresql/v12/visibility/versioned"
[ -n "$(sql_in postgres -c "select 1 from pg_database where datname = '$SVC_DB'")" ] || sql_in postgres -c "create database $SVC_DB"

# The module's development-postgres12.yaml, on this machine's PostgreSQL (trust auth), databases and ports.
cat > "$WORK/config/development.yaml" <<EOF
log: { stdout: true, level: warn }
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 4
  datastores:
    default:
      sql: { pluginName: postgres12, databaseName: "$TEMPORAL_DB", connectAddr: "$PG_HOST:$PG_PORT", connectProtocol: tcp,
             user: "$PG_USER", password: "", maxConns: 20, maxIdleConns: 20, maxConnLifetime: 1h }
    visibility:
      sql: { pluginName: postgres12, databaseName: "$TEMPORAL_VISIBILITY_DB", connectAddr: "$PG_HOST:$PG_PORT", connectProtocol: tcp,
             user: "$PG_USER", password: "", maxConns: 2, maxIdleConns: 2, maxConnLifetime: 1h }
global:
  membership: { maxJoinDuration: 30s, broadcastAddress: 127.0.0.1 }
services:
  frontend: { rpc: { grpcPort: $P, membershipPort: $((P - 300)), bindOnLocalHost: true, httpPort: $((P + 10)) } }
  history: { rpc: { grpcPort: $((P + 1)), membershipPort: $((P - 299)), bindOnLocalHost: true } }
  matching: { rpc: { grpcPort: $((P + 2)), membershipPort: $((P - 298)), bindOnLocalHost: true } }
  worker: { rpc: { grpcPort: $((P + 6)), membershipPort: $((P - 294)), bindOnLocalHost: true } }
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active: { enabled: true, initialFailoverVersion: 1, rpcName: frontend, rpcAddress: "localhost:$P" }
dcRedirectionPolicy: { policy: noop }
dynamicConfigClient: { filepath: "$WORK/config/dynamicconfig/development-sql.yaml", pollInterval: 10s }
EOF
cp "$MOD/config/dynamicconfig/development-sql.yaml" "$WORK/config/dynamicconfig/development-sql.yaml"
chmod u+w "$WORK/config/dynamicconfig/development-sql.yaml"
sed -i "s#http://localhost:7243/#http://localhost:$((P + 10))/#" "$WORK/config/dynamicconfig/development-sql.yaml"
# What the service needs of any Temporal server (temporal/dev-server.ts REQUIRED_DYNAMIC_CONFIG): SvcMessageId
# holds every id of a batch, 100 ids are about 3.1 KB, over the default 2 KB per search attribute value.
cat >> "$WORK/config/dynamicconfig/development-sql.yaml" <<EOF
frontend.searchAttributesSizeOfValueLimit:
  - value: 4096
EOF

"$BIN/server" --root "$WORK" --config config --env development --allow-no-auth start > "$WORK/temporal.log" 2>&1 &
pids+=($!)
CLI=.temporal/bin/temporal; [ -x "$CLI" ] || CLI=temporal
for i in $(seq 1 120); do
  "$CLI" operator cluster health --address "127.0.0.1:$P" >/dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "split: temporal-server exited; last lines of $WORK/temporal.log:" >&2; tail -20 "$WORK/temporal.log" >&2; exit 1; }
  [ "$i" = 120 ] && { echo "split: temporal-server not healthy on 127.0.0.1:$P after 60 s (log: $WORK/temporal.log)" >&2; exit 1; }
  sleep 0.5
done
"$CLI" operator namespace describe -n default --address "127.0.0.1:$P" >/dev/null 2>&1 \
  || "$CLI" operator namespace create -n default --address "127.0.0.1:$P" >/dev/null
echo "split: temporal-server on 127.0.0.1:$P (log: $WORK/temporal.log)"

export DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$SVC_DB" TEMPORAL_ADDRESS="127.0.0.1:$P"
export SECRET_KEY="${SECRET_KEY:-$(cat "$DATA_DIR/split-secret" 2>/dev/null || (head -c 32 /dev/urandom | base64 | tr -d '/+=' | tee "$DATA_DIR/split-secret"))}"
export DATA_DIR
# Plain node (not npx): one process per role, so stopping it is one signal to one pid. N of a role share
# the database and the task queue; each listens on its own port (base + n).
API_PORT="${PORT:-3000}" SMTP_BASE="${SMTP_PORT:-2525}" IMAP_BASE="${IMAP_PORT:-1143}" IMAPS_BASE="${IMAPS_PORT:-1993}"
SUB_BASE="${SUBMISSION_PORT:-1587}" SUBS_BASE="${SUBMISSIONS_PORT:-1465}"
# METRICS_PORT and TEMPORAL_METRICS_PORT, when set, are bases too: every process gets the next port up.
METRICS_BASE="${METRICS_PORT:-}" TEMPORAL_METRICS_BASE="${TEMPORAL_METRICS_PORT:-}"
unset METRICS_PORT TEMPORAL_METRICS_PORT
n=0
# Runs one role in the background with its own metrics ports (when metrics are on): [-u VAR] [VAR=value...] command.
role() {
  local opts=() extra=()
  if [ "$1" = -u ]; then opts=(-u "$2"); shift 2; fi
  [ -n "$METRICS_BASE" ] && extra+=("METRICS_PORT=$((METRICS_BASE + n))")
  [ -n "$TEMPORAL_METRICS_BASE" ] && extra+=("TEMPORAL_METRICS_PORT=$((TEMPORAL_METRICS_BASE + n))")
  n=$((n + 1))
  env "${opts[@]}" "${extra[@]}" "$@" &
  pids+=($!)
}
for i in $(seq 0 $((WORKERS - 1))); do role node --import tsx main.ts worker; done
for i in $(seq 0 $((SMTP - 1))); do role SMTP_PORT=$((SMTP_BASE + i)) node --import tsx main.ts smtp; done
for i in $(seq 0 $((SUBMISSION - 1))); do
  role SUBMISSION_PORT=$((SUB_BASE + i)) SUBMISSIONS_PORT=$((SUBS_BASE + i)) node --import tsx main.ts submission
done
for i in $(seq 0 $((IMAP - 1))); do role IMAP_PORT=$((IMAP_BASE + i)) IMAPS_PORT=$((IMAPS_BASE + i)) node --import tsx main.ts imap; done
for i in $(seq 0 $((API - 1))); do
  if [ "$i" = 0 ]; then role PORT=$API_PORT node --import tsx main.ts api
  else role -u DNS_PORT PORT=$((API_PORT + i)) node --import tsx main.ts api; fi
done
echo "split: $WORKERS worker(s); $SMTP SMTP on $SMTP_BASE+; $SUBMISSION submission on $SUB_BASE+/$SUBS_BASE+; $IMAP IMAP on $IMAP_BASE+; $API API on $API_PORT+"
set +e
wait -n "${pids[@]}"
status=$?
echo "split: a process exited (status $status); stopping the others" >&2
exit $(( status == 0 ? 1 : status ))
