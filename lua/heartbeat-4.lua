--[[
  Refreshes one connection of a user in a room. If the user had no live connection, publishes
  'join' (after the overdue 'leave' of stale connections never announced, so events alternate).
  A new state, when given and different, is stored and published as 'update' (or rides the join).

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user   ARGV[8] connection
  ARGV[9] state JSON, or '' to keep the stored state

  Reply: {joined 1|0, seq of the event published or 0}
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, user, conn, state = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local field = fieldOf(room, user)

local rec = settle(field)
local joined = rec == nil
if joined then
  rec = { c = {}, j = now }
end
rec.c[conn] = now
local changed = state ~= '' and state ~= rec.s
if changed then
  rec.s = state
end
save(field, rec)
refreshTtl()

if joined then
  rcall('ZADD', membersKey, 0, field)
  return { 1, publish(room, user, 'join', stateFragment(rec) .. rosterFragment(room)) }
end
if changed then
  return { 0, publish(room, user, 'update', stateFragment(rec)) }
end
return { 0, 0 }
