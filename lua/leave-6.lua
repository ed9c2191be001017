--[[
  Removes one connection of a user (the clean disconnect). When that was the user's last live
  connection, the user's typing stops with it and 'leave' (reason explicit) is published, or,
  with a leave grace, will be when the grace ends unless a connection comes back first.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user   ARGV[6] connection (at most 9 bytes)

  Reply: {outcome, seq of the leave or 0, its epoch or ''}; outcome 0: no such live connection,
  1: connection removed and the user is still present, 2: the user left, 3: the user's leave
  waits for the grace
]]
-- @include "replay"
-- @include "members"

local user, conn = ARGV[5], ARGV[6]
local rec = settle(user, load(user))
local slot = rec and findConnection(rec, conn)
if not slot then
  return { 0, 0, '' }
end
table.remove(rec.ids, slot)
table.remove(rec.beats, slot)
if #rec.ids == 0 then
  local inGrace, seq = lastConnectionGone(user, rec, 'explicit', now)
  return remember(inGrace and { 3, 0, '' } or { 2, seq, epoch })
end
save(user, rec)
return remember({ 1, 0, '' })
