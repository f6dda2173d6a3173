-- find_lossfree_rate.lua: the highest rate at which everything pktgen sends
-- through quicsteer comes back (RFC 2544 section 26.1 throughput, by binary
-- search over the rate), with quicsteer's reflect action (or forward to a port
-- cabled back to pktgen).
--
--   QS_TRIAL=5 pktgen ... -s 0:results/pktgen.pcap -f scripts/pktgen/find_lossfree_rate.lua
--
-- A trial sends at one rate for QS_TRIAL seconds, waits QS_DRAIN ms for the
-- last packets, then compares sent and received. quicsteer drops malformed and
-- non-IP packets by design, so a first trial at QS_MIN_RATE measures that
-- baseline loss ratio and a trial counts as loss-free when its loss ratio is at
-- most baseline + QS_LOSS_TOLERANCE. Generate the capture with --malformed 0
-- and the baseline is 0: strict zero loss.
-- Settings (environment variables, defaults in brackets):
--   QS_PORT, QS_RX_PORT  transmit / receive port          [0, QS_PORT]
--   QS_MIN_RATE          lowest rate tried, % of link     [1]
--   QS_MAX_RATE          highest rate tried, % of link    [100]
--   QS_PRECISION         stop when the bracket is this narrow, % [0.5]
--   QS_TRIAL             seconds per trial                [5]
--   QS_DRAIN             ms to wait after stopping        [500]
--   QS_LOSS_TOLERANCE    extra loss ratio allowed         [0]
--   QS_LINK_WAIT         seconds to wait for the link     [60]
--   QS_QUIT              1: quit pktgen when done         [0]
-- (or at the pktgen prompt: lua 'qs_settings = {QS_TRIAL = 10}' then script ...)

-- The shared helpers live next to this script.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local qs = dofile(here .. "qs_common.lua")
local number_setting, wait_for_link = qs.number_setting, qs.wait_for_link

local port = math.floor(number_setting("QS_PORT", 0, 0, 63))
local rx_port = math.floor(number_setting("QS_RX_PORT", port, 0, 63))
local min_rate = number_setting("QS_MIN_RATE", 1, 0.001, 100)
local max_rate = number_setting("QS_MAX_RATE", 100, min_rate, 100)
local precision = number_setting("QS_PRECISION", 0.5, 0.001, 100)
local trial_s = number_setting("QS_TRIAL", 5, 1, 3600)
local drain_ms = number_setting("QS_DRAIN", 500, 0, 60000)
local tolerance = number_setting("QS_LOSS_TOLERANCE", 0, 0, 1)
local link_wait = number_setting("QS_LINK_WAIT", 60, 1, 3600)
local quit = number_setting("QS_QUIT", 0, 0, 1) == 1
local tx = tostring(port)

local function stats(p) return pktgen.portStats(tostring(p), "port")[p] end

-- One trial: returns the loss ratio and the packets sent per second.
local function trial(rate)
  pktgen.stop(tx)
  pktgen.set(tx, "rate", rate)
  pktgen.delay(drain_ms)  -- nothing of the previous trial may arrive in this one
  pktgen.clr()
  pktgen.delay(200)
  pktgen.start(tx)
  pktgen.delay(trial_s * 1000)
  pktgen.stop(tx)
  pktgen.delay(drain_ms)
  local sent, received = stats(port).opackets, stats(rx_port).ipackets
  if sent == 0 then error("nothing was sent: is a capture loaded (-s " .. port .. ":FILE) and the link up?") end
  local loss = math.max(0, sent - received) / sent
  print(string.format("  rate %8.3f%%  sent %12d  received %12d  loss %.6f", rate, sent, received, loss))
  return loss, sent / trial_s
end

pktgen.screen("off")
wait_for_link(port, link_wait)
wait_for_link(rx_port, link_wait)
print(string.format("find_lossfree_rate: port %d -> quicsteer -> port %d, %d s trials, rates %.3g..%.3g%%", port,
                    rx_port, trial_s, min_rate, max_rate))
local baseline, baseline_pps = trial(min_rate)
if baseline > 0.05 then
  print(string.format("warning: %.2f%% lost even at %.3g%%: is quicsteer reflecting, and the capture mostly valid?",
                      100 * baseline, min_rate))
end
local limit = baseline + tolerance
local best, best_pps = min_rate, baseline_pps
if baseline > tolerance then
  print(string.format("baseline loss ratio %.6f (packets quicsteer drops by design) is allowed on top", baseline))
end

local loss, pps = trial(max_rate)
if loss <= limit then
  best, best_pps = max_rate, pps
else
  -- Invariant: `best` passed, `high` failed.
  local high = max_rate
  while high - best > precision do
    local mid = (best + high) / 2
    loss, pps = trial(mid)
    if loss <= limit then best, best_pps = mid, pps else high = mid end
  end
end
print(string.format("loss-free rate: %.3f%% of link, %.0f packets/s (loss ratio <= %.6f)", best, best_pps, limit))
if quit then pktgen.quit() else pktgen.screen("on") end
