#!/bin/sh
# advisor's container entry point: migrate (which also loads the shipped catalogs; both are
# idempotent), then exec the command (default: advisor serve), which gets PID 1's signals.
#
#   advisor-entrypoint                          migrate, then `advisor serve`
#   advisor-entrypoint advisor serve --workers 4
#   advisor-entrypoint --skip-migrations ...    replicas: a one-shot job (or one replica) migrates
#   ADVISOR_SKIP_MIGRATIONS=1 advisor-entrypoint ...
set -eu

migrate=1
case "${ADVISOR_SKIP_MIGRATIONS:-0}" in
    1 | true | yes) migrate=0 ;;
esac
if [ "${1:-}" = "--skip-migrations" ]; then
    migrate=0
    shift
fi
if [ "$#" -eq 0 ]; then
    set -- advisor serve
fi

if [ "$migrate" = 1 ]; then
    echo "advisor-entrypoint: advisor db upgrade" >&2
    advisor db upgrade
else
    echo "advisor-entrypoint: migrations skipped" >&2
fi
exec "$@"
