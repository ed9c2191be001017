--[[
  Marks a present user as typing, or refreshes the mark. Publishes 'typing-start' only when the
  user was not typing. A user who is not present, or has no live connection (in the leave
  grace), cannot type: nothing changes.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "replay"
-- @include "presence"
local OUTCOME = outcomes('absent', 'refreshed', 'started')
local user = ARGV[5]

local rec = expireOverdue(user, load(user))
if not rec or rec.g then
  return { OUTCOME.absent, 0, '' }
end
local started = not rec.t
rec.t = now
save(user, rec)
if not started then
  -- The due entry and the index hold the mark's first deadline, a lower bound of this one.
  return { OUTCOME.refreshed, 0, '' }
end
rcall('ZADD', dueKey, 'LT', now + typingWindow, room)
if indexed() then
  rcall('ZADD', indexKey, 'LT', now + typingWindow, user)
end
local seq, epoch = publish(user, 'typing-start', '')
return remember({ OUTCOME.started, seq, epoch })
