--[[
  One room's members as the event stream has announced them, with the epoch and the sequence
  number the snapshot is consistent with: apply events of that epoch whose prev is that number,
  then the later ones in order. Writes nothing, except the new epoch a first call in another
  Redis process starts (see include/events.lua).

  KEYS[1..3], ARGV[1..4]: see include/bucket.lua; derives the room's keys.
  ARGV[6] room   ARGV[7] most members to return

  Reply: {epoch, seq, member count, the bucket log's last entry id or '' (events of the room
  after the snapshot come after it in the log), Redis's time, then per member returned: user,
  connections, lastSeenMs, joinedAtMs, typedAtMs or 0, end of the leave grace or 0, state JSON
  or ''}
]]
-- @include "record"
-- @include "events"
local r, limit = openRoom(ARGV[6]), tonumber(ARGV[7])
local reply = { (currentEpoch()), 0, memberCount(r), '', now }
if logLength > 0 then
  local last = rcall('XREVRANGE', logKey, '+', '-', 'COUNT', 1)[1]
  reply[4] = last and last[1] or '0-0'
end
local users, raws = {}, {}
if reply[3] == 0 then
  -- An empty room's next event starts a new chain (prev 0) with a number above the counter.
  reply[2] = tonumber(rcall('HGET', seqKey, 'n')) or 0
else
  reply[2] = readMeta(r)[SEQ]
  if reply[3] > limit and indexed(r) then
    users = rcall('ZRANGE', r.index, 0, limit - 1)
    raws = rcall('HMGET', r.key, unpack(users))
  else
    users, raws = readMembers(r)
  end
end
for i = 1, math.min(#users, limit) do
  -- A record can be missing only if its index entry outlived it: skip it.
  if raws[i] then
    local rec = decode(raws[i])
    local n = #reply
    reply[n + 1], reply[n + 2] = users[i], #rec.ids
    reply[n + 3] = rec.g and rec.g - leaveGrace or lastSeen(rec)
    reply[n + 4], reply[n + 5], reply[n + 6], reply[n + 7] = rec.j, rec.t or 0, rec.g or 0, rec.s
  end
end
return reply
