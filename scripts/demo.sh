#!/usr/bin/env bash
# One command from a fresh clone to a running demo on Debian/Ubuntu with Node >= 20.19:
# installs redis-server with apt when it is missing, installs dependencies, runs the quick start.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server
fi
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run --silent demo
