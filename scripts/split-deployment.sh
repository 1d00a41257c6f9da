#!/usr/bin/env bash
# The production topology on this machine, without Docker (DESIGN.md): the full Temporal server on the
# local PostgreSQL, and the service's API, SMTP ingress and worker as three processes sharing one
# DATABASE_URL and TEMPORAL_ADDRESS. Builds temporal-server and temporal-sql-tool once per machine from
# the Go module proxy (about 2 minutes warm), sets up their schemas, starts everything, stops on Ctrl-C.
#   PG_URL        admin connection (default postgres://postgres@127.0.0.1:5432/postgres)
#   SVC_DB        the service's database name (default svc_split); TEMPORAL_PORT (default 7233)
#   PORT, SMTP_PORT, SECRET_KEY, SERVICE_DOMAIN… are passed through to the roles.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.29.1
BIN="${SVC_TEMPORAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-mail}/temporal-server-$VERSION"
PG_HOST=127.0.0.1 PG_PORT=5432 PG_USER=postgres
SVC_DB="${SVC_DB:-svc_split}"
TEMPORAL_PORT="${TEMPORAL_PORT:-7233}"
mkdir -p "${DATA_DIR:-./.data}/split/config/dynamicconfig"
WORK="$(cd "${DATA_DIR:-./.data}/split" && pwd)"

if [ ! -x "$BIN/server" ] || [ ! -x "$BIN/sql" ]; then
  echo "split: building temporal-server and temporal-sql-tool $VERSION (once per machine)..."
  mkdir -p "$BIN"
  GOBIN="$BIN" go install "go.temporal.io/server/cmd/server@$VERSION"
  GOBIN="$BIN" go install "go.temporal.io/server/cmd/tools/sql@$VERSION"
fi
MOD="$(go env GOMODCACHE)/go.temporal.io/server@$VERSION"

sqltool() { "$BIN/sql" --plugin postgres12 --ep "$PG_HOST" -p "$PG_PORT" -u "$PG_USER" "$@"; }
for db in temporal temporal_visibility; do
  sqltool --db "$db" create-database 2>/dev/null || true
done
sqltool --db temporal setup-schema -v 0.0 2>/dev/null || true
sqltool --db temporal update-schema -d "$MOD/schema/postgresql/v12/temporal/versioned"
sqltool --db temporal_visibility setup-schema -v 0.0 2>/dev/null || true
sqltool --db temporal_visibility update-schema -d "$MOD/schema/postgresql/v12/visibility/versioned"
psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -tc "select 1 from pg_database where datname = '$SVC_DB'" | grep -q 1 \
  || psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -c "create database $SVC_DB" >/dev/null

# The module's development-postgres12.yaml, pointed at this machine's PostgreSQL (trust auth) and ports.
sed -e "s/user: \"temporal\"/user: \"$PG_USER\"/" -e 's/password: "temporal"/password: ""/' \
    -e "s/grpcPort: 7233/grpcPort: $TEMPORAL_PORT/" -e "s/localhost:7233/localhost:$TEMPORAL_PORT/" \
    -e "s#filepath: \"config/dynamicconfig/development-sql.yaml\"#filepath: \"$WORK/config/dynamicconfig/development-sql.yaml\"#" \
    "$MOD/config/development-postgres12.yaml" > "$WORK/config/development.yaml"
cp "$MOD/config/dynamicconfig/development-sql.yaml" "$WORK/config/dynamicconfig/development-sql.yaml"
chmod u+w "$WORK/config"/*.yaml "$WORK/config/dynamicconfig"/*.yaml

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; }
trap cleanup EXIT INT TERM

"$BIN/server" --root "$WORK" --config config --env development --allow-no-auth start > "$WORK/temporal.log" 2>&1 &
pids+=($!)
CLI=.temporal/bin/temporal; [ -x "$CLI" ] || CLI=temporal
for _ in $(seq 1 60); do "$CLI" operator cluster health --address "127.0.0.1:$TEMPORAL_PORT" >/dev/null 2>&1 && break; sleep 1; done
"$CLI" operator namespace describe -n default --address "127.0.0.1:$TEMPORAL_PORT" >/dev/null 2>&1 \
  || "$CLI" operator namespace create -n default --address "127.0.0.1:$TEMPORAL_PORT"
echo "split: temporal-server on 127.0.0.1:$TEMPORAL_PORT (log: $WORK/temporal.log)"

export DATABASE_URL="postgres://$PG_USER@$PG_HOST:$PG_PORT/$SVC_DB" TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
export SECRET_KEY="${SECRET_KEY:-$(cat "${DATA_DIR:-./.data}/split-secret" 2>/dev/null || (mkdir -p "${DATA_DIR:-./.data}" && head -c 32 /dev/urandom | base64 | tr -d '/+=' | tee "${DATA_DIR:-./.data}/split-secret"))}"
npx tsx worker.ts & pids+=($!)
npx tsx main.ts smtp & pids+=($!)
npx tsx main.ts imap & pids+=($!)
npx tsx main.ts api & pids+=($!)
wait -n "${pids[@]}"
