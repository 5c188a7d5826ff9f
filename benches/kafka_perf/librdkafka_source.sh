#!/usr/bin/env bash
# Prints the directory of librdkafka's sources inside the `rdkafka-sys` crate of the given
# version, fetched with cargo (a throwaway manifest and `cargo fetch`; nothing third-party enters
# this repo). Used by build_rdkafka_performance.sh and tests/librdkafka/run.sh.
#
#   bash benches/kafka_perf/librdkafka_source.sh 4.10.0
set -euo pipefail
version="${1:?usage: librdkafka_source.sh RDKAFKA_SYS_VERSION}"
fetch="$(mktemp -d "${TMPDIR:-/tmp}/rb-librdkafka-fetch.XXXXXX")"
trap 'rm -rf "$fetch"' EXIT
mkdir -p "$fetch/src"
cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "rb-librdkafka-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rdkafka-sys = { version = "=$version", default-features = false }

[workspace]
TOML
: >"$fetch/src/lib.rs"
printf '[librdkafka-source] cargo fetch rdkafka-sys =%s\n' "$version" >&2
(cd "$fetch" && timeout 600 cargo fetch --quiet)
manifest="$(cd "$fetch" && cargo metadata --format-version 1 --locked 2>/dev/null |
    python3 -c 'import json,sys
m=json.load(sys.stdin)
print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="rdkafka-sys"))')"
echo "$(dirname "$manifest")/librdkafka"
