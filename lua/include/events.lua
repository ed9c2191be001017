--[[
  Publishing. Every event takes the bucket's next sequence number and records it as its room's
  last (in the room's meta), so a subscriber checks each event's prev against the last event it
  applied. Numbers are unique within an epoch (see epoch).
  When the log is on, the event is also appended to the bucket's stream, in the same script.
  What goes on the room's channel ends with a "mac" field: the SHA-1 of the epoch's key, the
  message before that field (closed), and the key again. The key is never published;
  subscribers read it (an engine call) and check every message, so that nothing that can merely
  publish to Redis can put an event in a room.
]]
-- @include "bucket"
-- @include "options"
-- @include "meta"
-- @include "members"
-- @include "epoch"
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
