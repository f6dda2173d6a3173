-- replay.lua: replay a quicgen capture through quicsteer at a set rate for a
-- set time, printing the rates each second and the totals at the end.
--
-- pktgen (23.06, DPDK 22.11) loads the capture with -s PORT:FILE, which puts
-- the port in pcap mode; this script only sets the rate and runs it:
--   QS_PORT=0 QS_RATE=25 QS_DURATION=10 pktgen ... -s 0:results/pktgen.pcap -f scripts/pktgen/replay.lua
-- Settings (environment variables, defaults in brackets):
--   QS_PORT      pktgen port that transmits                       [0]
--   QS_RX_PORT   pktgen port that receives what comes back        [QS_PORT] (reflect: the same port;
--                forward: the port cabled to quicsteer's tx_port)
--   QS_RATE      transmit rate, percent of the port's link speed, 0 < r <= 100  [10]
--   QS_DURATION  seconds to transmit                              [10]
--   QS_LINK_WAIT seconds to wait for the link (quicsteer) to come up [60]
--   QS_QUIT      1: quit pktgen when done, also after an error    [0]
-- (or at the pktgen prompt: lua 'qs_settings = {QS_RATE = 25}' then script scripts/pktgen/replay.lua)
--
-- The last line is "replay: sent N, received M, lost K (P%), S s, X pps sent, Y pps received",
-- from pktgen's port counters read once they have settled, over wall-clock time.

-- The shared helpers live next to this script.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local qs = dofile(here .. "qs_common.lua")
local number_setting = qs.number_setting

qs.run(function()
  local port = math.floor(number_setting("QS_PORT", 0, 0, 63))
  local rx_port = math.floor(number_setting("QS_RX_PORT", port, 0, 63))
  local rate = number_setting("QS_RATE", 10, 0.001, 100)
  local duration = number_setting("QS_DURATION", 10, 1, 86400)
  local link_wait = number_setting("QS_LINK_WAIT", 60, 1, 3600)
  local tx = tostring(port)

  qs.wait_for_link(port, link_wait)
  qs.wait_for_link(rx_port, link_wait)
  pktgen.stop(tx)
  pktgen.set(tx, "rate", rate)
  pktgen.clr()
  pktgen.delay(200)

  print(string.format("replay: port %d -> quicsteer -> port %d at %.3g%% of link for %d s", port, rx_port, rate,
                      duration))
  print("  second      tx pps      rx pps   (pktgen's once-a-second counters)")
  local started = qs.now()
  pktgen.start(tx)
  local second = 0
  while qs.now() - started < duration do
    pktgen.delay(math.max(10, math.min(1000, math.floor((duration - (qs.now() - started)) * 1000))))
    second = second + 1
    local t = pktgen.portStats(tx, "rate")[port]
    local r = pktgen.portStats(tostring(rx_port), "rate")[rx_port]
    print(string.format("  %6d %11d %11d", second, t.pkts_tx, r.pkts_rx))
  end
  pktgen.stop(tx)
  local elapsed = qs.now() - started
  -- What is still in quicsteer's rings and tickets comes back; then the
  -- counters are read once fresh.
  local sent = qs.settled_port_stats(port).opackets
  local received = qs.settled_port_stats(rx_port).ipackets
  local lost = sent - received
  print(string.format("replay: sent %d, received %d, lost %d (%.4f%%), %.2f s, %.0f pps sent, %.0f pps received",
                      sent, received, lost, sent > 0 and 100 * lost / sent or 0, elapsed, sent / elapsed,
                      received / elapsed))
end)
