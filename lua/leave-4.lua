#!lua flags=allow-oom
--[[
  Removes one connection of a user (the clean disconnect), visible or invisible. When that was the user's last live
  connection, the user's typing stops with it and 'leave' (reason explicit) is published, or,
  with a leave grace, will be when the grace ends unless a connection comes back first.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the room's keys.
  ARGV[3] room   ARGV[4] user   ARGV[5] connection (at most 9 bytes)

  Reply: {outcome, seq of the leave or 0, its epoch or ''}; absent: no such live connection,
  removed: the user is still present, left: the leave is published, leaving: it waits for the
  grace
]]
-- @include "presence"
-- @include "reply"
local OUTCOME = outcomes('absent', 'removed', 'left', 'leaving')
local resent = keptReply()
if resent then
  return resent
end
local user, conn = ARGV[4], ARGV[5]

-- The connection, in the room, or else among its invisible connections (its hidden room, see
-- events): the caller need not know which it was.
local r, rec, slot
for _, name in ipairs({ ARGV[3], '\1' .. ARGV[3] }) do
  r = openRoom(name)
  rec = Presence.expireOverdue(r, user, Presence.load(r, user))
  slot = rec and Presence.findConnection(rec, conn)
  if slot then
    break
  end
end
if not slot then
  return { OUTCOME.absent, 0, '' }
end
table.remove(rec.ids, slot)
table.remove(rec.beats, slot)
Meta.adjust(r, 0, -1, 0)
if #rec.ids > 0 then
  Presence.save(r, user, rec)
  return remember(OUTCOME.removed)
end
local inGrace, seq, epoch, ordinal = Presence.lastConnectionGone(r, user, rec, 'explicit', now)
if inGrace then
  return remember(OUTCOME.leaving)
end
return remember(OUTCOME.left, seq, epoch, ordinal)
