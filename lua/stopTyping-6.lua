--[[
  Clears a user's typing mark (the user sent the message or cleared the input). Publishes
  'typing-stop' (reason explicit) only when the user was typing.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user

  Reply: {1 if stopped else 0, seq of the event or 0, its epoch or ''}
]]
-- @include "replay"
-- @include "members"

local user = ARGV[5]
local rec = settle(user, load(user))
if not rec or not rec.t then
  return { 0, 0, '' }
end
rec.t = nil
save(user, rec)
return remember({ 1, publish(user, 'typing-stop', reasonFragment('explicit')), epoch })
