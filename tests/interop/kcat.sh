#!/usr/bin/env bash
# kcat (librdkafka) against ringbroker.
#
#   kcat.sh BOOTSTRAP before STATE_DIR   produce + consume checks; keeps what it read in STATE_DIR
#   kcat.sh BOOTSTRAP after  STATE_DIR   (after a broker restart) everything reads back identical
#
# Covers every codec (none gzip snappy lz4 zstd) x acks 0/1/all, keyed messages (-K:) over 3
# partitions, explicit partitions (-p), per-partition order, offsets by timestamp (-o s@ms, -Q),
# relative offsets (-o -N), -L metadata (plain and -J), and legacy produce (Produce v1/v2 with
# message-set v0/v1, as librdkafka sends to pre-0.11 brokers). One PASS/FAIL line per check.
set -uo pipefail

B=${1:?bootstrap}
PHASE=${2:?before|after}
STATE=${3:?state dir}
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="python3 $HERE/common.py"
mkdir -p "$STATE/kcat"
S="$STATE/kcat"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS kcat: $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL kcat: $*"; }
check() { # check "what" cmd...: PASS if the command succeeds (its output shown only on failure)
  local what=$1 out; shift
  if out=$("$@" 2>&1); then pass "$what"; else fail "$what: $(head -c 400 <<<"$out" | tr '\n' ' ')"; fi
}
# Runs a python checker whose PASS/FAIL lines count as ours.
pycheck() {
  local out rc
  out=$("$@" 2>&1); rc=$?
  echo "$out"
  PASSED=$((PASSED + $(grep -c '^PASS ' <<<"$out")))
  FAILED=$((FAILED + $(grep -c '^FAIL ' <<<"$out")))
  if [ $rc -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then fail "checker exited $rc: $*"; fi
}

# Every kcat run is bounded; consumers long-poll with 100 ms (kcat -e needs an empty fetch per
# partition to see the end, so the default 500 ms would only make the script slower).
KC=(timeout 30 kcat -b "$B" -X socket.timeout.ms=10000)
KCC=("${KC[@]}" -X fetch.wait.max.ms=100)
CODECS=(none gzip snappy lz4 zstd)
ACKS=(0 1 all)
N=120

# Consumes the whole topic (all partitions) to stdout as `%p %o %k %s` lines, sorted.
consume() { "${KCC[@]}" -C -t "$1" -o beginning -e -q -f '%p %o %k %s\n' | sort -k1,1n -k2,2n; }

# consume until at least $2 records are there (acks=0 sends are acknowledged before the broker
# has appended them), bounded to 10 s.
consume_n() {
  local topic=$1 want=$2 i
  for i in $(seq 1 50); do
    consume "$topic" >"$TMP/c"
    [ "$(wc -l <"$TMP/c")" -ge "$want" ] && break
    sleep 0.2
  done
  cat "$TMP/c"
}

if [ "$PHASE" = before ]; then
  P="kc$(date +%s%3N)" # topic prefix: the script can run again on the same broker
  echo "$P" >"$S/prefix"
else
  P=$(cat "$S/prefix")
fi

before() {
  check "-L: broker 0 at $B" bash -c "${KC[*]} -L | grep -q 'broker 0 at $B'"

  local topics=() checks=() c a
  for c in "${CODECS[@]}"; do for a in "${ACKS[@]}"; do topics+=("$P-$c-acks$a:3"); done; done
  topics+=($P-explicit:3 $P-times:1 $P-legacy:1)
  pycheck $PY create-topics "$B" "${topics[@]}"

  # every codec x acks, keys over 3 partitions
  for c in "${CODECS[@]}"; do
    for a in "${ACKS[@]}"; do
      local t="$P-$c-acks$a"
      awk -v n="$N" -v c="$c" -v a="$a" 'BEGIN { for (i = 0; i < n; i++) {
        pad = sprintf("%*s", 20 + (i % 9) * 20, ""); gsub(/ /, "x", pad)
        printf "key-%d:%s-%s-%06d;%s\n", i % 10, c, a, i, pad } }' >"$S/$t.expected"
      if "${KC[@]}" -P -t "$t" -K: -z "$c" -X acks="$a" -X linger.ms=20 <"$S/$t.expected" 2>"$TMP/err"; then
        pass "produce codec=$c acks=$a: $N keyed messages"
      else
        fail "produce codec=$c acks=$a: $(tail -3 "$TMP/err" | tr '\n' ' ')"
      fi
      consume_n "$t" "$N" >"$S/$t.consumed"
      checks+=("codec=$c acks=$a" "$S/$t.expected" "$S/$t.consumed" 3)
    done
  done
  pycheck $PY partitioned "${checks[@]}"

  # explicit partitions, no keys
  local p
  for p in 0 1 2; do
    seq 1 10 | sed "s/^/p$p-/" >"$TMP/in"
    check "produce -p $p: 10 messages" bash -c "${KC[*]} -P -t $P-explicit -p $p -z snappy -X acks=all <$TMP/in"
    "${KCC[@]}" -C -t $P-explicit -p "$p" -o beginning -e -q -f '%o %s\n' >"$TMP/out"
    check "consume -p $p: offsets 0..9 in order" diff <(seq 1 10 | awk -v p="$p" '{print NR-1, "p" p "-" $1}') "$TMP/out"
  done
  consume $P-explicit >"$S/$P-explicit.consumed"

  # timestamps: batch A, then mid, then batch B; s@mid must start at B
  seq 1 10 | sed 's/^/A-/' | "${KC[@]}" -P -t $P-times -p 0 -z lz4 -X acks=all
  sleep 0.05
  local mid; mid=$(date +%s%3N)
  sleep 0.05
  seq 1 10 | sed 's/^/B-/' | "${KC[@]}" -P -t $P-times -p 0 -z lz4 -X acks=all
  "${KCC[@]}" -C -t $P-times -p 0 -o "s@$mid" -e -q -f '%o %s\n' >"$TMP/out"
  check "-o s@<ms>: starts at the first message at or after the timestamp" \
    diff <(seq 1 10 | awk '{print NR+9, "B-" $1}') "$TMP/out"
  "${KC[@]}" -Q -t "$P-times:0:$mid" >"$TMP/q" 2>&1
  check "-Q timestamp lookup: offset 10" grep -q 'offset 10$' "$TMP/q"
  "${KC[@]}" -Q -t "$P-times:0:$(($(date +%s%3N) + 3600000))" >"$TMP/q" 2>&1
  check "-Q future timestamp: offset -1 (end)" grep -q 'offset -1$' "$TMP/q"
  "${KC[@]}" -Q -t "$P-times:0:-2" >"$TMP/q" 2>&1
  check "-Q earliest (-2): offset 0" grep -q 'offset 0$' "$TMP/q"
  "${KCC[@]}" -C -t $P-times -p 0 -o -3 -e -q -f '%o %s\n' >"$TMP/out"
  check "-o -3: the last three messages" diff <(printf '17 B-8\n18 B-9\n19 B-10\n') "$TMP/out"
  echo "$mid" >"$S/times.mid"
  consume $P-times >"$S/$P-times.consumed"

  # legacy produce (message set v1 with Produce v2, v0 with Produce v1), converted to v2
  local fb codecs
  for fb in 0.10.0.0 0.9.0; do
    [ $fb = 0.9.0 ] && codecs=(none gzip snappy) || codecs=(none gzip snappy lz4)
    for c in "${codecs[@]}"; do
      if printf 'lk:%s-%s-1\nlk:%s-%s-2\n' $fb $c $fb $c |
        "${KC[@]}" -P -t $P-legacy -K: -z $c -X acks=1 -X api.version.request=false -X broker.version.fallback=$fb 2>"$TMP/err"; then
        pass "legacy produce (broker.version.fallback=$fb) codec=$c"
      else
        fail "legacy produce (broker.version.fallback=$fb) codec=$c: $(tail -3 "$TMP/err" | tr '\n' ' ')"
      fi
    done
  done
  consume $P-legacy >"$S/$P-legacy.consumed"
  local want
  want=$(for fb in 0.10.0.0 0.9.0; do
    [ $fb = 0.9.0 ] && codecs=(none gzip snappy) || codecs=(none gzip snappy lz4)
    for c in "${codecs[@]}"; do printf 'lk %s-%s-1\nlk %s-%s-2\n' $fb $c $fb $c; done
  done)
  check "legacy produce: every message read back in order with its key" \
    diff <(echo "$want") <(cut -d' ' -f3- "$S/$P-legacy.consumed")
  check "legacy produce: offsets dense" diff <(seq 0 $(($(echo "$want" | wc -l) - 1))) <(cut -d' ' -f2 "$S/$P-legacy.consumed")

  # metadata
  "${KC[@]}" -L -t $P-gzip-acks1 >"$TMP/md"
  check "-L -t: 3 partitions, leader 0" bash -c "grep -q 'with 3 partitions' $TMP/md && [ \$(grep -c 'leader 0' $TMP/md) = 3 ]"
  "${KC[@]}" -L -J >"$TMP/md.json"
  check "-L -J: every created topic with its partitions" python3 - "$TMP/md.json" "${topics[@]}" <<'EOF'
