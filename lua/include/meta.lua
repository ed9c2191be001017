--[[
  A room's meta, its field '' (present whenever the room has members), packed:
    seq     6 bytes   the room's last event (0 before the first)
    users   4 bytes   members, those in their leave grace included
    conns   4 bytes   live connections
    typing  4 bytes   members typing
    gen     4 bytes   the last counts reconcile that counted the room (see reconcile)
    shards  1 byte    0, or how many hashes hold the records of a big room (see shards)
  and the bucket's counts in its seq hash ('rooms', 'users', 'conns', 'typing'), changed by the
  same calls that change the rooms, so reading a count never costs a read of members.
  A reconcile (after a room's keys expired unannounced, or data was lost) counts every room anew
  into 'r<count>' fields, marking each room it counted with its generation ('ra' while it runs):
  a change to a room already counted goes to both, so the new counts are exact when it ends.
]]
-- @include "modules"
local Meta = defineModule('Meta', function(bucket)
  local rcall, seqKey = redis.call, bucket.seq
  local META = '>I6I4I4I4I4B'

  -- A meta as stored as {seq, users, conns, typing, gen, shards}, or false for none.
  local function parse(raw)
    if not raw then
      return false
    end
    local seq, users, conns, typing, gen, shards = struct.unpack(META, raw)
    return { seq = seq, users = users, conns = conns, typing = typing, gen = gen, shards = shards }
  end

  -- The room's meta, or nil when the room has no members.
  local function read(r)
    if r.meta == nil then
      r.meta = parse(rcall('HGET', r.key, ''))
    end
    return r.meta or nil
  end

  -- Whether the room's records are in shards (see shards).
  local function sharded(r)
    local m = read(r)
    return m and m.shards > 0
  end

  local function write(r)
    local m = r.meta
    rcall('HSET', r.key, '', struct.pack(META, m.seq, m.users, m.conns, m.typing, m.gen, m.shards))
  end

  -- The generation of the reconcile in progress in this bucket, or 0.
  local reconciling
  local function activeReconcile()
    reconciling = reconciling or tonumber(rcall('HGET', seqKey, 'ra')) or 0
    return reconciling
  end

  -- Adds to the bucket's count `name` (and a reconcile's, when it counted the room already).
  local function addToBucket(r, name, delta)
    -- A hidden room's members are counted nowhere but in its own meta.
    if string.byte(r.name, 1) == 1 then
      return
    end
    rcall('HINCRBY', seqKey, name, delta)
    local gen = activeReconcile()
    if gen ~= 0 and r.meta and r.meta.gen == gen then
      rcall('HINCRBY', seqKey, 'r' .. name, delta)
    end
  end

  -- The room's counts change by these deltas, and so do its bucket's.
  local function adjust(r, users, conns, typing)
    local m = read(r)
    for name, delta in pairs({ users = users, conns = conns, typing = typing }) do
      if delta ~= 0 then
        m[name] = m[name] + delta
        addToBucket(r, name, delta)
      end
    end
    write(r)
  end

  -- A room gets its first member: a new chain of events (the room's members may have vanished
  -- unannounced with the safety-net expiry, so no event may claim to follow its last one).
  local function createRoom(r)
    r.meta = { seq = 0, users = 0, conns = 0, typing = 0, gen = activeReconcile(), shards = 0 }
    write(r)
    addToBucket(r, 'rooms', 1)
  end

  return {
    parse = parse,
    read = read,
    sharded = sharded,
    write = write,
    addToBucket = addToBucket,
    adjust = adjust,
    createRoom = createRoom,
  }
end)
