#!lua
--[[
  Replaces a present user's state (a small JSON object: status, device, ...). Publishes one
  'update' when it changed; never a leave and a join.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the room's keys.
  ARGV[3] room   ARGV[4] user   ARGV[5] state JSON

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "presence"
-- @include "reply"
local OUTCOME = outcomes('absent', 'unchanged', 'updated')
local resent = keptReply()
if resent then
  return resent
end
local r, user, state = openRoom(ARGV[3]), ARGV[4], ARGV[5]

local rec = Presence.expireOverdue(r, user, Presence.load(r, user))
if not rec then
  return { OUTCOME.absent, 0, '' }
end
if rec.s == state then
  return { OUTCOME.unchanged, 0, '' }
end
rec.s = state
Presence.save(r, user, rec)
return remember(OUTCOME.updated, Events.publish(r, user, 'update', Events.stateFragment(state)))
