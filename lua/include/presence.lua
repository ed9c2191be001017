--[[
  Members joining, expiring and leaving, with the events and counts that say so: the transitions
  every script of a room shares. `r` is a room (openRoom).
]]
-- @include "codec"
-- @include "meta"
-- @include "members"
-- @include "events"
local Presence = defineModule('Presence', function(bucket)
  local rcall, now, presenceWindow, typingWindow = redis.call, bucket.now, bucket.presenceWindow, bucket.typingWindow
  local Record, Meta, Shards, Members, Events = bucket.Record, bucket.Meta, bucket.Shards, bucket.Members, bucket.Events
  -- The hash holding `user`'s record in room `r`.
  local function recordKey(r, user)
    return Meta.sharded(r) and Shards.keyOf(r, user) or r.key
  end

  -- The safety net: the room's keys expire keyTtl after the last refresh (see heartbeat); a
  -- shard's with its members' (a shard whose members all went silent goes with them).
  local function refreshTtl(r, user)
    local keyTtl = bucket.keyTtl
    rcall('PEXPIRE', r.key, keyTtl)
    if Meta.sharded(r) then
      rcall('PEXPIRE', recordKey(r, user), keyTtl)
    end
    -- A room known to have no index (a join looked) has none to refresh.
    if r.indexed ~= false then
      rcall('PEXPIRE', r.index, keyTtl)
    end
    rcall('PEXPIRE', bucket.due, keyTtl)
  end

  local function save(r, user, rec)
    rcall('HSET', recordKey(r, user), user, Record.encode(rec))
  end

  local function load(r, user)
    local raw = rcall('HGET', recordKey(r, user), user)
    return raw and Record.decode(raw)
  end

  -- The member's typing mark, if any, stops, announced with `reason`: returns the stop's seq,
  -- epoch and ordinal, or nothing.
  local function endTyping(r, user, rec, reason)
    if rec.t then
      rec.t = nil
      Meta.adjust(r, 0, 0, -1)
      return Events.publish(r, user, 'typing-stop', Events.reasonFragment(reason))
    end
  end

  -- Why a typing mark ends with its member's presence: its window may have passed already.
  local function typingEnd(rec)
    return rec.t and rec.t + typingWindow <= now and 'expired' or 'left'
  end

  -- The member leaves, with the connections its record still holds, the last of which ended at
  -- `at`: a typing mark never outlives presence, so it stops first. Returns the leave's seq,
  -- epoch and ordinal.
  local function removeMember(r, user, rec, reason, at)
    endTyping(r, user, rec, typingEnd(rec))
    rcall('HDEL', recordKey(r, user), user)
    Meta.adjust(r, -1, -#rec.ids, 0)
    Members.listLeft(r, user)
    local wasIndexed = Members.indexed(r)
    if wasIndexed then
      rcall('ZREM', r.index, user)
    end
    local seq, epoch, ordinal =
      Events.publish(r, user, 'leave', Events.reasonFragment(reason) .. Events.rosterFragment(r))
    Events.userChange(r, user, '-', at, seq, epoch)
    local count = Members.count(r)
    if count == 0 then
      Members.dropRoom(r)
    elseif wasIndexed and count <= Members.INDEX_UNTIL then
      Members.dropIndex(r)
    end
    if count > 0 and Meta.sharded(r) and count <= bucket.SHARD_UNTIL then
      Members.reshard(r, 0)
    end
    return seq, epoch, ordinal
  end

  -- The member's last connection is gone (at `at`; the record holds none any more): its leave
  -- waits for the grace, if one is set and not already over, and its typing stops at once.
  -- Returns the record in its grace, or nil with the seq, epoch and ordinal of the leave
  -- published.
  local function lastConnectionGone(r, user, rec, reason, at)
    local leaveGrace = bucket.leaveGrace
    if leaveGrace == 0 or at + leaveGrace <= now then
      return nil, removeMember(r, user, rec, reason, at)
    end
    endTyping(r, user, rec, typingEnd(rec))
    rec.g, rec.r = at + leaveGrace, reason
    save(r, user, rec)
    rcall('ZADD', bucket.due, 'LT', rec.g, r.name)
    if Members.indexed(r) then
      rcall('ZADD', r.index, 'LT', rec.g, user)
    end
    return rec
  end

  -- Drops the record's expired connections and typing mark, publishing the overdue events.
  -- Returns the record, or nil if the member thereby left, and counts: connections dropped,
  -- leaves, stops.
  local function expire(r, user, rec)
    if rec.g then
      removeMember(r, user, rec, rec.r, rec.g - bucket.leaveGrace)
      return nil, 0, 1, 0
    end
    local ids, beats = {}, {}
    for i = 1, #rec.ids do
      if Record.expiresAt(rec.beats[i]) > now then
        ids[#ids + 1], beats[#beats + 1] = rec.ids[i], rec.beats[i]
      end
    end
    local dropped = #rec.ids - #ids
    local gone = Record.lastSeen(rec) + presenceWindow
    rec.ids, rec.beats = ids, beats
    Meta.adjust(r, 0, -dropped, 0)
    if #ids == 0 then
      local stops = rec.t and 1 or 0
      local live = lastConnectionGone(r, user, rec, 'expired', gone)
      return live, dropped, live and 0 or 1, stops
    end
    local stops = 0
    if rec.t and rec.t + typingWindow <= now then
      endTyping(r, user, rec, 'expired')
      stops = 1
    end
    save(r, user, rec)
    return rec, dropped, 0, stops
  end

  -- The member's live record, after anything overdue in it was expired and announced; nil if
  -- the member is not (or no longer) present.
  local function expireOverdue(r, user, rec)
    if rec and Record.deadline(rec) <= now then
      return (expire(r, user, rec))
    end
    return rec
  end

  local function findConnection(rec, conn)
    for i = 1, #rec.ids do
      if rec.ids[i] == conn then
        return i
      end
    end
    return nil
  end

  return {
    refreshTtl = refreshTtl,
    save = save,
    load = load,
    endTyping = endTyping,
    lastConnectionGone = lastConnectionGone,
    expire = expire,
    expireOverdue = expireOverdue,
    findConnection = findConnection,
  }
end)
