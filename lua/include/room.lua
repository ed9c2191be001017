--[[
  Shared by every script of a room: its keys, the settings a steady heartbeat needs, Redis's
  clock, and how scripts name their outcomes. A room's keys and its bucket's keys share the
  bucket's hash tag, so one call stays in one slot.

  KEYS[1] room      hash: user -> member record (see record); field '' -> seq of the room's last
                    event (0 before the first), present whenever the room has members
  KEYS[2] index     zset: user -> lower bound of the member's next deadline; only while the room
                    holds more than INDEX_FROM members (see members)
  KEYS[3] due       zset of the bucket: room -> lower bound of the room's next deadline
  KEYS[4] seq       hash of the bucket: 'n' event counter, 'epoch', 'node' (who owns the epoch)
  KEYS[5] log       stream of the bucket's events (written only when the log is on)
  KEYS[6] replay    string: the reply of this call, kept so that a resent call gets it again
  ARGV[1] presence window ms   ARGV[2] typing window ms   ARGV[3] key ttl ms (safety net)
  ARGV[4] what only a change needs (see options)
  ARGV[5] and on: the script's own arguments
  The room's id and its channel are in KEYS[1], '{prefix:bucket}:u:<room>': arguments are what
  a client spends most of a call's time writing, so none repeats another.
]]
-- @include "clock"
local rcall = redis.call
local roomKey, indexKey, dueKey, seqKey, logKey, replayKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local presenceWindow = tonumber(ARGV[1])
local typingWindow = tonumber(ARGV[2])
local keyTtl = tonumber(ARGV[3])
local tagEnd = string.find(roomKey, '}', 1, true)
local room = string.sub(roomKey, tagEnd + 4)

-- A script's outcomes, named once: outcomes('a', 'b').b == 1. The TypeScript side decodes them
-- by the same names, in the same order (a test reads both).
local function outcomes(...)
  local codes = {}
  for i, name in ipairs({ ... }) do
    codes[name] = i - 1
  end
  return codes
end
