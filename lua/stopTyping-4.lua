#!lua flags=allow-oom
--[[
  Clears a user's typing mark (the user sent the message or cleared the input). Publishes
  'typing-stop' (reason explicit) only when the user was typing.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the room's keys.
  ARGV[3] room   ARGV[4] user

  Reply: {outcome, seq of the event or 0, its epoch or ''}
]]
-- @include "presence"
-- @include "reply"
local OUTCOME = outcomes('notTyping', 'stopped')
local resent = keptReply()
if resent then
  return resent
end
local r, user = openRoom(ARGV[3]), ARGV[4]

local rec = Presence.expireOverdue(r, user, Presence.load(r, user))
if not rec or not rec.t then
  return { OUTCOME.notTyping, 0, '' }
end
local seq, epoch, ordinal = Presence.endTyping(r, user, rec, 'explicit')
Presence.save(r, user, rec)
return remember(OUTCOME.stopped, seq, epoch, ordinal)
