#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL server for nodestep's tests, on a Unix socket only.
#
#   eval "$(scripts/pg_test_server.sh start DIR)"   # prints the export of NODESTEP_TEST_POSTGRES_DSN
#   scripts/pg_test_server.sh stop DIR              # stops the server and deletes DIR
#   scripts/pg_test_server.sh crash DIR             # stops it as a crash would (immediate)
#   scripts/pg_test_server.sh restart DIR           # starts it again (it recovers first)
#
# DIR holds the data directory and the socket; it must not exist before `start` (the
# server is a throwaway). No TCP port is opened, so servers of several checkouts never
# collide. Uses Debian's postgresql package (PGBIN overrides where its programs are); as
# root, initdb and the server run as the `postgres` user, as initdb requires.
set -euo pipefail

action=${1:?usage: pg_test_server.sh start|stop|crash|restart DIR}
dir=${2:?usage: pg_test_server.sh start|stop|crash|restart DIR}
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
if [ -z "$pgbin" ] || [ ! -x "$pgbin/pg_ctl" ]; then
    echo "error: no PostgreSQL server programs found (pg_ctl); install them with" \
        "'apt-get install -y postgresql' or set PGBIN to their directory" >&2
    exit 1
fi

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

server_start() {
    # fsync stays on: the crash tests need a server that keeps what it acknowledged.
    as_owner "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-k $dir -c listen_addresses='' -c max_connections=200" start >/dev/null
}

case "$action" in
start)
    if [ -e "$dir" ]; then
        echo "error: $dir exists; give a new directory (the server is a throwaway)" >&2
        exit 1
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    as_owner "$pgbin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log"
    server_start
    echo "export NODESTEP_TEST_POSTGRES_DSN='postgresql://postgres@/postgres?host=$dir'"
    ;;
crash)
    as_owner "$pgbin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
restart)
    server_start
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_owner "$pgbin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "error: unknown action '$action'; use start, stop, crash or restart" >&2
    exit 1
    ;;
esac
