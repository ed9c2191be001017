--[[
  Replaces a present user's state (a small JSON object: status, device, ...). Publishes one
  'update' when it changed; never a leave and a join.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user   ARGV[6] state JSON

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "replay"
-- @include "presence"
local OUTCOME = outcomes('absent', 'unchanged', 'updated')
local user, state = ARGV[5], ARGV[6]

local rec = expireOverdue(user, load(user))
if not rec then
  return { OUTCOME.absent, 0, '' }
end
if rec.s == state then
  return { OUTCOME.unchanged, 0, '' }
end
rec.s = state
save(user, rec)
local seq, epoch = publish(user, 'update', stateFragment(state))
return remember({ OUTCOME.updated, seq, epoch })
