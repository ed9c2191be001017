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
  ARGV[3] and on, per room: its id, n, then n entries of 3: user, connection (at most 9 bytes),
  options: '' or '<capacity>:<state JSON>'. Capacity (0 for no limit) is the most members the room
  may hold: a user who is not present cannot join a room that holds as many (members in their
  leave grace count); nothing is written or published. A present user's other connections always
  get in. An empty state keeps the stored one.

  At maxmemory under noeviction, Redis refuses this script before it runs; the engine then runs
  its variant for the limit, the same script with `flags=allow-oom` and atLimit true: steady
  heartbeats and what expires go on, and an entry that would grow memory (a join, a new
  connection, a bigger state) is refused, changing nothing.

  Reply: 0 when every entry was refreshed and nothing was published; else {epoch of the events
  published or '', then per entry that did more: its index (from 0), outcome, seq or 0}.
]]
-- @include "record"
local atLimit = false
local FIELDS = 3
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

-- The steady patch of the entry at ARGV[a] (the batch's entry i) into `raw`, its user's record;
-- or nil, and the entry is queued in `slow`.
local function steadyEntry(r, a, i, raw)
  local conn, options = ARGV[a + 1], ARGV[a + 2]
  -- A capacity without a state ('<capacity>:') changes nothing for a present user.
  local beat = (options == '' or sbyte(options, -1) == COLON) and raw
    and steadyBeat(raw, conn, now, presenceWindow, typingWindow, quarter)
  if not beat then
    slow[#slow + 1] = { i, r, ARGV[a], conn, options }
  end
  return beat
end

-- The steady heartbeats among a room's n entries (ARGV from `first`; the batch's `index` on),
-- patched into their records (raws[k + offset] for entry k): the fields to write (user, record,
-- ...), or nil.
local function patchSteady(r, first, n, index, raws, offset)
  -- A user may come twice (two connections): the second patch applies to the first's result,
  -- found where the first left it (at[user]).
  local fields, at = {}, {}
  for k = 1, n do
    local a = first + (k - 1) * FIELDS
    local user = ARGV[a]
    local j = at[user]
    local beat = steadyEntry(r, a, index + k - 1, j and fields[j] or raws[k + offset])
    if beat then
      if not j then
        j = #fields + 2
        fields[j - 1], at[user] = user, j
      end
      fields[j] = beat
    end
  end
  return fields[1] and fields
end

local function usersOf(first, n)
  local users = {}
  for k = 0, n - 1 do
    users[k + 1] = ARGV[first + k * FIELDS]
  end
  return users
end

-- A big room's records are in shards (see shards): it waits for the shards' helpers below.
local sharded = {}
local at, index = 3, 0
while at <= #ARGV do
  -- n is 1 in every single call: no number to parse.
  local r, n, first = openRoom(ARGV[at]), ARGV[at + 1] == '1' and 1 or tonumber(ARGV[at + 1]), at + 2
  -- The meta comes with the records: its last byte says whether they are in this hash (see
  -- meta). A steady heartbeat pays one byte's read of it. A single entry (a single call) builds
  -- no lists.
  local raws = single or n == 1 and rcall('HMGET', r.key, '', ARGV[first])
    or rcall('HMGET', r.key, '', unpack(usersOf(first, n)))
  single = nil
  if raws[1] and sbyte(raws[1], -1) > 0 then
    sharded[#sharded + 1] = { r, first, n, index, usersOf(first, n), raws[1] }
  elseif n == 1 then
    local beat = steadyEntry(r, first, index, raws[2])
    if beat then
      rcall('HSET', r.key, ARGV[first], beat)
    end
  else
    local fields = patchSteady(r, first, n, index, raws, 1)
    if fields then
      rcall('HSET', r.key, unpack(fields))
    end
  end
  at, index = first + n * FIELDS, index + n
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
for _, room in ipairs(sharded) do
  local r, first, n, index, users, meta = unpack(room)
  r.meta = Meta.parse(meta)
  local fields = patchSteady(r, first, n, index, Shards.readRecords(r, users), 0)
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
  local i, r, user, conn, options = unpack(entry)
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
