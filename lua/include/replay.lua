--[[
  Replies that survive a resend. A client whose connection dropped before the reply arrived sends
  the same call again, with the same replay key: it gets the first run's reply, and nothing runs
  twice. Only replies a second run would not give again are kept, for the replay window.
]]
-- @include "room"
-- @include "options"
do
  local kept = rcall('GET', replayKey)
  if kept then
    return cjson.decode(kept)
  end
end

local function remember(reply)
  rcall('SET', replayKey, cjson.encode(reply), 'PX', replayWindow)
  return reply
end
