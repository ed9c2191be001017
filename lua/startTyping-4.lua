#!lua
--[[
  Marks a present user as typing, or refreshes the mark. Publishes 'typing-start' only when the
  user was not typing. A user who is not present, or has no live connection (in the leave
  grace), cannot type: nothing changes.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the room's keys.
  ARGV[3] room   ARGV[4] user

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "presence"
-- @include "reply"
local OUTCOME = outcomes('absent', 'refreshed', 'started')
local resent = keptReply()
if resent then
  return resent
end
local r, user = openRoom(ARGV[3]), ARGV[4]

local rec = Presence.expireOverdue(r, user, Presence.load(r, user))
if not rec or rec.g then
  return { OUTCOME.absent, 0, '' }
end
local started = not rec.t
rec.t = now
Presence.save(r, user, rec)
if not started then
  -- The due entry and the index hold the mark's first deadline, a lower bound of this one.
  return { OUTCOME.refreshed, 0, '' }
end
Meta.adjust(r, 0, 0, 1)
rcall('ZADD', dueKey, 'LT', now + typingWindow, r.name)
if Members.indexed(r) then
  rcall('ZADD', r.index, 'LT', now + typingWindow, user)
end
return remember(OUTCOME.started, Events.publish(r, user, 'typing-start', ''))
