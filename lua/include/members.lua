--[[
  A room's members as a whole: how many (its meta's count), who (every field of the room hash
  but ''), its index of deadlines, and its teardown once empty.
]]
-- @include "meta"
-- @include "codec"
-- @include "shards"
local Members = defineModule('Members', function(bucket)
  local rcall, Meta, Shards, Record = redis.call, bucket.Meta, bucket.Shards, bucket.Record
  -- Rooms above INDEX_FROM members keep an index of deadlines; it goes at INDEX_UNTIL
  -- (hysteresis).
  local INDEX_FROM, INDEX_UNTIL = 128, 64
  local function count(r)
    local m = Meta.read(r)
    return m and m.users or 0
  end

  local function indexed(r)
    if r.indexed == nil then
      r.indexed = rcall('EXISTS', r.index) == 1
    end
    return r.indexed
  end

  -- The hashes holding the room's records (see shards).
  local function recordHashes(r)
    return Meta.sharded(r) and Shards.keys(r) or { r.key }
  end

  -- Every member's id and record, in hash order; the ids are kept for later calls (r.members),
  -- and kept up to date with this call's own joins and leaves (listJoined, listLeft).
  local function read(r)
    local users, raws = {}, {}
    for _, key in ipairs(recordHashes(r)) do
      local all = rcall('HGETALL', key)
      for i = 1, #all, 2 do
        if all[i] ~= '' then
          users[#users + 1], raws[#raws + 1] = all[i], all[i + 1]
        end
      end
    end
    r.members = { unpack(users) }
    return users, raws
  end

  local function ids(r)
    if not r.members then
      r.members = {}
      for _, key in ipairs(recordHashes(r)) do
        for _, field in ipairs(rcall('HKEYS', key)) do
          if field ~= '' then
            r.members[#r.members + 1] = field
          end
        end
      end
    end
    return r.members
  end

  -- Moves the records of a room that reached SHARD_FROM members into its shards, or those of a
  -- room back to SHARD_UNTIL into its own hash: once each way per crossing, in the call that
  -- crosses. A shard left by an earlier life of the room (its keys expired unannounced) is
  -- cleared first.
  local function reshard(r, shards)
    local users, raws = read(r)
    local from = recordHashes(r)
    r.meta.shards = shards
    Meta.write(r)
    if shards > 0 then
      rcall('DEL', unpack(Shards.keys(r)))
    end
    local flat = {}
    for i, user in ipairs(users) do
      flat[2 * i - 1], flat[2 * i] = user, raws[i]
    end
    if #users > 0 then
      if shards > 0 then
        rcall('HDEL', r.key, unpack(users))
      else
        rcall('DEL', unpack(from))
      end
      Shards.writeRecords(r, flat)
    end
    for _, key in ipairs(recordHashes(r)) do
      rcall('PEXPIRE', key, bucket.keyTtl)
    end
  end

  local function listJoined(r, user)
    if r.members then
      r.members[#r.members + 1] = user
    end
  end

  local function listLeft(r, user)
    for i, member in ipairs(r.members or {}) do
      if member == user then
        table.remove(r.members, i)
        return
      end
    end
  end

  -- The first `limit` members: by deadline from the index of a big room, else in hash order.
  local function some(r, limit)
    local n = count(r)
    if limit == 0 or n == 0 then
      return {}, n
    end
    if n > limit and indexed(r) then
      return rcall('ZRANGE', r.index, 0, limit - 1), n
    end
    return { unpack(ids(r), 1, math.min(n, limit)) }, n
  end

  -- The index of a room that passed INDEX_FROM members: each member's deadline.
  local function buildIndex(r)
    local users, raws = read(r)
    local args = {}
    for i, user in ipairs(users) do
      args[#args + 1] = Record.packedDeadline(raws[i])
      args[#args + 1] = user
    end
    rcall('ZADD', r.index, unpack(args))
    r.indexed = true
  end

  local function dropIndex(r)
    rcall('DEL', r.index)
    r.indexed = false
  end

  -- An emptied room goes with its keys and due entry; its next member starts a new chain of
  -- events.
  local function dropRoom(r)
    Meta.addToBucket(r, 'rooms', -1)
    local keys = Meta.sharded(r) and Shards.keys(r) or {}
    rcall('DEL', r.key, r.index, unpack(keys))
    rcall('ZREM', bucket.due, r.name)
    r.meta, r.indexed = false, false
  end

  return {
    INDEX_FROM = INDEX_FROM,
    INDEX_UNTIL = INDEX_UNTIL,
    count = count,
    indexed = indexed,
    read = read,
    reshard = reshard,
    listJoined = listJoined,
    listLeft = listLeft,
    some = some,
    buildIndex = buildIndex,
    dropIndex = dropIndex,
    dropRoom = dropRoom,
  }
end)
