#!/usr/bin/env bash
# The health watcher of one quicsteer instance: runs in the instance's
# network namespace and keeps the route that FRR's `network VIP/32` needs
# (import-check) there only while quicsteer is healthy, so the instance
# announces the service address exactly then.
#
# Healthy: the process in PIDFILE is alive and its HTTP endpoint answers
# GET /healthz with 200; a quicsteer without /healthz (404) is taken as
# healthy while GET /metrics answers 200. Not healthy either while DRAINFILE
# exists (a drain: withdraw first, stop later). Every change is one line in
# LOG: "T_NS announce" or "T_NS withdraw REASON".
#
# usage: scaleout_watch.sh VIP PIDFILE DRAINFILE LOG [URL] [INTERVAL_S]
#   URL default http://127.0.0.1:9100 (telemetry.prometheus_listen of the
#   profile), INTERVAL_S default 0.1
set -u
vip=${1:?VIP}; pidfile=${2:?PIDFILE}; drainfile=${3:?DRAINFILE}; log=${4:?LOG}
url=${5:-http://127.0.0.1:9100}; interval=${6:-0.1}

# health: prints why quicsteer is not healthy, or nothing.
health() {
  [ -e "$drainfile" ] && { echo draining; return; }
  local pid code
  pid=$(cat "$pidfile" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { echo "not running"; return; }
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 0.5 "$url/healthz")
  if [ "$code" = 404 ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 0.5 "$url/metrics")
    [ "$code" = 200 ] || echo "/metrics answered $code"
  elif [ "$code" != 200 ]; then
    echo "/healthz answered $code"
  fi
}

announced=0
ip route del blackhole "$vip/32" 2>/dev/null
while :; do
  why=$(health)
  if [ -z "$why" ] && [ "$announced" -eq 0 ]; then
    ip route replace blackhole "$vip/32" && announced=1 && echo "$(date +%s%N) announce" >>"$log"
  elif [ -n "$why" ] && [ "$announced" -eq 1 ]; then
    ip route del blackhole "$vip/32" && announced=0 && echo "$(date +%s%N) withdraw $why" >>"$log"
  fi
  sleep "$interval"
done
