-- latency.lua: round-trip latency through quicsteer, read from pktgen's
-- latency probes. pktgen stamps a probe packet (IPv4/UDP to port 1028, 72
-- octets) every QS_LATENCY_US microseconds; quicsteer steers it like any
-- non-QUIC UDP (by 4-tuple hash) to an owner whose reflect action sends it
-- back, and pktgen times its return. Whatever else the port sends (a capture
-- loaded with -s, or pktgen's single-packet stream) is the background load.
--
--   QS_RATE=20 QS_DURATION=10 pktgen ... -s 0:results/pktgen.pcap -f scripts/pktgen/latency.lua
-- Settings (environment variables, defaults in brackets):
--   QS_PORT        port that sends and receives (reflect)   [0]
--   QS_RATE        background rate, % of link (0: probes only) [10]
--   QS_DURATION    seconds                                  [10]
--   QS_LATENCY_US  microseconds between probes, up to 1000000 [1000]
--   QS_LINK_WAIT   seconds to wait for the link             [60]
--   QS_QUIT        1: quit pktgen when done, also after an error [0]
-- (or at the pktgen prompt: lua 'qs_settings = {QS_RATE = 0}' then script ...)

-- The shared helpers live next to this script.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local qs = dofile(here .. "qs_common.lua")
local number_setting, wait_for_link = qs.number_setting, qs.wait_for_link

qs.run(function()
  local port = math.floor(number_setting("QS_PORT", 0, 0, 63))
  local rate = number_setting("QS_RATE", 10, 0, 100)
  local duration = math.floor(number_setting("QS_DURATION", 10, 1, 86400))
  local interval_us = math.floor(number_setting("QS_LATENCY_US", 1000, 1, 1000000))
  local link_wait = number_setting("QS_LINK_WAIT", 60, 1, 3600)
  local p = tostring(port)

  local function latency() return pktgen.pktStats(p)[port].latency end

  wait_for_link(port, link_wait)
  pktgen.stop(p)
  -- pktgen times a probe only if its payload is where it left it: the default
  -- fill pattern and untagged IPv4 (quicsteer's reflect leaves both alone).
  pktgen.pattern(p, "abc")
  pktgen.latency(p, "rate", interval_us)
  pktgen.latency(p, "enable")
  -- Probes ride on the transmit loop, which runs at any rate (pktgen turns 0
  -- into 0.01%: next to no background load).
  pktgen.set(p, "rate", rate)
  pktgen.clr()
  pktgen.delay(200)

  print(string.format("latency: port %d, probe every %d us, background at %.3g%% of link, %d s", port, interval_us,
                      rate, duration))
  print("  second   probes   skipped    min us    avg us    max us")
  pktgen.start(p)
  for second = 1, duration do
    pktgen.delay(1000)
    local l = latency()
    print(string.format("  %6d %8d %9d %9.1f %9.1f %9.1f", second, l.num_pkts, l.num_skipped, l.min_us, l.avg_us, l.max_us))
  end
  pktgen.stop(p)
  pktgen.delay(500)
  local l = latency()
  pktgen.latency(p, "disable")
  if l.num_pkts == 0 then
    print("latency: no probe came back: is quicsteer running with action: reflect on this port?")
  else
    print(string.format("latency: %d probes, round trip min %.1f us, avg %.1f us, max %.1f us (%d out of order or lost)",
                        l.num_pkts, l.min_us, l.avg_us, l.max_us, l.num_skipped))
  end
end)
