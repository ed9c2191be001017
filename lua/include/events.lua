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
-- @include "record"
local eventRosterLimit, logLength, leaveGrace
do
  local a, b, c = string.match(ARGV[4], '^(%d+) (%d+) (%d+) %d+$')
  eventRosterLimit, logLength, leaveGrace = tonumber(a), tonumber(b), tonumber(c)
end
local channelPrefix = string.sub(roomKey, 1, tagEnd) .. ':room:'
local epoch

local function currentEpoch()
  if epoch then
    return epoch
  end
  -- A promotion gives a master a new replid, even one demoted and failed back without a restart.
  local info = rcall('INFO', 'server', 'replication')
  local node = string.match(info, 'run_id:(%x+)') .. ':' .. string.match(info, 'master_replid:(%x+)')
  local stored = rcall('HMGET', seqKey, 'epoch', 'node')
  if stored[1] and stored[2] == node then
    epoch = stored[1]
  else
    -- The process's random run_id and the time to the microsecond (no two scripts of one
    -- process run in the same one): unique whoever starts it, wherever.
    local t = rcall('TIME')
    epoch = string.sub(node, 1, 8) .. string.format('%x%05x', tonumber(t[1]), tonumber(t[2]))
    rcall('HSET', seqKey, 'epoch', epoch, 'node', node)
  end
  return epoch
end

local function publish(user, kind, extra)
  local e = currentEpoch()
  local prev = tonumber(rcall('HGET', roomKey, '')) or 0
  local seq = rcall('HINCRBY', seqKey, 'n', 1)
  rcall('HSET', roomKey, '', seq)
  local head = cjson.encode({ v = 2, type = kind, room = room, user = user, at = now, epoch = e, seq = seq, prev = prev })
  local event = string.sub(head, 1, -2) .. extra .. '}'
  if logLength > 0 then
    local id = rcall('XADD', logKey, 'MAXLEN', '~', logLength, '*', 'event', event)
    event = string.sub(event, 1, -2) .. ',"log":"' .. id .. '"}'
  end
  rcall('SPUBLISH', channelPrefix .. room, event)
  return seq
end

local function usersJson(users)
  local quoted = {}
  for i, user in ipairs(users) do
    quoted[i] = cjson.encode(user)
  end
  return '[' .. table.concat(quoted, ',') .. ']'
end

-- The room's members as this call last read them: a call announcing several leaves (a sweep)
-- reads them once, and keeps the list up to date with its own joins and leaves.
local members

local function knownMembers()
  if not members then
    members = {}
    for _, field in ipairs(rcall('HKEYS', roomKey)) do
      if field ~= '' then
        members[#members + 1] = field
      end
    end
  end
  return members
end

local function memberJoined(user)
  if members then
    members[#members + 1] = user
  end
end

local function memberLeft(user)
  for i, member in ipairs(members or {}) do
    if member == user then
      table.remove(members, i)
      return
    end
  end
end

-- ',"roster":[...],"count":n' for join and leave events: at most eventRosterLimit users.
local function rosterFragment()
  local count = memberCount()
  local users = {}
  if eventRosterLimit > 0 and count > 0 then
    if count > eventRosterLimit and indexed() then
      users = rcall('ZRANGE', indexKey, 0, eventRosterLimit - 1)
    else
      users = { unpack(knownMembers(), 1, math.min(count, eventRosterLimit)) }
    end
  end
  return ',"roster":' .. usersJson(users) .. ',"count":' .. count
end

local function stateFragment(state)
  return ',"state":' .. (state ~= '' and state or 'null')
end

local function reasonFragment(reason)
  return ',"reason":"' .. reason .. '"'
end
