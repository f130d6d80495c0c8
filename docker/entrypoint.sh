#!/bin/sh
# Migrate (which also loads the shipped catalogs; both idempotent), then run the given command.
set -eu
advisor db upgrade
exec "$@"
