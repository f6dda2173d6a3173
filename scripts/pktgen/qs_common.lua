-- qs_common.lua: what every quicsteer pktgen script needs; loaded with
--   local qs = dofile(<this folder> .. "qs_common.lua")
local qs = {}

-- A setting comes from the table qs_settings when the pktgen prompt set one
-- (lua 'qs_settings = {QS_RATE = 25}'), else from the environment.
function qs.number_setting(name, default, min, max)
  local text = type(qs_settings) == "table" and qs_settings[name] or os.getenv(name)
  if text == nil or text == "" then return default end
  local value = tonumber(text)
  if value == nil or value < min or value > max then
    error(string.format("%s=%s: expected a number in [%s, %s]", name, tostring(text), min, max))
  end
  return value
end

-- pktgen may start (and run a script) before quicsteer has connected.
function qs.wait_for_link(port, seconds)
  for _ = 1, seconds * 10 do
    local state = pktgen.linkState(tostring(port))[port]
    if state ~= nil and string.find(state, "UP", 1, true) then return end
    pktgen.delay(100)
  end
  error(string.format("port %d: link still down after %d s (is quicsteer running?)", port, seconds))
end

return qs
