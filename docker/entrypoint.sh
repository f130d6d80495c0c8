#!/bin/sh
# Migrate and load the shipped catalogs (both idempotent), then run the given command.
set -eu
advisor db upgrade
advisor catalog load
exec "$@"
