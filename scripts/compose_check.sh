#!/usr/bin/env bash
# The fleet as users deploy it, end to end on this machine (`make compose-check`): builds the
# image and starts docker-compose.yml with docker-compose.loopback.yml, then checks what a
# deployment needs. One summary line per check, the time of every stage; exit 0 only if every
# check passed.
#
#   engine   installs dockerd, buildx, Compose and debootstrap where missing; starts a dockerd
#            of its own (its own data and socket folders, no bridge, no iptables) unless one
#            answers already, and stops it at the end
#   base     a Debian bookworm base image from the package archive (debootstrap, docker
#            import): no image registry is needed
#   images   the substitutes for postgres:16, redis:7 and mher/flower:2.0 (Debian's packages;
#            scripts/compose/substitutes/README.md) and the project's image, on that base,
#            with this host's pip settings as build secrets (scripts/compose/pip_settings.py)
#   stack    migrate, PostgreSQL, Redis, the scheduler, two CPU workers, the dashboard and
#            Flower, every one on 127.0.0.1 (host networking)
#   job      a job submitted from a container; a worker container killed mid-trial; every
#            trial counted once; the best config read from the host
#   restart  the stack taken down and up again: the data is kept in the volumes
#   exposure the dashboard and Flower answer on loopback; nothing listens beyond it, no
#            container has an address of its own; no process runs as root, no session as
#            PostgreSQL's superuser
#
# Caches (outside the repository; TUNER_COMPOSE_CACHE): the base's root file system, the
# trixie plugin packages; the engine's images and build cache (TUNER_COMPOSE_ENGINE_DATA,
# default /var/lib/tuner-compose/docker). About 5 minutes on 2 cores from nothing (packages
# included), 4½ when the image's sources changed, 3¼ when nothing did.
# Ports (all on 127.0.0.1, TUNER_CHECK_*_PORT): PostgreSQL 15432, Redis 16379, dashboard
# 18080, Flower 15555. Needs root (an engine, packages), Debian's archive and the package
# index pip uses.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CACHE=${TUNER_COMPOSE_CACHE:-/var/cache/tuner-compose}
RUN_DIR=${TUNER_COMPOSE_RUN:-/run/tuner-compose}
LOG_DIR=${TUNER_COMPOSE_LOGS:-$CACHE/logs}
DEBIAN_MIRROR=${TUNER_COMPOSE_MIRROR:-http://deb.debian.org/debian}
BASE_IMAGE=tuner-compose/debian:bookworm
IMAGE=kernel-tuner-service:latest
TORCH_REQUIREMENT=${TUNER_COMPOSE_TORCH:-torch==2.13.0+cpu}
PROJECT=tuner-check
PG_PORT=${TUNER_CHECK_PG_PORT:-15432}
REDIS_PORT=${TUNER_CHECK_REDIS_PORT:-16379}
DASHBOARD_PORT=${TUNER_CHECK_DASHBOARD_PORT:-18080}
FLOWER_PORT=${TUNER_CHECK_FLOWER_PORT:-15555}
SHAPE=M=256,N=256,K=256
TRIALS=12
PY=$ROOT/.venv/bin/python

SUMMARY=() STAGES=() INSTALLED=() PIP_PID="" STACK_UP="" CONFIG=""
STAGE="" STAGE_T0=0 T_START=$(date +%s)

mkdir -p "$CACHE" "$LOG_DIR" "$RUN_DIR"
chmod 700 "$RUN_DIR"
# shellcheck source=scripts/compose/engine.sh
. "$ROOT/scripts/compose/engine.sh"

stage() {  # stage NAME: closes the previous one, with its duration
    local now
    now=$(date +%s)
    [ -z "$STAGE" ] || STAGES+=("stage $STAGE: $((now - STAGE_T0)) s")
    STAGE=$1 STAGE_T0=$now
    [ -z "$STAGE" ] || echo "== $STAGE" >&2
}

pass() { SUMMARY+=("PASS $1: $2"); echo "PASS $1: $2" >&2; }

fail() {  # fail CHECK DETAIL: one line, then the summary, cleanup, exit 1
    SUMMARY+=("FAIL $1: $2")
    echo "FAIL $1: $2 (logs: $LOG_DIR)" >&2
    exit 1
}

compose() {
    docker compose -p "$PROJECT" --env-file "$RUN_DIR/check.env" -f docker-compose.yml \
        -f docker-compose.loopback.yml -f scripts/compose/substitutes.yml "$@"
}

SERVICES=(postgres redis migrate scheduler worker-cpu dashboard flower)

stack_logs() { [ -z "$STACK_UP" ] || compose logs --no-color >"$LOG_DIR/stack.log" 2>&1 || true; }

finish() {
    local rc=$?
    trap - EXIT INT TERM ERR
    stage ""
    stack_logs
    if [ -n "$STACK_UP" ]; then
        compose down -v --remove-orphans >>"$LOG_DIR/compose.log" 2>&1 \
            || echo "warning: compose down failed ($LOG_DIR/compose.log)" >&2
    fi
    [ -z "$PIP_PID" ] || { kill "$PIP_PID" 2>/dev/null; wait "$PIP_PID" 2>/dev/null || true; }
    engine_stop
    rm -f "$RUN_DIR/check.env" "$RUN_DIR/db-url"
    rm -rf "$RUN_DIR/pip"
    echo
    echo "compose check ($(( $(date +%s) - T_START )) s in all):"
    printf '  %s\n' "${STAGES[@]}"
    printf '%s\n' "${SUMMARY[@]}"
    [ ${#INSTALLED[@]} -eq 0 ] || echo "installed: ${INSTALLED[*]}"
    exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM
# A command that fails where no check expected it still ends in one FAIL line.
trap 'fail "${STAGE:-setup}" "unexpected failure at line $LINENO: $BASH_COMMAND"' ERR

[ "$(id -u)" = 0 ] || fail setup "run as root: the check installs packages and starts an engine"
[ -x "$PY" ] || fail setup "no .venv: run make install first"

# -- engine ------------------------------------------------------------------------------
stage engine
engine_tools
engine_start
pass engine "$ENGINE_NOTE; $(docker compose version), buildx $(docker buildx version | awk '{print $2}')"

# -- base --------------------------------------------------------------------------------
stage base
nice scripts/compose/base_image.sh "$BASE_IMAGE" "$CACHE" bookworm "$DEBIAN_MIRROR" \
    >"$LOG_DIR/base.log" 2>&1 || fail base "no base image ($LOG_DIR/base.log)"
pass base "$(tail -1 "$LOG_DIR/base.log")"

# -- images ------------------------------------------------------------------------------
stage images
rm -rf "$RUN_DIR/pip"
"$PY" scripts/compose/pip_settings.py "$RUN_DIR/pip" 2>>"$LOG_DIR/pip_settings.log" &
PIP_PID=$!
for _ in $(seq 1 50); do [ -e "$RUN_DIR/pip/ready" ] && break; sleep 0.2; done
[ -e "$RUN_DIR/pip/ready" ] || fail images "pip settings not ready ($LOG_DIR/pip_settings.log)"
MARKER=$(cat "$RUN_DIR/pip/marker")
build() {  # build TAG CONTEXT [ARGS…]: BuildKit, the host's network, the pip secrets
    local tag=$1 context=$2
    shift 2
    nice docker buildx build --load --network host --progress plain \
        --secret "id=pip_conf,src=$RUN_DIR/pip/pip_conf" \
        --secret "id=pip_ca,src=$RUN_DIR/pip/pip_ca" \
        --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$tag" "$@" "$context" \
        >"$LOG_DIR/build-${tag//[\/:]/_}.log" 2>&1 \
        || fail images "docker build $tag failed ($LOG_DIR/build-${tag//[\/:]/_}.log)"
}
build tuner-compose/postgres:15 scripts/compose/substitutes/postgres
build tuner-compose/redis:7 scripts/compose/substitutes/redis
build tuner-compose/flower:2.0 scripts/compose/substitutes/flower
build "$IMAGE" . --build-arg "TORCH_REQUIREMENT=$TORCH_REQUIREMENT"
kill "$PIP_PID" 2>/dev/null || true
wait "$PIP_PID" 2>/dev/null || true
PIP_PID=""
user=$(docker image inspect -f '{{.Config.User}}' "$IMAGE")
torch=$(docker run --rm --network none --entrypoint python "$IMAGE" -c \
    'import torch, triton; print(torch.__version__, "triton", triton.__version__)')
pass image "$IMAGE on $BASE_IMAGE as user $user: torch $torch"
# The secrets carry a random marker: it must be in neither the history nor any layer.
grep -q "$MARKER" "$RUN_DIR/pip/pip_conf" || fail secrets "the marker is not in pip_conf"
for tag in "$IMAGE" tuner-compose/flower:2.0; do
    if docker history --no-trunc "$tag" | grep -q -e "$MARKER" -e 'pip_conf,src'; then
        fail secrets "$tag: the pip settings are in its history"
    fi
    hits=$(docker save "$tag" | grep -a -c "$MARKER" || true)
    [ "$hits" = 0 ] || fail secrets "$tag: the pip settings' marker is in a layer ($hits)"
done
pass secrets "pip_conf and pip_ca (marker ${MARKER: -8}) in no layer or history of $IMAGE, tuner-compose/flower:2.0"

# -- stack -------------------------------------------------------------------------------
stage stack
for port in "$PG_PORT" "$REDIS_PORT" "$DASHBOARD_PORT" "$FLOWER_PORT"; do
    if ss -ltnH "sport = :$port" | grep -q .; then fail stack "port $port is taken"; fi
done
umask 077
{
    for name in POSTGRES_PASSWORD TUNER_MIGRATE_PASSWORD TUNER_SERVICE_PASSWORD REDIS_PASSWORD; do
        echo "$name=$("$PY" -c 'import secrets; print(secrets.token_hex(16))')"
    done
    echo "TUNER_KERNELS_DIR=./examples"
    echo "TUNER_PG_HOST_PORT=$PG_PORT"
    echo "TUNER_REDIS_HOST_PORT=$REDIS_PORT"
    echo "TUNER_DASHBOARD_HOST_PORT=$DASHBOARD_PORT"
    echo "TUNER_FLOWER_HOST_PORT=$FLOWER_PORT"
    echo "TUNER_HEARTBEAT_S=5"
} >"$RUN_DIR/check.env"
# shellcheck disable=SC1091
TUNER_SERVICE_PASSWORD=$(. "$RUN_DIR/check.env" && echo "$TUNER_SERVICE_PASSWORD")
echo "postgresql://tuner_service:$TUNER_SERVICE_PASSWORD@127.0.0.1:$PG_PORT/tuner" \
    >"$RUN_DIR/db-url"
umask 022
export TUNER_DB_URL_FILE=$RUN_DIR/db-url
STACK_UP=1
compose down -v --remove-orphans >"$LOG_DIR/compose.log" 2>&1 || true

up() {  # the stack, and the names of its two workers once both are ready
    compose up -d --no-build --scale worker-cpu=2 "${SERVICES[@]}" >>"$LOG_DIR/compose.log" 2>&1 \
        || { stack_logs; fail "$1" "compose up failed ($LOG_DIR/compose.log, stack.log)"; }
    local c name
    WORKERS=()
    for _ in $(seq 1 120); do
        WORKERS=()
        for c in "$PROJECT-worker-cpu-1" "$PROJECT-worker-cpu-2"; do
            name=$(docker logs "$c" 2>&1 | sed -n 's/.*celery.apps.worker \(\S*\) ready\..*/\1/p' | tail -1)
            [ -z "$name" ] || WORKERS+=("$name=$c")
        done
        [ ${#WORKERS[@]} -lt 2 ] || break
        sleep 1
    done
    [ ${#WORKERS[@]} -eq 2 ] || { stack_logs; fail "$1" "the two workers are not ready after 120 s"; }
    [ "$(docker inspect -f '{{.State.ExitCode}}' "$PROJECT-migrate-1")" = 0 ] \
        || fail "$1" "migrate did not exit 0"
}
up stack
running=$(compose ps --status running --format '{{.Service}}' | sort | uniq -c | awk '{print $2 "×" $1}' | paste -sd' ')
pass stack "migrate exited 0; running: $running; workers ${WORKERS[*]%%=*}"

# -- job ---------------------------------------------------------------------------------
stage job
submitted=$(compose exec -T scheduler tuner submit matmul --shape "$SHAPE" --dtype fp16 \
    --backend interpret --trials "$TRIALS" --parallel 2 --seed 0 --rep-ms 20 2>&1) \
    || fail submit "tuner submit in the scheduler container: $submitted"
JOB=$(sed -n 's/^job \([0-9]*\):.*/\1/p' <<<"$submitted")
[ -n "$JOB" ] || fail submit "no job id in: $submitted"
pass submit "job $JOB from the scheduler container (matmul $SHAPE fp16, interpreter, $TRIALS trials)"
killed=$("$PY" scripts/compose/verify.py kill-running "$JOB" 120 "${WORKERS[@]}") \
    || fail kill "no trial to kill"
read -r KILLED_TRIAL KILLED_WORKER KILLED_CONTAINER <<<"$killed"
finished=$("$PY" scripts/compose/verify.py wait-finished "$JOB" 300) || { stack_logs; fail job "job $JOB did not finish"; }
once=$("$PY" scripts/compose/verify.py exactly-once "$JOB" "$TRIALS" "$KILLED_TRIAL" "$KILLED_WORKER") \
    || fail exactly-once "see above"
pass kill "container $KILLED_CONTAINER killed (SIGKILL) while it ran trial $KILLED_TRIAL; $finished"
pass exactly-once "$once"
best_config() {  # the config `tuner best` serves from the host, only if tuned for this shape
    local out tier
    out=$(.venv/bin/tuner best matmul --shape "$SHAPE" --dtype fp16 2>"$LOG_DIR/best.err") \
        || fail "$1" "tuner best: $(head -1 "$LOG_DIR/best.err")"
    tier=$(head -1 "$LOG_DIR/best.err")
    [[ "$tier" == "tier exact"* ]] || fail "$1" "tuner best answered from no tuned config: $tier"
    grep -q BLOCK_M <<<"$out" || fail "$1" "tuner best printed no config: $out"
    CONFIG=$(tr -d ' \n' <<<"$out")
}
best_config best
BEST=$CONFIG
pass best "from the host (.venv/bin/tuner best, TUNER_DB_URL_FILE), tier exact: $BEST"

# -- restart -----------------------------------------------------------------------------
stage restart
before=$("$PY" scripts/compose/verify.py counts)
compose down >>"$LOG_DIR/compose.log" 2>&1 || fail restart "compose down failed"
[ -z "$(compose ps -a -q)" ] || fail restart "containers left after down"
up restart
after=$("$PY" scripts/compose/verify.py counts)
best_config restart
best2=$CONFIG
[ "$before" = "$after" ] || fail restart "before down: $before; after up: $after"
[ "$best2" = "$BEST" ] || fail restart "best config changed: $best2"
pass restart "down, up: $after and the same best config (volumes kept)"

# -- exposure ----------------------------------------------------------------------------
stage exposure
code=$(curl -s -o /dev/null -w '%{http_code}' -L "http://127.0.0.1:$DASHBOARD_PORT/dashboard/") || true
[ "$code" = 200 ] || fail dashboard "http://127.0.0.1:$DASHBOARD_PORT/dashboard/ answered $code"
curl -s "http://127.0.0.1:$DASHBOARD_PORT/api/studies" | grep -q "job-$JOB" \
    || fail dashboard "the dashboard's study list lacks job $JOB"
pass dashboard "http://127.0.0.1:$DASHBOARD_PORT/dashboard/ 200, lists the job's study"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FLOWER_PORT/") || true
[ "$code" = 200 ] || fail flower "http://127.0.0.1:$FLOWER_PORT/ answered $code"
pass flower "http://127.0.0.1:$FLOWER_PORT/ 200"

ids=$(compose ps -q)
bad=""
for id in $ids; do
    name=$(docker inspect -f '{{.Name}}' "$id")
    mode=$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$id")
    addrs=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$id" | tr -d ' ')
    [ "$mode" = host ] && [ -z "$addrs" ] || bad+=" ${name#/}:$mode:$addrs"
done
[ -z "$bad" ] || fail loopback "containers off host networking or with an address:$bad"
networks=$(docker network ls --format '{{.Name}}' | grep -v -x -e host -e none -e bridge || true)
[ -z "$networks" ] || fail loopback "networks created: $networks"
pids=$(for id in $ids; do docker top "$id" -eo pid | tail -n +2; done | sort -u)
listening=$(ss -ltnupH | awk '{print $5, $7}' | while read -r addr users; do
    { grep -o 'pid=[0-9]*' <<<"$users" || true; } | cut -d= -f2 | while read -r pid; do
        if grep -qx "$pid" <<<"$pids"; then echo "$addr"; fi
    done
done | sort -u)
[ -n "$listening" ] || fail loopback "no listening socket found for the stack's processes"
beyond=$(grep -v -E '^(127\.0\.0\.1|\[::1\]):' <<<"$listening" || true)
[ -z "$beyond" ] || fail loopback "listening beyond loopback: $beyond"
pass loopback "$(wc -w <<<"$ids") containers on host networking, no address, no network created; listening: $(paste -sd' ' <<<"$listening")"

root=""
for id in $ids; do
    uids=$(docker top "$id" -eo pid,uid | awk 'NR > 1 {print $2}' | sort -u | paste -sd,)
    grep -qw 0 <<<"${uids//,/ }" && root+=" $(docker inspect -f '{{.Name}}' "$id"):$uids"
done
[ -z "$root" ] || fail no-root "processes running as root:$root"
sessions=$(docker exec -u postgres "$PROJECT-postgres-1" psql -At -d tuner -c \
    "SELECT string_agg(DISTINCT usename, ',') FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
supers=$(docker exec -u postgres "$PROJECT-postgres-1" psql -At -d tuner -c \
    "SELECT count(*) FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename WHERE r.rolsuper AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()")
[ "$supers" = 0 ] || fail no-root "$supers sessions of a PostgreSQL superuser: $sessions"
[ "$sessions" = tuner_service ] || fail no-root "sessions as $sessions, not only tuner_service"
privilege=$("$PY" scripts/compose/verify.py least-privilege) || fail no-root "see above"
pass no-root "no process as uid 0 in $(wc -w <<<"$ids") containers; PostgreSQL sessions: $sessions only; $privilege"
stage ""
