--[[
  Where a member's record lives. A room keeps its records in its own hash ('<tag>:u:<room>')
  until it reaches SHARD_FROM members; from then on in SHARDS hashes ('<tag>:s<k>:<room>', k
  from 0), a member's by a hash of its id, until it is back to SHARD_UNTIL members. Its meta
  stays in its own hash and says which (see meta). Redis then reads a big room a few hashes at a
  time, each whole (HGETALL: a roster page), where one hash of thousands of fields could only be
  read whole (milliseconds) or scanned (HSCAN copies every field, several times the cost).
]]
-- @include "meta"
-- @include "shardSizes"
local Shards = defineModule('Shards', function(bucket)
  local rcall, tag, Meta, SHARDS_OF_BIG = redis.call, bucket.tag, bucket.Meta, bucket.SHARDS_OF_BIG
  local function key(r, k)
    return tag .. ':s' .. k .. ':' .. r.name
  end

  -- Every shard's key, in order (k = 0 first).
  local function keys(r)
    local all = {}
    for k = 0, SHARDS_OF_BIG - 1 do
      all[k + 1] = key(r, k)
    end
    return all
  end

  -- One byte into an FNV-1a hash, modulo 2^32 (the prime, 2^24 + 403, multiplied in two parts
  -- that doubles hold exactly).
  local function fnv(h, byte)
    h = bit.bxor(h, byte) % 4294967296
    return ((h % 256) * 16777216 + h * 403) % 4294967296
  end

  -- A member's shard: a hash of its id's first and last 8 bytes (all of a shorter one).
  local function shardOf(user)
    local n, h = #user, 2166136261
    for i = 1, math.min(n, 8) do
      h = fnv(h, string.byte(user, i))
    end
    for i = math.max(9, n - 7), n do
      h = fnv(h, string.byte(user, i))
    end
    return h % SHARDS_OF_BIG
  end

  -- The shard holding `user`'s record in a sharded room.
  local function keyOf(r, user)
    return key(r, shardOf(user))
  end

  -- Records by their hash: {key, {user, record, ...}} for each hash that holds one of `flat`
  -- ({user, record, ...}).
  local function byHash(r, flat)
    if not Meta.sharded(r) then
      return { { r.key, flat } }
    end
    local groups, list = {}, {}
    for i = 1, #flat, 2 do
      local k = shardOf(flat[i])
      local group = groups[k]
      if not group then
        group = { key(r, k), {} }
        groups[k], list[#list + 1] = group, group
      end
      local fields = group[2]
      fields[#fields + 1], fields[#fields + 2] = flat[i], flat[i + 1]
    end
    return list
  end

  -- The records of `users` (false for none), in their order.
  local function readRecords(r, users)
    if not Meta.sharded(r) then
      return rcall('HMGET', r.key, unpack(users))
    end
    local flat = {}
    for i, user in ipairs(users) do
      flat[2 * i - 1], flat[2 * i] = user, i
    end
    local raws = {}
    for _, group in ipairs(byHash(r, flat)) do
      local names, at = {}, {}
      for i = 1, #group[2], 2 do
        names[#names + 1], at[#at + 1] = group[2][i], group[2][i + 1]
      end
      local got = rcall('HMGET', group[1], unpack(names))
      for i, raw in ipairs(got) do
        raws[at[i]] = raw
      end
    end
    return raws
  end

  local function writeRecords(r, flat)
    for _, group in ipairs(byHash(r, flat)) do
      rcall('HSET', group[1], unpack(group[2]))
    end
  end

  return {
    keys = keys,
    keyOf = keyOf,
    readRecords = readRecords,
    writeRecords = writeRecords,
  }
end)
