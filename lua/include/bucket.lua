-- Shared by every script: the bucket's keys, the deployment's settings, Redis's clock and the
-- per-member record. A member is one user in one room; its field is room .. US .. user.
--
-- KEYS[1] members  zset, score 0, member field: lexical index of each room's members
-- KEYS[2] users    hash, field -> cmsgpack record {c = {conn = lastHeartbeatMs}, s = stateJson,
--                  t = latest startTyping ms, j = joinedAtMs}
-- KEYS[3] due      zset, field -> the moment something in the record next expires (ms)
-- KEYS[4] seq      hash, room -> seq of the room's last event; field "" is the bucket's counter
-- ARGV[1] presence window ms, ARGV[2] typing window ms, ARGV[3] key ttl ms (safety net),
-- ARGV[4] roster size carried by join and leave events, ARGV[5] channel prefix of the bucket
local rcall = redis.call
local membersKey, usersKey, dueKey, seqKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local presenceWindow = tonumber(ARGV[1])
local typingWindow = tonumber(ARGV[2])
local keyTtl = tonumber(ARGV[3])
local eventRosterLimit = tonumber(ARGV[4])
local channelPrefix = ARGV[5]
local US = '\31'
-- Keeps every record, and so every script, bounded: see heartbeat.
local MAX_CONNECTIONS = 64

local now
do
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fieldOf(room, user)
  return room .. US .. user
end

local function splitField(field)
  local at = string.find(field, US, 1, true)
  return string.sub(field, 1, at - 1), string.sub(field, at + 1)
end

-- Lexical bounds of one room's fields: ids never contain control characters, so every field of
-- the room, and only those, lies in [room US, room ' ').
local function roomRange(room)
  return '[' .. room .. US, '(' .. room .. ' '
end

local function load(field)
  local raw = rcall('HGET', usersKey, field)
  if raw then
    return cmsgpack.unpack(raw)
  end
  return nil
end

local function deadline(rec)
  local oldest
  for _, beat in pairs(rec.c) do
    if not oldest or beat < oldest then
      oldest = beat
    end
  end
  local at = oldest + presenceWindow
  if rec.t and rec.t + typingWindow < at then
    at = rec.t + typingWindow
  end
  return at
end

local function save(field, rec)
  rcall('HSET', usersKey, field, cmsgpack.pack(rec))
  rcall('ZADD', dueKey, deadline(rec), field)
end
