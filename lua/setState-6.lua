--[[
  Replaces a present user's state (a small JSON object: status, device, ...). Publishes one
  'update' when it changed; never a leave and a join.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user   ARGV[6] state JSON

  Reply: {outcome, seq of the event or 0, its epoch or ''}; outcome 0: user not present,
  1: unchanged, 2: updated
]]
-- @include "replay"
-- @include "members"

local user, state = ARGV[5], ARGV[6]
local rec = settle(user, load(user))
if not rec then
  return { 0, 0, '' }
end
if rec.s == state then
  return { 1, 0, '' }
end
rec.s = state
save(user, rec)
return remember({ 2, publish(user, 'update', stateFragment(state)), epoch })
