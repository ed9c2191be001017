#!lua flags=no-writes
--[[
  A bucket's counts, as the scripts that change its rooms keep them, and its sweep backlog.

  KEYS[1..2], ARGV[1..2]: see include/bucket.lua

  Reply: {rooms, users, connections, typing, rooms due now, how long the oldest has been due in
  ms or -1, the bucket's epoch or '', its event counter}
]]
-- @include "bucket"
local c = rcall('HMGET', seqKey, 'rooms', 'users', 'conns', 'typing', 'epoch', 'n')
local oldest = rcall('ZRANGE', dueKey, 0, 0, 'WITHSCORES')[2]
local lag = oldest and tonumber(oldest) <= now and now - tonumber(oldest) or -1
return {
  tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0, tonumber(c[4]) or 0,
  rcall('ZCOUNT', dueKey, '-inf', now), lag, c[5] or '', tonumber(c[6]) or 0,
}
