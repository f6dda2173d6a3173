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
--   QS_RATE      transmit rate, percent of the link speed, 0 < r <= 100  [10]
--   QS_DURATION  seconds to transmit                              [10]
--   QS_LINK_WAIT seconds to wait for the link (quicsteer) to come up [60]
--   QS_QUIT      1: quit pktgen when done (for scripted runs)     [0]
-- (or at the pktgen prompt: lua 'qs_settings = {QS_RATE = 25}' then script scripts/pktgen/replay.lua)

-- A setting comes from the table qs_settings when the pktgen prompt set one
-- (lua 'qs_settings = {QS_RATE = 25}'), else from the environment.
local function number_setting(name, default, min, max)
  local text = type(qs_settings) == "table" and qs_settings[name] or os.getenv(name)
  if text == nil or text == "" then return default end
  local value = tonumber(text)
  if value == nil or value < min or value > max then
    error(string.format("%s=%s: expected a number in [%s, %s]", name, tostring(text), min, max))
  end
  return value
end

-- pktgen may start (and run this script) before quicsteer has connected.
local function wait_for_link(port, seconds)
  for _ = 1, seconds * 10 do
    local state = pktgen.linkState(tostring(port))[port]
    if state ~= nil and string.find(state, "UP", 1, true) then return end
    pktgen.delay(100)
  end
  error(string.format("port %d: link still down after %d s (is quicsteer running?)", port, seconds))
end

local port = math.floor(number_setting("QS_PORT", 0, 0, 63))
local rx_port = math.floor(number_setting("QS_RX_PORT", port, 0, 63))
local rate = number_setting("QS_RATE", 10, 0.001, 100)
local duration = number_setting("QS_DURATION", 10, 1, 86400)
local link_wait = number_setting("QS_LINK_WAIT", 60, 1, 3600)
local quit = number_setting("QS_QUIT", 0, 0, 1) == 1
local tx, rx = tostring(port), tostring(rx_port)

local function stats(p, kind) return pktgen.portStats(tostring(p), kind)[p] end

pktgen.screen("off")
wait_for_link(port, link_wait)
wait_for_link(rx_port, link_wait)
pktgen.stop(tx)
pktgen.set(tx, "rate", rate)
pktgen.clr()
pktgen.delay(200)

print(string.format("replay: port %d -> quicsteer -> port %d at %.3g%% of link for %d s", port, rx_port, rate,
                    duration))
print("  second      tx pps      rx pps   tx Mbit/s   rx Mbit/s")
pktgen.start(tx)
for second = 1, duration do
  pktgen.delay(1000)
  local t, r = stats(port, "rate"), stats(rx_port, "rate")
  print(string.format("  %6d %11d %11d %11d %11d", second, t.pkts_tx, r.pkts_rx, t.mbits_tx, r.mbits_rx))
end
pktgen.stop(tx)
pktgen.delay(500)  -- let what is still in quicsteer's rings come back

local sent, received = stats(port, "port").opackets, stats(rx_port, "port").ipackets
local lost = sent - received
print(string.format("replay: sent %d, received %d, lost %d (%.4f%%), average %.0f pps sent", sent, received, lost,
                    sent > 0 and 100 * lost / sent or 0, sent / duration))
if quit then pktgen.quit() else pktgen.screen("on") end
