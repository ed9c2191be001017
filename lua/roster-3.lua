--[[
  What a page of a room's roster is consistent with: the epoch and the sequence number (apply
  events of that epoch whose prev is that number, then the later ones in order), the member
  count, the log position, Redis's time, and where the records are (see shards). The records
  themselves are read by plain HGETALLs (or an HSCAN) of the room's hashes that follow this
  script in the same MULTI (src/engine/scripts/roster.ts): Redis copies them natively, with no
  conversion to Lua and back, and the client decodes them (see include/record.lua). Writes
  nothing, except the new epoch a first call in another replication history starts. A bucket that
  never had an epoch (never a member) names '' and starts none: the first event of the room is of
  an epoch started after the page, and replicas read again.

  No flags (no `#!lua` line): Redis refuses a script flagged as writing wherever it refuses
  writes (a failed save, too few replicas), and a roster must go on there. Redis at maxmemory
  refuses every command queued in a MULTI: the engine then runs this script's variant for the
  limit (`flags=allow-oom`, atLimit true), given the reads, and it runs them itself.

  KEYS[1..3], ARGV[1..2]: see include/bucket.lua; derives the room's key.
  ARGV[3] room   ARGV[4] and on, at the limit only: the reads, each as its length then its words

  Reply: {epoch, seq, member count, the bucket log's last entry id or '' (events of the room
  after the page come after it in the log), Redis's time, the room's shards (0: its own hash)},
  then, at the limit, the reads' replies
]]
-- @include "options"
-- @include "meta"
-- @include "epoch"
local atLimit = false
local m = Meta.read(openRoom(ARGV[3]))
local reply = { Epoch.read(), 0, m and m.users or 0, '', now, m and m.shards or 0 }
if bucket.logLength > 0 then
  local last = rcall('XREVRANGE', logKey, '+', '-', 'COUNT', 1)[1]
  reply[4] = last and last[1] or '0-0'
end
if m then
  reply[2] = m.seq
else
  -- An empty room's next event starts a new chain (prev 0) with a number above the counter.
  reply[2] = tonumber(rcall('HGET', seqKey, 'n')) or 0
end
if atLimit then
  local at = 4
  while at <= #ARGV do
    local words = tonumber(ARGV[at])
    reply[#reply + 1] = rcall(unpack(ARGV, at + 1, at + words))
    at = at + 1 + words
  end
end
return reply
