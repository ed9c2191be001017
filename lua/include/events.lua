--[[
  Publishing. Every event takes the bucket's next sequence number and records it as its room's
  last (in the room's meta), so a subscriber checks each event's prev against the last event it
  applied. Numbers are unique within an epoch (see epoch).
  When the log is on, the event is also appended to the bucket's stream, in the same script.
  What goes on the room's channel ends with a "mac" field: the SHA-1 of the epoch's key, the
  message before that field (closed), and the key again. The key is never published;
  subscribers read it (an engine call) and check every message, so that nothing that can merely
  publish to Redis can put an event in a room.
  A hidden room (its name starts with byte 1: the invisible connections of a room, see
  heartbeat) publishes nothing, and its members' joins and leaves make no user change.
  With userStatus on, a visible member's join and leave also go to the bucket's user changes ('<tag>:ux', a stream),
  in the same call: what the users script applies to their status (see users), whoever drains
  them, so that no change of a user's rooms is lost with the process that made it.
]]
-- @include "options"
-- @include "meta"
-- @include "members"
-- @include "epoch"
local Events = defineModule('Events', function(bucket)
  local rcall, Meta, Members, Epoch = redis.call, bucket.Meta, bucket.Members, bucket.Epoch
  -- Publishes one event of room `r`; `extra` is its type's own fields as ',"name":value...'.
  -- Returns its seq, epoch and the epoch's ordinal.
  local function publish(r, user, kind, extra)
    if string.byte(r.name, 1) == 1 then
      return
    end
    local epoch, ordinal, key = Epoch.current()
    local m = Meta.read(r)
    local prev = m.seq
    local seq = rcall('HINCRBY', bucket.seq, 'n', 1)
    m.seq = seq
    Meta.write(r)
    -- Written out, not cjson.encode of a table: that table cost an event more than the rest of
    -- its JSON. Strings a caller gave are escaped by cjson; the others are names, hex and integers.
    local event = '{"v":2,"type":"' .. kind .. '","room":' .. cjson.encode(r.name) .. ',"user":' ..
      cjson.encode(user) .. ',"at":' .. bucket.now .. ',"epoch":"' .. epoch .. '","seq":' .. seq ..
      ',"prev":' .. prev .. extra .. '}'
    if bucket.logLength > 0 then
      local id = rcall('XADD', bucket.log, 'MAXLEN', '~', bucket.logLength, '*', 'event', event)
      event = string.sub(event, 1, -2) .. ',"log":"' .. id .. '"}'
    end
    local mac = redis.sha1hex(key .. event .. key)
    rcall('SPUBLISH', bucket.tag .. ':room:' .. r.name, string.sub(event, 1, -2) .. ',"mac":"' .. mac .. '"}')
    return seq, epoch, ordinal
  end

  -- A visible member of `r` joined ('+') or left ('-') with the event numbered `seq` in `epoch`:
  -- the change, for the user's status, with when it happened (a leave: when the member's last
  -- connection ended, which the grace or an expiry can precede by a while). The epoch goes as its
  -- start time (its id after the replication id's 8 characters, hex: see epoch), which orders
  -- epochs even when a bucket's counter and ordinals were lost with its data.
  local function userChange(r, user, sign, at, seq, epoch)
    if seq and bucket.userStatus then
      local changes = bucket.tag .. ':ux'
      local change = sign .. '\n' .. at .. '\n' .. string.sub(epoch, 9) .. '\n' .. seq .. '\n' .. user .. '\n' .. r.name
      rcall('XADD', changes, '*', 'c', change)
      rcall('PEXPIRE', changes, bucket.keyTtl)
    end
  end

  -- One encode for the list (cjson writes an empty table as {}).
  local function usersJson(users)
    return #users > 0 and cjson.encode(users) or '[]'
  end

  -- ',"roster":[...],"count":n' for join and leave events: at most eventRosterLimit users.
  local function rosterFragment(r)
    local users, count = Members.some(r, bucket.eventRosterLimit)
    return ',"roster":' .. usersJson(users) .. ',"count":' .. count
  end

  local function stateFragment(state)
    return ',"state":' .. (state ~= '' and state or 'null')
  end

  local function reasonFragment(reason)
    return ',"reason":"' .. reason .. '"'
  end

  return {
    publish = publish,
    userChange = userChange,
    rosterFragment = rosterFragment,
    stateFragment = stateFragment,
    reasonFragment = reasonFragment,
  }
end)
