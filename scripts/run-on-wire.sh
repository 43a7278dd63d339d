#!/usr/bin/env bash
# `make run STORE=wire`: the service on the production driver path, against a local SecantusDB
# (MongoDB wire protocol, replica-set transactions) whose data survives a restart.
#
# Everything lives in .visitor-service/wire/: the server's data, its log, the two secrets
# (generated once, mode 600) and the login created on the first start. The SecantusDB server
# started here is stopped when the service stops.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=.visitor-service/wire
PORT_DB=${WIRE_STORE_PORT:-27018}
SECANTUSD=.venv-secantus/bin/secantusd-py
SERVICE=.venv/bin/visitor-service
PYTHON=.venv/bin/python
mkdir -p "$STATE"
chmod 700 .visitor-service "$STATE"

export MONGODB_URI="mongodb://127.0.0.1:${PORT_DB}/?replicaSet=secantus"
export MONGODB_DATABASE=${MONGODB_DATABASE:-visitor_service}

store_answers() {
  "$PYTHON" - <<'EOF' >/dev/null 2>&1
import os, pymongo
pymongo.MongoClient(os.environ["MONGODB_URI"], serverSelectionTimeoutMS=500).admin.command("ping")
EOF
}

started_store=""
service=""
stop_all() {
  for pid in $service $started_store; do kill "$pid" 2>/dev/null || true; done
  wait
}
trap stop_all EXIT
trap 'exit 130' INT TERM
if ! store_answers; then
  "$SECANTUSD" --host 127.0.0.1 --port "$PORT_DB" --storage-path "$PWD/$STATE/data" \
    --log-level WARNING >>"$STATE/secantusd.log" 2>&1 &
  started_store=$!
  for _ in $(seq 1 150); do
    store_answers && break
    kill -0 "$started_store" 2>/dev/null || { echo "SecantusDB did not start; see $STATE/secantusd.log" >&2; exit 1; }
    sleep 0.2
  done
  store_answers || { echo "SecantusDB did not answer within 30 s; see $STATE/secantusd.log" >&2; exit 1; }
fi

if [ ! -f "$STATE/secrets.env" ]; then
  (umask 077; "$PYTHON" -c '
import base64, secrets
for name in ("SECRET_KEY", "MASTER_KEY"):
    print(f"{name}={base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}")
' >"$STATE/secrets.env")
fi
set -a; . "$STATE/secrets.env"; set +a

if [ ! -f "$STATE/login.json" ]; then
  email=${DEMO_EMAIL:-owner@example.com}
  password=${DEMO_PASSWORD:-$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(12))')}
  VISITOR_SERVICE_PASSWORD="$password" "$SERVICE" create-user --email "$email" >/dev/null
  site=$("$SERVICE" create-site --email "$email" --name "My shop")
  (umask 077; "$PYTHON" -c '
import json, sys
site = json.loads(sys.argv[3])
print(json.dumps({"email": sys.argv[1], "password": sys.argv[2], "siteId": site["id"],
                  "apiKey": site["apiKey"], "publicKey": site["publicKey"]}, indent=2))
' "$email" "$password" "$site" >"$STATE/login.json")
fi

echo "Store: SecantusDB on 127.0.0.1:${PORT_DB}, data in $STATE/data (kept across restarts)."
# The server prints the same "what next" block as the embedded demo from this login, and
# writes $STATE/demo.env beside it for the README's first calls.
export DEMO_FILE="$STATE/login.json"
# In the background, so that a signal to this script stops the service and the store at once.
"$SERVICE" serve &
service=$!
wait "$service"
