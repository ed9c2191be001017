#!lua flags=allow-oom
--[[
  Expires what is due in a bucket's rooms (or in one room): connections past the presence
  window, typing marks past the typing window, leave graces that ended. Publishes one 'leave'
  (reason expired, or the reason the grace was started with) per member who thereby left and
  one 'typing-stop' per expired mark, then rewrites each room's due entry with its exact next
  deadline (or drops it with the emptied room). Concurrent calls never announce an expiry twice:
  each member is settled atomically. At most `batch` members are expired and `rooms` rooms
  visited per call, so Redis is never blocked for long: the reply says when more is due.
  A room that fails (a record no script wrote) is passed over, so that it cannot keep its
  bucket's other rooms from being swept, and the reply says why it failed.
  A room of up to INDEX_FROM members is read whole; a bigger one through its index, whose entries
  are lower bounds: a member found not expired gets its exact deadline back. A room whose keys
  expired unannounced (the safety net) loses its due entry; its counts are a reconcile's to mend.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the keys of the rooms it sweeps.
  ARGV[3] a room, or '' for the bucket's rooms due now, the longest overdue first
  ARGV[4] batch: most members to expire   ARGV[5] most rooms to visit
  ARGV[6] how long the calling sweeper pauses between passes, ms (0: none said; see stall)

  Reply: {connections dropped, leaves, typing stops, 1 if more is due now else 0, how long the
  first room visited had been due (ms), rooms visited, the first failure's message or ''}
]]
-- @include "presence"
-- @include "replay"
-- A kept sweep: three entries, each with the rooms visited as its index and more as its outcome,
-- whose seqs (48 bits) hold the connections dropped, the leaves and the typing stops.
do
  local resent = Replay.found()
  if resent then
    local rooms, more = unpack(resent[1])
    return { resent[1][3], resent[2][3], resent[3][3], more, 0, rooms, '' }
  end
end
local batch, roomLimit = tonumber(ARGV[4]), tonumber(ARGV[5])
Stall.sweeping(tonumber(ARGV[6]))

local names, lag = {}, 0
local due = ARGV[3] == '' and rcall('ZRANGE', dueKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, roomLimit, 'WITHSCORES')
  or { ARGV[3], rcall('ZSCORE', dueKey, ARGV[3]) }
for i = 1, #due, 2 do
  if due[i + 1] and tonumber(due[i + 1]) <= now then
    names[#names + 1] = due[i]
    lag = math.max(lag, now - tonumber(due[i + 1]))
  end
end

local dropped, leaves, stops, expired = 0, 0, 0, 0
local function expireCounted(r, user, rec)
  local live, d, l, s = Presence.expire(r, user, rec)
  dropped, leaves, stops, expired = dropped + d, leaves + l, stops + s, expired + 1
  return live
end

-- The earliest deadline of a room without an index, expiring up to the batch on the way: the
-- members due in the order of their ids, however the room's records are stored (see shards).
local function scanRoom(r)
  local users, raws = Members.read(r)
  local earliest, due = nil, {}
  for i, user in ipairs(users) do
    local at = Record.packedDeadline(raws[i])
    if at <= now then
      due[#due + 1] = i
    elseif not earliest or at < earliest then
      earliest = at
    end
  end
  table.sort(due, function(a, b)
    return users[a] < users[b]
  end)
  for _, i in ipairs(due) do
    local at = Record.packedDeadline(raws[i])
    if expired < batch then
      local rec = expireCounted(r, users[i], Record.decode(raws[i]))
      at = rec and Record.deadline(rec)
    end
    if at and (not earliest or at < earliest) then
      earliest = at
    end
  end
  return earliest
end

-- Expires what is due in one room; returns its next deadline, or nil once it is gone.
local function sweepRoom(r)
  if not Meta.read(r) then
    -- Gone unannounced: its keys expired (no sweeper ran for a key TTL), or data was lost.
    rcall('ZREM', dueKey, r.name)
    rcall('DEL', r.index)
    return nil
  end
  local earliest
  if Members.indexed(r) then
    for _, user in ipairs(rcall('ZRANGE', r.index, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch - expired)) do
      local rec = Presence.load(r, user)
      if rec and Record.deadline(rec) <= now then
        rec = expireCounted(r, user, rec)
      end
      if rec then
        -- XX: an index dropped meanwhile (the room shrank) must not come back with one entry.
        rcall('ZADD', r.index, 'XX', Record.deadline(rec), user)
      else
        rcall('ZREM', r.index, user)
      end
    end
    if Members.indexed(r) then
      earliest = tonumber(rcall('ZRANGE', r.index, 0, 0, 'WITHSCORES')[2])
    end
  end
  if not earliest and Meta.read(r) then
    earliest = scanRoom(r)
  end
  if earliest then
    rcall('ZADD', dueKey, earliest, r.name)
  elseif Meta.read(r) then
    Members.dropRoom(r)
  end
  return earliest
end

local more, settled, failure = 0, 0, ''
for _, name in ipairs(names) do
  if expired >= batch then
    more = 1
    break
  end
  local ok, earliest = pcall(sweepRoom, openRoom(name))
  if not ok then
    failure = failure ~= '' and failure or (type(earliest) == 'table' and earliest.err or tostring(earliest))
  else
    settled = settled + 1
    if earliest and earliest <= now then
      more = 1
    end
  end
end
-- More rooms may be due than were listed; failing ones alone are not worth another call.
if ARGV[3] == '' and #names == roomLimit and settled > 0 then
  more = 1
end
if expired > 0 then
  for _, count in ipairs({ dropped, leaves, stops }) do
    Replay.keep(#names, more, count, 0)
  end
  Replay.save()
end
return { dropped, leaves, stops, more, lag, #names, failure }
