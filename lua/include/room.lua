--[[
  Shared by every script of a room: its keys, the deployment's settings and Redis's clock.
  A room's keys and its bucket's keys share the bucket's hash tag, so one call stays in one slot.

  KEYS[1] room      hash: user -> member record (see record); field '' -> seq of the room's last
                    event (0 before the first), present whenever the room has members
  KEYS[2] index     zset: user -> lower bound of the member's next deadline; only while the room
                    holds more than INDEX_FROM members (built then, dropped at INDEX_UNTIL)
  KEYS[3] due       zset of the bucket: room -> lower bound of the room's next deadline
  KEYS[4] seq       hash of the bucket: 'n' event counter, 'epoch', 'node' (run_id that owns it)
  KEYS[5] log       stream of the bucket's events (written only when ARGV[6] > 0)
  KEYS[6] replay    string: the reply of this call, kept so that a resent call gets it again
  ARGV[1] presence window ms   ARGV[2] typing window ms   ARGV[3] key ttl ms (safety net)
  ARGV[4] 'eventRosterLimit logLength leaveGraceMs replayWindowMs': what only a change needs
  ARGV[5] and on: the script's own arguments
  The room's id and its channel are in KEYS[1], '{prefix:bucket}:u:<room>': arguments are what
  a client spends most of a call's time writing, so none repeats another.
]]
-- @include "clock"
local rcall = redis.call
local roomKey, indexKey, dueKey, seqKey, logKey, replayKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
-- Only what a steady heartbeat needs is read here; the rest where it is used.
local presenceWindow = tonumber(ARGV[1])
local typingWindow = tonumber(ARGV[2])
local keyTtl = tonumber(ARGV[3])
local tagEnd = string.find(roomKey, '}', 1, true)
local room = string.sub(roomKey, tagEnd + 4)
