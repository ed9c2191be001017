--[[
  Shared by every script of a bucket's rooms: the bucket's keys, the settings a steady heartbeat
  needs, Redis's clock, the packing primitives and how scripts name their outcomes. A room's keys
  carry its bucket's hash tag, so one call stays in one slot, on a Cluster too.

  KEYS[1] due      zset: room -> lower bound of the room's next deadline
  KEYS[2] seq      hash: 'n' the event counter; 'epoch', 'node' (who owns it), 'k' its ordinal and
                   'e<k>' recent epochs (see events); 'rooms', 'users', 'conns', 'typing' the
                   bucket's counts, and a reconcile's own while one runs (see meta)
  KEYS[3] log      stream of the bucket's events (written only when the log is on)
  KEYS[4] replay   string: the replies kept of one generation of the calling instance's calls
                   (see replay); scripts that change nothing get no such key
  Derived from the bucket's tag and a room's id (ARGV), for each room a script names:
    '<tag>:u:<room>'  hash: user -> member record (see record); field '' -> the room's meta
                      (see meta), present whenever the room has members
    '<tag>:z:<room>'  zset: user -> lower bound of the member's next deadline; only while the
                      room holds more than INDEX_FROM members (see members)
    '<tag>:s<k>:<room>'  hash: user -> member record, for a big room's members of shard k,
                      instead of '<tag>:u:<room>' (see shards)
  ARGV[1] the deployment's settings, each in 12 hex digits: presence window ms, typing window
          ms, key ttl ms (the safety net), then what only a change needs (see options)
  ARGV[2] the call's number (see replay)
  ARGV[3] and on: the script's own arguments
  Every argument costs a call before its script runs (Redis parses it and makes a Lua string of
  it, and tonumber parses a decimal number as a float): the settings come as one string of
  fixed-width hex, read by cheaper integer parsing. Printable, so that MONITOR shows a call as
  it was sent.
]]
-- @include "clock"
local rcall = redis.call
local spack, sunpack, sbyte, ssub = struct.pack, struct.unpack, string.byte, string.sub
local dueKey, seqKey, logKey, replayKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- '{prefix:bucket}', from '{prefix:bucket}:due'.
local tag = ssub(dueKey, 1, -5)
-- The settings in the order the engine writes them (packSettings, src/engine/settings.ts): the
-- k-th is the 12 digits from 12k - 11. The first three, read here without a helper: a call to
-- one costs a steady heartbeat more than the parse itself (the rest: see options).
local settings = ARGV[1]
local presenceWindow = tonumber(ssub(settings, 1, 12), 16)
local typingWindow = tonumber(ssub(settings, 13, 24), 16)
local keyTtl = tonumber(ssub(settings, 25, 36), 16)

-- A room of the bucket: its id and its keys.
local function openRoom(name)
  return { name = name, key = tag .. ':u:' .. name, index = tag .. ':z:' .. name }
end
