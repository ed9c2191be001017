--[[
  Removes one connection of a user (the clean disconnect). Publishes 'leave' (reason explicit)
  only when that was the user's last live connection; the user's typing stops with it.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] user   ARGV[8] connection

  Reply: {outcome, seq of the leave or 0}; outcome 0: no such live connection,
  1: connection removed and the user is still present, 2: the user left
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, user, conn = ARGV[6], ARGV[7], ARGV[8]
local field = fieldOf(room, user)

local rec = settle(field)
if not rec or not rec.c[conn] then
  return { 0, 0 }
end
rec.c[conn] = nil
if next(rec.c) == nil then
  return { 2, removeMember(field, rec, 'explicit') }
end
save(field, rec)
return { 1, 0 }
