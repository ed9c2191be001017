--[[
  Rooms of a bucket with something due now, the longest overdue first: the sweeper then settles
  each with sweepRoom, whose keys it can name, so no script touches a key it was not given.

  KEYS[1] due   zset of the bucket: room -> lower bound of its next deadline
  ARGV[1] most rooms to return

  Reply: rooms
]]
-- @include "clock"

return redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]))
