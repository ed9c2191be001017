-- Publishing: every event takes the bucket's next sequence number and records it as the room's
-- last, so a subscriber can check each event's prev against what it applied before.
-- Needs: bucket.

local function publish(room, user, kind, extra)
  local prev = tonumber(rcall('HGET', seqKey, room)) or 0
  local seq = rcall('HINCRBY', seqKey, '', 1)
  rcall('HSET', seqKey, room, seq)
  local head = cjson.encode({ v = 1, type = kind, room = room, user = user, at = now, seq = seq, prev = prev })
  rcall('SPUBLISH', channelPrefix .. room, string.sub(head, 1, -2) .. extra .. '}')
  return seq
end

-- ',"roster":[...],"count":n' for join and leave events, at most eventRosterLimit users.
local function rosterFragment(room)
  local lo, hi = roomRange(room)
  local fields = rcall('ZRANGEBYLEX', membersKey, lo, hi, 'LIMIT', 0, eventRosterLimit)
  local count = #fields
  if count >= eventRosterLimit then
    count = rcall('ZLEXCOUNT', membersKey, lo, hi)
  end
  local skip = #room + 2
  for i, field in ipairs(fields) do
    fields[i] = cjson.encode(string.sub(field, skip))
  end
  return ',"roster":[' .. table.concat(fields, ',') .. '],"count":' .. count
end

local function stateFragment(rec)
  return ',"state":' .. (rec.s or 'null')
end

local function reasonFragment(reason)
  return ',"reason":"' .. reason .. '"'
end
