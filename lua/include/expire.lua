-- Removing members and expiring what is due, with the events that say so.
-- Needs: bucket, events.

-- The member leaves the room: a typing indicator never outlives presence, so it stops first.
local function removeMember(field, rec, reason)
  local room, user = splitField(field)
  if rec.t then
    publish(room, user, 'typing-stop', reasonFragment(rec.t + typingWindow <= now and 'expired' or 'left'))
  end
  rcall('HDEL', usersKey, field)
  rcall('ZREM', membersKey, field)
  rcall('ZREM', dueKey, field)
  local seq = publish(room, user, 'leave', reasonFragment(reason) .. rosterFragment(room))
  local lo, hi = roomRange(room)
  if rcall('ZLEXCOUNT', membersKey, lo, hi) == 0 then
    rcall('HDEL', seqKey, room)
  end
  return seq
end

-- Drops the record's expired connections and typing, publishing the overdue events. Returns the
-- record, or nil if the member thereby left, and what it did: connections dropped, leaves,
-- typing stops.
local function expire(field, rec)
  local dropped, stops = 0, 0
  for conn, beat in pairs(rec.c) do
    if beat + presenceWindow <= now then
      rec.c[conn] = nil
      dropped = dropped + 1
    end
  end
  if next(rec.c) == nil then
    if rec.t then
      stops = 1
    end
    removeMember(field, rec, 'expired')
    return nil, dropped, 1, stops
  end
  if rec.t and rec.t + typingWindow <= now then
    local room, user = splitField(field)
    rec.t = nil
    publish(room, user, 'typing-stop', reasonFragment('expired'))
    stops = 1
  end
  save(field, rec)
  return rec, dropped, 0, stops
end

-- The member's live record after anything overdue in it has been expired and announced.
local function settle(field)
  local rec = load(field)
  if rec and deadline(rec) <= now then
    rec = expire(field, rec)
  end
  return rec
end
