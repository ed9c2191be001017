--[[
  Clears a user's typing mark (the user sent the message or cleared the input). Publishes
  'typing-stop' (reason explicit) only when the user was typing.

  KEYS, ARGV[1..4]: see include/room.lua
  ARGV[5] user

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "replay"
-- @include "presence"
local OUTCOME = outcomes('notTyping', 'stopped')
local user = ARGV[5]

local rec = expireOverdue(user, load(user))
if not rec or not rec.t then
  return { OUTCOME.notTyping, 0, '' }
end
local seq, epoch = endTyping(user, rec, 'explicit')
save(user, rec)
return remember({ OUTCOME.stopped, seq, epoch })
