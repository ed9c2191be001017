--[[
  Publishing. Every event takes the bucket's next sequence number and records it as its room's
  last (in the room's meta), so a subscriber checks each event's prev against the last event it
  applied. Numbers are unique within an epoch. An epoch belongs to the Redis process that started
  it, as master of one replication history (its run_id and master_replid): a script that finds
  the counter owned by another (after a restart, a failover or a failback, a slot migration) may
  see a counter that lags numbers already published, and starts a new epoch before publishing.
  Each epoch of the bucket gets the next ordinal 'k'; the last EPOCHS_KEPT are kept as 'e<k>', so
  a kept reply names its epoch in two bytes (see replay).
  When the log is on, the event is also appended to the bucket's stream, in the same script.
  What goes on the room's channel ends with a "mac" field: the SHA-1 of the epoch's key, the
  message before that field (closed), and the key again. The key ('mk') is made with the epoch
  from what only Redis knows (its run_id and replication id, the time to the microsecond) and is
  never published; subscribers read it (an engine call) and check every message, so that nothing
  that can merely publish to Redis can put an event in a room.
]]
-- @include "bucket"
-- @include "options"
-- @include "meta"
-- @include "members"
local EPOCHS_KEPT = 16

-- The bucket's epoch, its ordinal and its key, started here if this process does not own it;
-- read once per call.
local currentEpoch
do
  local epoch, ordinal, key
  currentEpoch = function()
    if epoch then
      return epoch, ordinal, key
    end
    -- A promotion gives a master a new replid, even one demoted and failed back without a restart.
    local info = rcall('INFO', 'server', 'replication')
    local node = string.match(info, 'run_id:(%x+)') .. ':' .. string.match(info, 'master_replid:(%x+)')
    local stored = rcall('HMGET', seqKey, 'epoch', 'node', 'k', 'mk')
    if stored[1] and stored[2] == node and stored[4] then
      epoch, ordinal, key = stored[1], tonumber(stored[3]), stored[4]
    else
      -- The process's random run_id and the time to the microsecond (no two scripts of one
      -- process run in the same one): unique whoever starts it, wherever.
      local t = rcall('TIME')
      epoch = string.sub(node, 1, 8) .. string.format('%x%05x', tonumber(t[1]), tonumber(t[2]))
      ordinal = (tonumber(stored[3]) or 0) % 65535 + 1
      key = redis.sha1hex(node .. ':' .. t[1] .. ':' .. t[2] .. ':' .. seqKey)
      rcall('HSET', seqKey, 'epoch', epoch, 'node', node, 'k', ordinal, 'e' .. ordinal, epoch, 'mk', key)
      rcall('HDEL', seqKey, 'e' .. (ordinal - EPOCHS_KEPT))
    end
    return epoch, ordinal, key
  end
end

-- The epoch of an ordinal kept in the bucket, or '' once forgotten.
local function epochOf(ordinal)
  return ordinal == 0 and '' or rcall('HGET', seqKey, 'e' .. ordinal) or ''
end

-- Publishes one event of room `r`; `extra` is its type's own fields as ',"name":value...'.
-- Returns its seq, epoch and the epoch's ordinal.
local function publish(r, user, kind, extra)
  local epoch, ordinal, key = currentEpoch()
  local m = readMeta(r)
  local prev = m[SEQ]
  local seq = rcall('HINCRBY', seqKey, 'n', 1)
  m[SEQ] = seq
  writeMeta(r)
  local head = cjson.encode({ v = 2, type = kind, room = r.name, user = user, at = now, epoch = epoch, seq = seq, prev = prev })
  local event = string.sub(head, 1, -2) .. extra .. '}'
  if logLength > 0 then
    local id = rcall('XADD', logKey, 'MAXLEN', '~', logLength, '*', 'event', event)
    event = string.sub(event, 1, -2) .. ',"log":"' .. id .. '"}'
  end
  local mac = redis.sha1hex(key .. event .. key)
  rcall('SPUBLISH', tag .. ':room:' .. r.name, string.sub(event, 1, -2) .. ',"mac":"' .. mac .. '"}')
  return seq, epoch, ordinal
end

local function usersJson(users)
  local quoted = {}
  for i, user in ipairs(users) do
    quoted[i] = cjson.encode(user)
  end
  return '[' .. table.concat(quoted, ',') .. ']'
end

-- ',"roster":[...],"count":n' for join and leave events: at most eventRosterLimit users.
local function rosterFragment(r)
  local users, count = someMembers(r, eventRosterLimit)
  return ',"roster":' .. usersJson(users) .. ',"count":' .. count
end

local function stateFragment(state)
  return ',"state":' .. (state ~= '' and state or 'null')
end

local function reasonFragment(reason)
  return ',"reason":"' .. reason .. '"'
end
