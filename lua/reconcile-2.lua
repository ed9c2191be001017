--[[
  Counts a bucket's rooms anew, a chunk of its due index per call (every room with members has
  a due entry): after a room's keys expired unannounced, or after data was lost, the bucket's
  counts are brought back to the truth. A call with generation 0 starts a reconcile; the others
  pass the generation and cursor the previous one returned. While it runs, every change to a
  room it counted also changes its own counts (see meta), so when the last chunk is done they are
  exact and become the bucket's. A newer reconcile supersedes an older one.

  KEYS[1..2], ARGV[1..4]: see include/bucket.lua; derives the keys of the rooms it counts.
  ARGV[6] generation, or 0 to start   ARGV[7] cursor ('0' to start)   ARGV[8] rooms per call

  Reply: {generation, next cursor ('0' when done), 1 if it was superseded else 0}
]]
-- @include "meta"
local COUNTS_OF = { 'rooms', 'users', 'conns', 'typing' }
local gen = tonumber(ARGV[6])
if gen == 0 then
  gen = rcall('HINCRBY', seqKey, 'rg', 1)
  rcall('HSET', seqKey, 'ra', gen, 'rrooms', 0, 'rusers', 0, 'rconns', 0, 'rtyping', 0)
elseif tonumber(rcall('HGET', seqKey, 'ra')) ~= gen then
  return { gen, '0', 1 }
end

local scan = rcall('ZSCAN', dueKey, ARGV[7], 'COUNT', tonumber(ARGV[8]))
local entries = scan[2]
for i = 1, #entries, 2 do
  local r = openRoom(entries[i])
  local m = Meta.read(r)
  if m and m.gen ~= gen then
    m.gen = gen
    Meta.write(r)
    rcall('HINCRBY', seqKey, 'rrooms', 1)
    rcall('HINCRBY', seqKey, 'rusers', m.users)
    rcall('HINCRBY', seqKey, 'rconns', m.conns)
    rcall('HINCRBY', seqKey, 'rtyping', m.typing)
  end
end
if scan[1] == '0' then
  local fields = {}
  for _, name in ipairs(COUNTS_OF) do
    fields[#fields + 1], fields[#fields + 2] = name, rcall('HGET', seqKey, 'r' .. name)
  end
  rcall('HSET', seqKey, unpack(fields))
  rcall('HDEL', seqKey, 'ra', 'rrooms', 'rusers', 'rconns', 'rtyping')
end
return { gen, scan[1], 0 }