import json, sys
md = json.load(open(sys.argv[1]))
got = {t["topic"]: len(t["partitions"]) for t in md["topics"]}
want = {n: int(p) for n, p in (s.rsplit(":", 1) for s in sys.argv[2:])}
bad = {n: (got.get(n), p) for n, p in want.items() if got.get(n) != p}
ok = not bad and len(md["brokers"]) == 1
print("" if ok else f"mismatch: {bad}, brokers {md['brokers']}", file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}

after() {
  local f t n=0
  for f in "$S"/*.consumed; do
    t=$(basename "$f" .consumed)
    if [ "$t" = $P-legacy ] || [ "$t" = $P-explicit ] || [ "$t" = $P-times ]; then
      consume "$t" >"$TMP/out"
    else
      consume_n "$t" "$(wc -l <"$f")" >"$TMP/out"
    fi
    if diff -q "$f" "$TMP/out" >/dev/null; then
      n=$((n + 1))
      pass "after restart: $t: $(wc -l <"$f") messages identical (partition, offset, key, value)"
    else
      fail "after restart: $t differs: $(diff "$f" "$TMP/out" | head -3 | tr '\n' ' ')"
    fi
  done
  [ "$n" -gt 0 ] || fail "after restart: no topic recorded in $S"
  local mid; mid=$(cat "$S/times.mid")
  "${KC[@]}" -Q -t "$P-times:0:$mid" >"$TMP/q" 2>&1
  check "after restart: -Q timestamp lookup still offset 10" grep -q 'offset 10$' "$TMP/q"
  "${KCC[@]}" -C -t $P-times -p 0 -o "s@$mid" -e -q -f '%o %s\n' >"$TMP/out"
  check "after restart: -o s@<ms> still starts at offset 10" bash -c "head -1 $TMP/out | grep -q '^10 B-1$'"
  echo "after" | "${KC[@]}" -P -t $P-explicit -p 1 -X acks=all
  "${KCC[@]}" -C -t $P-explicit -p 1 -o -1 -e -q -f '%o %s\n' >"$TMP/out"
  check "after restart: append continues at the old end (offset 10)" grep -qx '10 after' "$TMP/out"
}

if [ "$PHASE" = before ]; then before; else after; fi
echo "== kcat done: pass=$PASSED fail=$FAILED"
[ "$FAILED" -eq 0 ]
