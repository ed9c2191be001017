#!lua
--[[
  Refreshes connections of users in rooms of one bucket: one entry or a batch of them. A user's
  first live connection in a room publishes 'join' (after the overdue 'leave' of connections that
  expired unannounced, so events alternate). A new state, when given and different, is stored
  and published as 'update' (or rides the join). A user holds at most 64 connections per room: a
  new one beyond that replaces the one silent the longest, so a client reconnecting in a loop
  cannot grow the record.
  A steady heartbeat (see steadyBeat, include/record.lua) patches the connection's time in place and
  touches nothing else: no event, no index, no due entry (those hold lower bounds, which a later
  heartbeat keeps true), no count. All the steady ones go first, one HMGET and one HSET per room;
  the others then each run the whole transition, in order.

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the keys of each room named.
  ARGV[3] and on, per room: its id, n, then its n entries' users, their connections (at most 9
  bytes each), their options ('' or '<capacity>:<state JSON>'): each a run of n arguments, so
  that the users go to HMGET as they came, with no list built. A room's users are distinct (the
  engine puts a user's second entry in a later run of the same room). Capacity (0 for no limit)
  is the most members the room may hold: a user who is not present cannot join a room that holds
  as many (members in their leave grace count); nothing is written or published. A present
  user's other connections always get in. An empty state keeps the stored one.

  At maxmemory under noeviction, Redis refuses this script before it runs; the engine then runs
  its variant for the limit, the same script with `flags=allow-oom` and atLimit true: steady
  heartbeats and what expires go on, and an entry that would grow memory (a join, a new
  connection, a bigger state) is refused, changing nothing.

  Reply: 0 when every entry was refreshed and nothing was published; else {epoch of the events
  published or '', then per entry that did more: its index (from 0), outcome, seq or 0}.
]]
-- @include "record"
local atLimit = false
local COLON = 58
-- The safety net: keys live while anyone heartbeats. A join or a new connection refreshes them,
-- and so does a heartbeat whose connection's previous one lies in an earlier quarter of the TTL;
-- a connection beating at least once a presence window (at most a third of the TTL) thus refreshes
-- them at least every quarter TTL plus a window, and a steady heartbeat skips the PEXPIREs.
local quarter = keyTtl / 4

-- A single heartbeat (ARGV[3..7]: room, 1, user, connection, options) that is steady runs this
-- alone: one HMGET, one HSET, no table, no helper but steadyBeat. Any other falls through, its
-- HMGET's reply kept for the loop below.
local single
if #ARGV == 7 and (ARGV[7] == '' or sbyte(ARGV[7], -1) == COLON) then
  local key, user = tag .. ':u:' .. ARGV[3], ARGV[5]
  single = rcall('HMGET', key, '', user)
  local meta, raw = single[1], single[2]
  if meta and raw and sbyte(meta, -1) == 0 then
    local beat = steadyBeat(raw, ARGV[6], now, presenceWindow, typingWindow, quarter)
    if beat then
      rcall('HSET', key, user, beat)
      return 0
    end
  end
end

local slow = {}

-- The steady patch of the batch's entry i (in the room named `room`) into `raw`, its user's
-- record; or nil, and the entry is queued in `slow`.
local function steadyEntry(room, i, user, conn, options, raw)
  -- A capacity without a state ('<capacity>:') changes nothing for a present user.
  local beat = (options == '' or sbyte(options, -1) == COLON) and raw
    and steadyBeat(raw, conn, now, presenceWindow, typingWindow, quarter)
  if not beat then
    slow[#slow + 1] = { i, room, user, conn, options }
  end
  return beat
end

-- The steady heartbeats among a room's n entries (their runs from ARGV[first]; the batch's
-- `index` on), patched into their records (raws[k + offset] for entry k): the fields to write
-- (user, record, ...), or nil.
local function patchSteady(room, first, n, index, raws, offset)
  -- Made at its full size at once (a table that grows is reallocated at each power of two): of
  -- the arguments it is made of, those not overwritten are cleared.
  local fields, count = { unpack(ARGV, first, first + 2 * n - 1) }, 0
  for k = 1, n do
    local user = ARGV[first + k - 1]
    local conn, options = ARGV[first + n + k - 1], ARGV[first + 2 * n + k - 1]
    local beat = steadyEntry(room, index + k - 1, user, conn, options, raws[k + offset])
    if beat then
      fields[count + 1], fields[count + 2], count = user, beat, count + 2
    end
  end
  for m = count + 1, 2 * n do
    fields[m] = nil
  end
  return count > 0 and fields or nil
end

