-- qs_common.lua: what every quicsteer pktgen script needs; loaded with
--   local qs = dofile(<this folder> .. "qs_common.lua")
local qs = {}

-- A setting comes from the table qs_settings when the pktgen prompt set one
-- (lua 'qs_settings = {QS_RATE = 25}'), else from the environment. Numbers
-- in decimal only ("0x10", "nan" and "inf" are refused).
function qs.number_setting(name, default, min, max)
  local text = type(qs_settings) == "table" and qs_settings[name] or os.getenv(name)
  if text == nil or text == "" then return default end
  local value = string.match(tostring(text), "^%s*[-+]?%d*%.?%d+%s*$") and tonumber(text) or nil
  if value == nil or value < min or value > max then
    error(string.format("%s=%s: expected a number in [%s, %s]", name, tostring(text), min, max))
  end
  return value
end

-- Wall-clock seconds (10 ms resolution). pktgen.delay() sleeps at least as
-- long as asked and overruns on a busy CPU, so rates are computed from this.
function qs.now()
  local f = assert(io.open("/proc/uptime", "r"))
  local t = f:read("n")
  f:close()
  return t
end

-- pktgen may start (and run a script) before quicsteer has connected.
function qs.wait_for_link(port, seconds)
  local give_up = qs.now() + seconds
  repeat
    local state = pktgen.linkState(tostring(port))[port]
    if state ~= nil and string.find(state, "UP", 1, true) then return end
    pktgen.delay(100)
  until qs.now() >= give_up
  error(string.format("port %d: link still down after %d s (is quicsteer running?)", port, seconds))
end

-- pktgen's "port" statistics are copied from the device once a second by its
-- timer, so a read right after stopping is up to a second old. This waits
-- until two reads at least 1.2 s apart agree (nothing is in flight any more
-- and the copy is fresh), at most `limit` seconds, and returns that read.
function qs.settled_port_stats(port, limit)
  local function read() return pktgen.portStats(tostring(port), "port")[port] end
  local give_up = qs.now() + (limit or 10)
  local last, last_at = read(), qs.now()
  while qs.now() < give_up do
    pktgen.delay(300)
    local s, at = read(), qs.now()
    if s.ipackets ~= last.ipackets or s.opackets ~= last.opackets then
      last, last_at = s, at
    elseif at - last_at >= 1.2 then
      return s
    end
  end
  return last
end

-- Runs main(); with QS_QUIT=1 pktgen quits afterwards whether main succeeded
-- or failed, so that a scripted run never leaves pktgen polling (holding the
-- memif socket and its file prefix). Errors are printed as "error: ...".
function qs.run(main)
  local quit = qs.number_setting("QS_QUIT", 0, 0, 1) == 1
  pktgen.screen("off")
  local ok, err = pcall(main)
  if not ok then print("error: " .. tostring(err)) end
  if quit then pktgen.quit() else pktgen.screen("on") end
end

return qs
