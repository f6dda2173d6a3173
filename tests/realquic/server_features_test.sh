#!/usr/bin/env bash
# quicsteer-server's less common CIDs, end to end in a network namespace of
# its own (loopback only): a Retry (--retry) and a preferred address
# (--preferred-address) on a wildcard listener. gtlsclient must download
# with the right sha256 after the Retry, move to the preferred address, and
# every CID the server issued (first SCID, Retry SCID, preferred address CID,
# NEW_CONNECTION_ID) must decode to the server's ID with quicsteer-cid.
# Random datagrams sent first must be counted and change nothing.
#
# usage: server_features_test.sh BUILD_DIR     (as root; exit 77 = skipped)
set -uo pipefail
BUILD=$(cd "${1:?usage: server_features_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/realquic/topology.sh"
qsrq_need_netns
NS=qsrqsf$$
WORK=$(mktemp -d /tmp/qsrq-sf.XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
  ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$NS" && ip -n "$NS" link set lo up || exit 1
mkdir -p "$WORK/www" "$WORK/dl"
head -c 1048576 /dev/urandom >"$WORK/www/f1m"
ip netns exec "$NS" "$BUILD/quicsteer-server" --profile "$SRC/configs/realquic.yaml" --server-id 0a01 \
  --listen 0.0.0.0:4433 --retry --preferred-address 127.0.0.2:4433 --htdocs "$WORK/www" \
  --log "$WORK/server0.jsonl" >"$WORK/server.out" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q 'listening on' "$WORK/server.out" && break; sleep 0.05; done
# Garbage first: it must be counted, answered at most with a stateless reset
# or a version negotiation, and leave the server serving.
ip netns exec "$NS" python3 - <<'PY'
import os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rnd = os.urandom
for d in [b"", b"\x00", b"\x40" + rnd(40), b"\xc0\x00\x00\x00\x01\xff" + rnd(30), b"\xc0\xba\xba\xba\xba\x08" + rnd(1200),
          b"\xe0\x00\x00\x00\x01\x08" + rnd(8) + b"\x00" + rnd(20), b"\x80" + rnd(3)] + [rnd(n) for n in range(1, 300, 7)]:
    s.sendto(d, ("127.0.0.1", 4433))
PY
ip netns exec "$NS" timeout 30 gtlsclient -q --exit-on-all-streams-close --timeout=10s --download="$WORK/dl" \
  127.0.0.1 4433 https://localhost/f1m >"$WORK/client.out" 2>&1
kill -TERM "$server"; wait "$server"; server=
failed=0
fail() { echo "FAILED: $*"; failed=1; }
cat "$WORK/server.out"
[ "$(sha256sum <"$WORK/www/f1m")" = "$(sha256sum <"$WORK/dl/f1m" 2>/dev/null)" ] || fail "download differs"
grep -q '"kind":"retry"' "$WORK/server0.jsonl" || fail "no Retry SCID was minted"
grep -q '"kind":"preferred_address"' "$WORK/server0.jsonl" || fail "no preferred address CID was minted"
grep -q '"event":"path_validation".*"result":"success"' "$WORK/server0.jsonl" ||
  fail "the client did not move to the preferred address"
grep -q ' 1 retries' "$WORK/server.out" || fail "the server did not count its Retry"
grep -Eq '([1-9][0-9]*) packets for unknown CIDs' "$WORK/server.out" || fail "the garbage was not counted"
grep -Eq ' [1-9][0-9]* undecodable' "$WORK/server.out" || fail "no datagram was counted undecodable"
python3 "$SRC/tests/realquic/realquic_check.py" cids "$WORK" --cid-tool "$BUILD/quicsteer-cid" --cr 1 --sid-len 2 \
  --nonce-len 14 --key 72656171756963207175696373746565 || failed=1
[ $failed -eq 0 ] && echo "server features: passed"
exit $failed