-- A big room's records are in shards (see shards): it waits for the shards' helpers below. A
-- room is opened (openRoom) only for its entries that are not steady.
local sharded = {}
local at, index, argc = 3, 0, #ARGV
while at <= argc do
  -- n is 1 in every single call: no number to parse.
  local room, n, first = ARGV[at], ARGV[at + 1] == '1' and 1 or tonumber(ARGV[at + 1]), at + 2
  local key = tag .. ':u:' .. room
  -- The meta comes with the records: its last byte says whether they are in this hash (see
  -- meta). A steady heartbeat pays one byte's read of it. A single entry (a single call) builds
  -- no lists.
  local raws = single or rcall('HMGET', key, '', unpack(ARGV, first, first + n - 1))
  single = nil
  if raws[1] and sbyte(raws[1], -1) > 0 then
    sharded[#sharded + 1] = { room, first, n, index, { unpack(ARGV, first, first + n - 1) }, raws[1] }
  elseif n == 1 then
    local beat = steadyEntry(room, index, ARGV[first], ARGV[first + 1], ARGV[first + 2], raws[2])
    if beat then
      rcall('HSET', key, ARGV[first], beat)
    end
  else
    local fields = patchSteady(room, first, n, index, raws, 1)
    if fields then
      rcall('HSET', key, unpack(fields))
    end
  end
  at, index = first + 3 * n, index + n
end
if #slow == 0 and #sharded == 0 then
  -- A bare 0, not a table: Redis takes longer to reply with a table than to run this path.
  return 0
end

-- Not steady, or in shards: everything else is defined only now, so that a steady heartbeat
-- never pays for it.
-- @include "presence"
-- @include "shards"
-- @include "replay"
-- The rooms opened, by name: a room's entries share its table (and the meta it caches).
local opened = {}
for _, room in ipairs(sharded) do
  local name, first, n, index, users, meta = unpack(room)
  local r = openRoom(name)
  r.meta, opened[name] = Meta.parse(meta), r
  local fields = patchSteady(name, first, n, index, Shards.readRecords(r, users), 0)
  if fields then
    Shards.writeRecords(r, fields)
  end
end
-- In the batch's order, so that its events take the bucket's numbers in that order.
if #sharded > 0 then
  table.sort(slow, function(x, y)
    return x[1] < y[1]
  end)
end
if #slow == 0 then
  return 0
end
local OUTCOME = outcomes('refreshed', 'joined', 'full', 'refused')
-- Keeps every record, and so every script, bounded.
local MAX_CONNECTIONS = 64

local resent = Replay.found()
if resent then
  local reply = { '' }
  for _, kept in ipairs(resent) do
    local i, outcome, seq, ordinal = unpack(kept)
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = i, outcome, seq
    if ordinal ~= 0 then
      reply[1] = Epoch.of(ordinal)
    end
  end
  return reply
end

-- One entry that is not a steady heartbeat. Returns its outcome and what it published, if any:
-- seq, epoch and the epoch's ordinal.
local function beat(r, user, conn, state, capacity)
  local rec = Presence.expireOverdue(r, user, Presence.load(r, user))
  local joined = not rec
  if joined and capacity > 0 and Members.count(r) >= capacity then
    return OUTCOME.full
  end
  -- Redis is full: what would grow memory waits until leaves and sweeps have freed some.
  if atLimit and (joined or not Presence.findConnection(rec, conn) or #state > #rec.s) then
    return OUTCOME.refused
  end
  if joined then
    rec = { j = now, ids = {}, beats = {}, s = '' }
    if not Meta.read(r) then
      Meta.createRoom(r)
      Members.dropIndex(r)
    end
  end
  local slot, added = Presence.findConnection(rec, conn), 0
  local previousBeat = slot and rec.beats[slot]
  if not slot then
    slot, added = #rec.ids + 1, 1
    if slot > MAX_CONNECTIONS then
      slot, added = 1, 0
      for i = 2, #rec.ids do
        if rec.beats[i] < rec.beats[slot] then
          slot = i
        end
      end
    end
    rec.ids[slot] = conn
  end
  rec.beats[slot] = now
  -- A connection back within the leave grace: the leave is called off, and nothing is published.
  rec.g, rec.r = nil, nil
  local changed = state ~= '' and state ~= rec.s
  if changed then
    rec.s = state
  end
  Presence.save(r, user, rec)
  Meta.adjust(r, joined and 1 or 0, added, 0)
  local outcome, seq, epoch, ordinal = OUTCOME.refreshed, nil, nil, nil
  if joined then
    Members.listJoined(r, user)
    if not Meta.sharded(r) and Members.count(r) >= bucket.SHARD_FROM then
      Members.reshard(r, bucket.SHARDS_OF_BIG)
    end
    rcall('ZADD', dueKey, 'LT', now + presenceWindow, r.name)
    if Members.indexed(r) then
      rcall('ZADD', r.index, now + presenceWindow, user)
    elseif Members.count(r) > Members.INDEX_FROM then
      Members.buildIndex(r)
    end
    outcome = OUTCOME.joined
    seq, epoch, ordinal = Events.publish(r, user, 'join', Events.stateFragment(rec.s) .. Events.rosterFragment(r))
    Events.userChange(r, user, '+', now, seq, epoch)
  elseif changed then
    seq, epoch, ordinal = Events.publish(r, user, 'update', Events.stateFragment(rec.s))
  end
  -- After the writes: every key they made gets its expiry.
  if not previousBeat or math.floor(previousBeat / quarter) ~= math.floor(now / quarter) then
    Presence.refreshTtl(r, user)
  end
  return outcome, seq, epoch, ordinal
end

local reply = { '' }
for _, entry in ipairs(slow) do
  local i, name, user, conn, options = unpack(entry)
  local r = opened[name] or openRoom(name)
  opened[name] = r
  local capacity, state = string.match(options, '^(%d+):(.*)$')
  local outcome, seq, epoch, ordinal = beat(r, user, conn, state or '', tonumber(capacity) or 0)
  if outcome ~= OUTCOME.refreshed or seq then
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = i, outcome, seq or 0
    reply[1] = epoch or reply[1]
    Replay.keep(i, outcome, seq or 0, ordinal or 0)
  end
end
Replay.save()
return #reply > 1 and reply or 0
