--[[
  Replaces a present user's state (a small JSON object: status, device, ...). Publishes one
  'update' when it changed; never a leave and a join.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user   ARGV[8] state JSON

  Reply: {outcome, seq of the event or 0}; outcome 0: user not present, 1: unchanged, 2: updated
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, user, state = ARGV[6], ARGV[7], ARGV[8]
local field = fieldOf(room, user)

local rec = settle(field)
if not rec then
  return { 0, 0 }
end
if rec.s == state then
  return { 1, 0 }
end
rec.s = state
save(field, rec)
return { 2, publish(room, user, 'update', stateFragment(rec)) }
