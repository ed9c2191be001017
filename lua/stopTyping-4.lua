--[[
  Clears a user's typing indicator (the user sent the message or cleared the input).
  Publishes 'typing-stop' (reason explicit) only when the user was typing.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user

  Reply: {stopped 1|0, seq of the event or 0}
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, user = ARGV[6], ARGV[7]
local field = fieldOf(room, user)

local rec = settle(field)
if not rec or not rec.t then
  return { 0, 0 }
end
rec.t = nil
save(field, rec)
return { 1, publish(room, user, 'typing-stop', reasonFragment('explicit')) }
