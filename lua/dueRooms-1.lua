--[[
  Rooms of a bucket with something due now, the longest overdue first: the sweeper then settles
  each with sweepRoom, whose keys it can name, so no script touches a key it was not given.

  KEYS[1] due   zset of the bucket: room -> lower bound of its next deadline
  ARGV[1] most rooms to return

  Reply: {how long the first room has been due in ms (0 if none), rooms...}
]]
-- @include "clock"
local due = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]), 'WITHSCORES')
local reply = { due[2] and now - tonumber(due[2]) or 0 }
for i = 1, #due, 2 do
  reply[#reply + 1] = due[i]
end
return reply
