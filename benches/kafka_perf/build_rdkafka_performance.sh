#!/usr/bin/env bash
# Builds librdkafka's `examples/rdkafka_performance` into target/kafka_perf/bin/.
#
# The librdkafka sources come from the `rdkafka-sys` crate, fetched by cargo itself (a throwaway
# manifest in a temp dir + `cargo fetch`), so nothing third-party is copied into this repository:
# the build happens in a temp dir outside the repo and only the binary lands in target/.
#
#   bash benches/kafka_perf/build_rdkafka_performance.sh          # idempotent: skips if built
#   FORCE=1 bash benches/kafka_perf/build_rdkafka_performance.sh  # rebuild
#
# Env: RDKAFKA_SYS_VERSION (default 4.10.0 = librdkafka 2.12.1), BUILD_TIMEOUT (s, default 1200).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin_dir="$repo/target/kafka_perf/bin"
out="$bin_dir/rdkafka_performance"
version="${RDKAFKA_SYS_VERSION:-4.10.0}"
build_timeout="${BUILD_TIMEOUT:-1200}"

log() { printf '[build_rdkafka_performance] %s\n' "$*" >&2; }

if [[ -x "$out" && -z "${FORCE:-}" ]]; then
    log "already built: $out (FORCE=1 to rebuild)"
    exit 0
fi

# --- build dependencies (Debian) --------------------------------------------------------------
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in gcc make zlib1g-dev; do have_pkg "$p" || missing+=("$p"); done
want_zstd=1
have_pkg libzstd-dev || want_zstd=0
if ((${#missing[@]} > 0 || want_zstd == 0)); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        log "apt-get update (once), then install: ${missing[*]:-} libzstd-dev (optional)"
        timeout 300 apt-get update -qq >/dev/null
        if ((${#missing[@]} > 0)); then
            DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "${missing[@]}" >/dev/null
        fi
        if DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq libzstd-dev >/dev/null; then
            want_zstd=1
        else
            log "libzstd-dev unavailable: building without zstd"
        fi
    elif ((${#missing[@]} > 0)); then
        log "missing build dependencies: ${missing[*]} (install them, e.g. apt-get install ${missing[*]})"
        exit 1
    fi
fi

# --- fetch the rdkafka-sys crate with cargo ---------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/rb-kafka-perf-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
src="$(bash "$here/librdkafka_source.sh" "$version")"
[[ -x "$src/configure" ]] || { log "librdkafka sources not found at $src"; exit 1; }
log "librdkafka sources: $src"

# --- configure (mklove) + make, in a temp copy (the cargo registry stays untouched) ------------
cp -a "$src" "$work/librdkafka"
cd "$work/librdkafka"
conf=(--disable-ssl --disable-gssapi --disable-curl --disable-lz4-ext --enable-zlib)
if ((want_zstd)); then conf+=(--enable-zstd); else conf+=(--disable-zstd); fi
log "./configure ${conf[*]}"
timeout "$build_timeout" ./configure "${conf[@]}" >"$work/configure.log" 2>&1 ||
    { tail -40 "$work/configure.log" >&2; exit 1; }
jobs="$(nproc)"
log "make -C src (librdkafka.a), -j$jobs"
timeout "$build_timeout" make -C src -j"$jobs" librdkafka.a >"$work/make.log" 2>&1 ||
    { tail -40 "$work/make.log" >&2; exit 1; }
log "make -C examples rdkafka_performance"
timeout "$build_timeout" make -C examples rdkafka_performance >>"$work/make.log" 2>&1 ||
    { tail -40 "$work/make.log" >&2; exit 1; }

mkdir -p "$bin_dir"
install -m 0755 examples/rdkafka_performance "$out.tmp"
mv "$out.tmp" "$out"
log "built $out ($("$out" -h 2>&1 | grep -m1 'librdkafka version' || true))"
