--[[
  Publishing. Every event takes the bucket's next sequence number and records it as the room's
  last (field ''), so a subscriber checks each event's prev against the last event it applied.
  Numbers are unique within an epoch. An epoch belongs to the Redis process that started it, as
  master of one replication history (its run_id and master_replid): a script that finds the
  counter owned by another (after a restart, a failover or a failback, a slot migration) may see
  a counter that lags numbers already published, and starts a new epoch before publishing.
  When the log is on, the event is also appended to the bucket's stream, in the same script.
]]
-- @include "room"
-- @include "options"
-- @include "members"
local channel = string.sub(roomKey, 1, tagEnd) .. ':room:' .. room

-- The bucket's epoch, started here if this process does not own it; read once per call.
local currentEpoch
do
  local known
  currentEpoch = function()
    if known then
      return known
    end
    -- A promotion gives a master a new replid, even one demoted and failed back without a restart.
    local info = rcall('INFO', 'server', 'replication')
    local node = string.match(info, 'run_id:(%x+)') .. ':' .. string.match(info, 'master_replid:(%x+)')
    local stored = rcall('HMGET', seqKey, 'epoch', 'node')
    if stored[1] and stored[2] == node then
      known = stored[1]
    else
      -- The process's random run_id and the time to the microsecond (no two scripts of one
      -- process run in the same one): unique whoever starts it, wherever.
      local t = rcall('TIME')
      known = string.sub(node, 1, 8) .. string.format('%x%05x', tonumber(t[1]), tonumber(t[2]))
      rcall('HSET', seqKey, 'epoch', known, 'node', node)
    end
    return known
  end
end

-- Publishes one event of the room; `extra` is its type's own fields as ',"name":value...'.
-- Returns its seq and epoch.
local function publish(user, kind, extra)
  local epoch = currentEpoch()
  local prev = tonumber(rcall('HGET', roomKey, '')) or 0
  local seq = rcall('HINCRBY', seqKey, 'n', 1)
  rcall('HSET', roomKey, '', seq)
  local head = cjson.encode({ v = 2, type = kind, room = room, user = user, at = now, epoch = epoch, seq = seq, prev = prev })
  local event = string.sub(head, 1, -2) .. extra .. '}'
  if logLength > 0 then
    local id = rcall('XADD', logKey, 'MAXLEN', '~', logLength, '*', 'event', event)
    event = string.sub(event, 1, -2) .. ',"log":"' .. id .. '"}'
  end
  rcall('SPUBLISH', channel, event)
  return seq, epoch
end

local function usersJson(users)
  local quoted = {}
  for i, user in ipairs(users) do
    quoted[i] = cjson.encode(user)
  end
  return '[' .. table.concat(quoted, ',') .. ']'
end

-- ',"roster":[...],"count":n' for join and leave events: at most eventRosterLimit users.
local function rosterFragment()
  local users, count = someMembers(eventRosterLimit)
  return ',"roster":' .. usersJson(users) .. ',"count":' .. count
end

local function stateFragment(state)
  return ',"state":' .. (state ~= '' and state or 'null')
end

local function reasonFragment(reason)
  return ',"reason":"' .. reason .. '"'
end
