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
-- @include "bucket"
local META = '>I6I4I4I4I4B'
local SEQ, USERS, CONNS, TYPING, GEN, SHARDS = 1, 2, 3, 4, 5, 6
local COUNTS = { [USERS] = 'users', [CONNS] = 'conns', [TYPING] = 'typing' }

-- A meta as stored (or false) as a table indexed by SEQ, USERS, ..., or false.
local function parseMeta(raw)
  if not raw then
    return false
  end
  local m = { sunpack(META, raw) }
  m[SHARDS + 1] = nil -- unpack's next position
  return m
end

-- The room's meta, or nil when the room has no members.
local function readMeta(r)
  if r.meta == nil then
    r.meta = parseMeta(rcall('HGET', r.key, ''))
  end
  return r.meta or nil
end

local function writeMeta(r)
  local m = r.meta
  rcall('HSET', r.key, '', spack(META, m[SEQ], m[USERS], m[CONNS], m[TYPING], m[GEN], m[SHARDS]))
end

-- The generation of the reconcile in progress in this bucket, or 0.
local reconciling
local function activeReconcile()
  reconciling = reconciling or tonumber(rcall('HGET', seqKey, 'ra')) or 0
  return reconciling
end

-- Adds to the bucket's count `name` (and a reconcile's, when it counted the room already).
local function addToBucket(r, name, delta)
  rcall('HINCRBY', seqKey, name, delta)
  local gen = activeReconcile()
  if gen ~= 0 and r.meta and r.meta[GEN] == gen then
    rcall('HINCRBY', seqKey, 'r' .. name, delta)
  end
end

-- The room's counts change by these deltas, and so do its bucket's.
local function adjust(r, users, conns, typing)
  local m = readMeta(r)
  local deltas = { [USERS] = users, [CONNS] = conns, [TYPING] = typing }
  for field, delta in pairs(deltas) do
    if delta ~= 0 then
      m[field] = m[field] + delta
      addToBucket(r, COUNTS[field], delta)
    end
  end
  writeMeta(r)
end

-- A room gets its first member: a new chain of events (the room's members may have vanished
-- unannounced with the safety-net expiry, so no event may claim to follow its last one).
local function createRoom(r)
  r.meta = { 0, 0, 0, 0, activeReconcile(), 0 }
  writeMeta(r)
  addToBucket(r, 'rooms', 1)
end
