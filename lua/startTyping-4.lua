--[[
  Marks a present user as typing, or refreshes the mark. Publishes 'typing-start' only when the
  user was not already typing. A user who is not present cannot type: nothing changes.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user

  Reply: {outcome, seq of the event or 0}; outcome 0: user not present, 1: already typing
  (refreshed), 2: started
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, user = ARGV[6], ARGV[7]
local field = fieldOf(room, user)

local rec = settle(field)
if not rec then
  return { 0, 0 }
end
local started = rec.t == nil
rec.t = now
save(field, rec)
if started then
  return { 2, publish(room, user, 'typing-start', '') }
end
return { 1, 0 }
