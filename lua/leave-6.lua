--[[
  Removes one connection of a user (the clean disconnect). When that was the user's last live
  connection, the user's typing stops with it and 'leave' (reason explicit) is published, or,
  with a leave grace, will be when the grace ends unless a connection comes back first.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user   ARGV[6] connection (at most 9 bytes)

  Reply: {outcome, seq of the leave or 0, its epoch or ''}; absent: no such live connection,
  removed: the user is still present, left: the leave is published, leaving: it waits for the
  grace
]]
-- @include "replay"
-- @include "presence"
local OUTCOME = outcomes('absent', 'removed', 'left', 'leaving')
local user, conn = ARGV[5], ARGV[6]

local rec = expireOverdue(user, load(user))
local slot = rec and findConnection(rec, conn)
if not slot then
  return { OUTCOME.absent, 0, '' }
end
table.remove(rec.ids, slot)
table.remove(rec.beats, slot)
if #rec.ids > 0 then
  save(user, rec)
  return remember({ OUTCOME.removed, 0, '' })
end
local inGrace, seq, epoch = lastConnectionGone(user, rec, 'explicit', now)
if inGrace then
  return remember({ OUTCOME.leaving, 0, '' })
end
return remember({ OUTCOME.left, seq, epoch })
