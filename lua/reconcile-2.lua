#!lua flags=allow-oom
--[[
  Counts a bucket's rooms anew, a batch of rooms per call: after a room's keys expired
  unannounced, were evicted, or after data was lost, the bucket's counts are brought back to the
  truth. The caller finds the rooms by their own keys (a SCAN of '<tag>:u:*'), not by the due
  index, which may have been lost with them. A call with generation 0 starts a reconcile; the
  others pass the generation it returned. While it runs, every change to a room it counted also
  changes its own counts (see meta), and a room made meanwhile is counted by the call that makes
  it, so when the caller has named every room and finishes, they are exact and become the
  bucket's. A room named twice is counted once. A newer reconcile supersedes an older one.
  A room with members missing from the due index (lost with it) is put back there, due now, so
  that a sweep announces what expired in it and writes its real deadline.

  KEYS[1..2], ARGV[1..2]: see include/bucket.lua; derives the keys of the rooms it counts.
  ARGV[3] generation, or 0 to start   ARGV[4] 1: the caller named every room, finish; else 0
  ARGV[5] and on: rooms to count (a batch)

  Reply: {generation, 1 if it was superseded else 0}
]]
-- @include "meta"
local COUNTS_OF = { 'rooms', 'users', 'conns', 'typing' }
local gen = tonumber(ARGV[3])
if gen == 0 then
  gen = rcall('HINCRBY', seqKey, 'rg', 1)
  rcall('HSET', seqKey, 'ra', gen, 'rrooms', 0, 'rusers', 0, 'rconns', 0, 'rtyping', 0)
elseif tonumber(rcall('HGET', seqKey, 'ra')) ~= gen then
  return { gen, 1 }
end

local rooms, users, conns, typing, restored = 0, 0, 0, 0, 0
for i = 5, #ARGV do
  local r = openRoom(ARGV[i])
  local m = Meta.read(r)
  -- A hidden room (see events) counts nowhere but in its own meta.
  if m and m.gen ~= gen and string.byte(r.name, 1) ~= 1 then
    m.gen = gen
    Meta.write(r)
    rooms, users, conns, typing = rooms + 1, users + m.users, conns + m.conns, typing + m.typing
  end
  if m then
    restored = restored + rcall('ZADD', dueKey, 'NX', now, r.name)
  end
end
if rooms > 0 then
  rcall('HINCRBY', seqKey, 'rrooms', rooms)
  rcall('HINCRBY', seqKey, 'rusers', users)
  rcall('HINCRBY', seqKey, 'rconns', conns)
  rcall('HINCRBY', seqKey, 'rtyping', typing)
end
-- A due index made anew here expires like the one it replaces (see presence).
if restored > 0 and rcall('PTTL', dueKey) == -1 then
  rcall('PEXPIRE', dueKey, keyTtl)
end
if ARGV[4] == '1' then
  local fields = {}
  for _, name in ipairs(COUNTS_OF) do
    fields[#fields + 1], fields[#fields + 2] = name, rcall('HGET', seqKey, 'r' .. name)
  end
  rcall('HSET', seqKey, unpack(fields))
  rcall('HDEL', seqKey, 'ra', 'rrooms', 'rusers', 'rconns', 'rtyping')
end
return { gen, 0 }
