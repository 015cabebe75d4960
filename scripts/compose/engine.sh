# shellcheck shell=bash
# Sourced by scripts/compose_check.sh: the container engine and its tools, installed and
# started only where missing, and stopped by the check that started them.
#
# engine_tools   installs what is missing, from Debian's archive: docker.io (dockerd, a
#                docker CLI) and debootstrap from the host's suite; the buildx and Compose
#                CLI plugins (BuildKit build secrets; Compose >= 2.24) from trixie, fetched
#                with a private apt source list (the host's lists stay as they are) and
#                installed with dpkg (they need only libc6).
# engine_start   uses the engine DOCKER_HOST (or the default socket) answers on; else starts
#                dockerd with its own data, exec and socket folders, no bridge and no
#                iptables rules: containers can only use the host's network or none.
# engine_stop    stops the dockerd engine_start started (and its containerd), nothing else,
#                and unmounts what it left mounted under its own folders.

ENGINE_DATA=${TUNER_COMPOSE_ENGINE_DATA:-/var/lib/tuner-compose/docker}
ENGINE_RUN=${TUNER_COMPOSE_RUN:-/run/tuner-compose}
ENGINE_SOCKET=$ENGINE_RUN/docker.sock
ENGINE_PID=""
ENGINE_NOTE=""
export ENGINE_NOTE
COMPOSE_MIN=2.24

_apt_install() {
    # Never start a service from a package's postinst (Debian's docker.io would start a
    # dockerd with a bridge and iptables rules): a policy-rc.d for the install only.
    local made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
        >>"$LOG_DIR/apt.log" 2>&1 \
        || { apt-get update -q >>"$LOG_DIR/apt.log" 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                    --no-install-recommends "$@" >>"$LOG_DIR/apt.log" 2>&1; } || rc=$?
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
    return $rc
}

_compose_ok() {
    local version
    version=$(docker compose version --short 2>/dev/null) || return 1
    version=${version#v}
    [ "$(printf '%s\n%s\n' "$COMPOSE_MIN" "${version%%-*}" | sort -V | head -1)" = "$COMPOSE_MIN" ]
}

_trixie_plugins() {
    # docker-buildx and docker-compose (Compose v2) from trixie: bookworm has neither.
    local apt_dir=$CACHE/apt-trixie
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/debs"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s trixie main\n' \
        "$DEBIAN_MIRROR" >"$apt_dir/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
                -o "Dir::State::Lists=$apt_dir/lists")
    apt-get "${opts[@]}" update -q >>"$LOG_DIR/apt.log" 2>&1
    (cd "$apt_dir/debs" && rm -f ./*.deb \
        && apt-get "${opts[@]}" download docker-buildx docker-compose >>"$LOG_DIR/apt.log" 2>&1)
    dpkg -i "$apt_dir"/debs/docker-buildx_*.deb "$apt_dir"/debs/docker-compose_*.deb \
        >>"$LOG_DIR/apt.log" 2>&1
}

engine_tools() {
    local missing=()
    command -v docker >/dev/null || missing+=(docker.io)
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ ${#missing[@]} -gt 0 ]; then
        command -v apt-get >/dev/null || fail tools "missing ${missing[*]} and no apt-get"
        [ "$(id -u)" = 0 ] || fail tools "missing ${missing[*]}: run as root to install them"
        _apt_install "${missing[@]}" || fail tools "apt-get install ${missing[*]} failed ($LOG_DIR/apt.log)"
        INSTALLED+=("${missing[@]}")
    fi
    if ! docker buildx version >/dev/null 2>&1 || ! _compose_ok; then
        [ "$(id -u)" = 0 ] || fail tools "docker buildx and docker compose >= $COMPOSE_MIN are needed"
        _trixie_plugins || fail tools "installing docker-buildx, docker-compose failed ($LOG_DIR/apt.log)"
        INSTALLED+=(docker-buildx docker-compose)
        _compose_ok || fail tools "docker compose is older than $COMPOSE_MIN"
    fi
}

engine_start() {
    if [ -z "${TUNER_COMPOSE_OWN_ENGINE:-}" ] && docker info >/dev/null 2>&1; then
        ENGINE_NOTE="existing engine at ${DOCKER_HOST:-the default socket} (not started here)"
        return 0
    fi
    command -v dockerd >/dev/null || fail engine "dockerd is missing"
    mkdir -p "$ENGINE_DATA" "$ENGINE_RUN/exec"
    chmod 700 "$ENGINE_RUN"
    export DOCKER_HOST=unix://$ENGINE_SOCKET
    if docker info >/dev/null 2>&1; then
        fail engine "a dockerd already listens on $ENGINE_SOCKET, not started by this check"
    fi
    dockerd --data-root "$ENGINE_DATA" --exec-root "$ENGINE_RUN/exec" \
        --pidfile "$ENGINE_RUN/dockerd.pid" --host "$DOCKER_HOST" \
        --bridge=none --iptables=false --ip6tables=false --ip-forward=false \
        --ip-masq=false --userland-proxy=false >"$LOG_DIR/dockerd.log" 2>&1 &
    ENGINE_PID=$!
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$ENGINE_PID" 2>/dev/null || fail engine "dockerd exited ($LOG_DIR/dockerd.log)"
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || fail engine "dockerd did not answer in 30 s ($LOG_DIR/dockerd.log)"
    ENGINE_NOTE="dockerd $(docker version -f '{{.Server.Version}}') started (pid $ENGINE_PID, data $ENGINE_DATA, --bridge=none --iptables=false)"
}

engine_stop() {
    [ -n "$ENGINE_PID" ] || return 0
    kill -TERM "$ENGINE_PID" 2>/dev/null || return 0
    for _ in $(seq 1 60); do
        kill -0 "$ENGINE_PID" 2>/dev/null || { ENGINE_PID=""; engine_unmount; return 0; }
        sleep 0.5
    done
    echo "warning: dockerd (pid $ENGINE_PID) still running after 30 s; killing it" >&2
    kill -KILL "$ENGINE_PID" 2>/dev/null || true
    wait "$ENGINE_PID" 2>/dev/null || true
    ENGINE_PID=""
    engine_unmount
}

engine_unmount() {
    # What dockerd leaves mounted when it exits (its default network namespace under the
    # exec root, its data root as a private mount): unmounted, deepest first.
    local target
    findmnt -rn -o TARGET | grep -E "^($ENGINE_RUN/exec|$ENGINE_DATA)(/|$)" | sort -r \
        | while read -r target; do
            umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true
        done
}
