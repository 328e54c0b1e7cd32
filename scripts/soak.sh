#!/usr/bin/env bash
# The app under a class of visitors: see scripts/soak.py.
# Usage: scripts/soak.sh [--pair NAME_OR_SPEC] [--minutes M] [--users U] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3.11}" scripts/soak.py "$@"
