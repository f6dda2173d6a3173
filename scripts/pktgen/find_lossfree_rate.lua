-- find_lossfree_rate.lua: the highest rate at which everything pktgen sends
-- through quicsteer comes back (RFC 2544 section 26.1 throughput, by binary
-- search over the rate), with quicsteer's reflect action (or forward to a port
-- cabled back to pktgen).
--
--   QS_TRIAL=5 pktgen ... -s 0:results/pktgen.pcap -f scripts/pktgen/find_lossfree_rate.lua
--
-- A trial sends at one rate for QS_TRIAL seconds, stops, waits until pktgen's
-- port counters have settled, then compares sent and received. A trial is
-- loss-free when at most QS_LOSS_TOLERANCE of what was sent (a ratio, 0 by
-- default) did not come back. No loss is excused: a capture made with
-- quicgen --malformed 0 --client-to-server-only has nothing quicsteer drops by
-- design, and quicsteer's own statistics say why anything was dropped.
-- Settings (environment variables, defaults in brackets):
--   QS_PORT, QS_RX_PORT  transmit / receive port          [0, QS_PORT]
--   QS_MIN_RATE          lowest rate tried, % of link     [1]
--   QS_MAX_RATE          highest rate tried, % of link    [100]
--   QS_PRECISION         stop when the bracket is this narrow, % [0.5]
--   QS_TRIAL             seconds per trial                [5]
--   QS_LOSS_TOLERANCE    loss ratio allowed               [0]
--   QS_LINK_WAIT         seconds to wait for the link     [60]
--   QS_QUIT              1: quit pktgen when done, also after an error [0]
-- (or at the pktgen prompt: lua 'qs_settings = {QS_TRIAL = 10}' then script ...)
--
-- Each trial prints "trial: rate R% sent N received M loss L pps X"; the last
-- line is "loss-free rate: R% of link, X packets/s" or "loss-free rate: none".

-- The shared helpers live next to this script.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local qs = dofile(here .. "qs_common.lua")
local number_setting = qs.number_setting

qs.run(function()
  local port = math.floor(number_setting("QS_PORT", 0, 0, 63))
  local rx_port = math.floor(number_setting("QS_RX_PORT", port, 0, 63))
  local min_rate = number_setting("QS_MIN_RATE", 1, 0.001, 100)
  local max_rate = number_setting("QS_MAX_RATE", 100, min_rate, 100)
  local precision = number_setting("QS_PRECISION", 0.5, 0.001, 100)
  local trial_s = number_setting("QS_TRIAL", 5, 1, 3600)
  local tolerance = number_setting("QS_LOSS_TOLERANCE", 0, 0, 1)
  local link_wait = number_setting("QS_LINK_WAIT", 60, 1, 3600)
  local tx = tostring(port)

  -- One trial: returns the loss ratio and the packets received per second
  -- of wall-clock time.
  local function trial(rate)
    pktgen.stop(tx)
    pktgen.set(tx, "rate", rate)
    qs.settled_port_stats(rx_port)  -- nothing of the previous trial may arrive in this one
    pktgen.clr()
    pktgen.delay(200)
    local started = qs.now()
    pktgen.start(tx)
    pktgen.delay(trial_s * 1000)
    pktgen.stop(tx)
    local elapsed = qs.now() - started
    local sent = qs.settled_port_stats(port).opackets
    local received = qs.settled_port_stats(rx_port).ipackets
    if sent == 0 then error("nothing was sent: is a capture loaded (-s " .. port .. ":FILE) and the link up?") end
    local loss = math.max(0, sent - received) / sent
    print(string.format("trial: rate %8.3f%%  sent %12d  received %12d  loss %.6f  pps %.0f", rate, sent, received,
                        loss, received / elapsed))
    return loss, received / elapsed
  end

  qs.wait_for_link(port, link_wait)
  qs.wait_for_link(rx_port, link_wait)
  print(string.format("find_lossfree_rate: port %d -> quicsteer -> port %d, %d s trials, rates %.3g..%.3g%%, "
                      .. "loss ratio allowed %.6f", port, rx_port, trial_s, min_rate, max_rate, tolerance))
  local loss, pps = trial(max_rate)
  local best, best_pps
  if loss <= tolerance then
    best, best_pps = max_rate, pps
  else
    loss, pps = trial(min_rate)
    if loss > tolerance then
      print(string.format("loss-free rate: none (%.4f%% lost even at %.3g%%: see quicsteer's drop counters)",
                          100 * loss, min_rate))
      return
    end
    best, best_pps = min_rate, pps
    -- Invariant: `best` passed, `high` failed.
    local high = max_rate
    while high - best > precision do
      local mid = (best + high) / 2
      loss, pps = trial(mid)
      if loss <= tolerance then best, best_pps = mid, pps else high = mid end
    end
  end
  print(string.format("loss-free rate: %.3f%% of link, %.0f packets/s", best, best_pps))
end)
