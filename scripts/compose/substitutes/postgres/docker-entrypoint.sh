#!/bin/bash
# The official postgres image's start, for Debian's PostgreSQL: as root, own $PGDATA and
# re-run as postgres; on an empty data directory, initdb with POSTGRES_USER/PASSWORD, create
# POSTGRES_DB, run /docker-entrypoint-initdb.d/* against a server on its socket only; then
# exec the server (PID 1, user postgres).
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

process_sql() {
    psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password "$@"
}

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
        echo "error: database is uninitialized and POSTGRES_PASSWORD is not set" >&2
        exit 1
    fi
    export POSTGRES_USER="${POSTGRES_USER:-postgres}"
    export POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
    # Word splitting of POSTGRES_INITDB_ARGS is the official image's contract.
    # shellcheck disable=SC2086
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
        ${POSTGRES_INITDB_ARGS:-}
    printf '\nhost all all all %s\n' "${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" \
        >> "$PGDATA/pg_hba.conf"
    sed -ri "s/^#?(listen_addresses)\s*=\s*\S+.*/\1 = '*'/" "$PGDATA/postgresql.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start
    export PGUSER="$POSTGRES_USER" PGPASSWORD="${POSTGRES_PASSWORD:-}"
    if [ "$POSTGRES_DB" != postgres ]; then
        process_sql --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh)
                if [ -x "$f" ]; then echo "running $f"; "$f"
                else echo "sourcing $f"; # shellcheck disable=SC1090
                    . "$f"; fi ;;
            *.sql) echo "running $f"; process_sql --dbname "$POSTGRES_DB" -f "$f" ;;
            *) [ -e "$f" ] && echo "ignoring $f" ;;
        esac
    done
    unset PGPASSWORD
    pg_ctl -D "$PGDATA" -m fast -w stop
    echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
