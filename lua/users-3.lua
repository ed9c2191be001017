#!lua flags=allow-oom
--[[
  Applies user changes (a visible member's join or leave, as a room bucket's scripts wrote them
  to its '<tag>:ux' stream: see events) to the status of this bucket's users: the rooms each is
  present in, so whether they are online, since when, and when they were last seen. A change
  no newer than the last one applied for its user and room (a resend, a second reader of the
  same stream, a reader that lagged) changes nothing: each change counts once, whoever applies
  it and however often, so a user goes online, and offline, once per transition. Each
  transition is published on the bucket's users channel, numbered and signed as room events
  are (see events).

  KEYS, ARGV[1..2]: see include/bucket.lua; derives the keys of each user named:
    '<tag>:p:<user>'  string '<rooms>:<since>:<lastSeen>:<ended>': rooms the user is present in
                      (0: offline), since when (while online), when the last online period
                      ended (0: none kept), the latest end of a room left in the current one
    '<tag>:q:<user>'  hash: room -> '<sign><epoch start>:<seq>:<at>', the last change applied
  Online, both keys live until the user goes offline; offline, for the retention.
  ARGV[3] retention, ms   ARGV[4] and on: changes, each
    '<sign>\n<at>\n<epoch start>\n<seq>\n<user>\n<room>' ('+' joined at, '-' left: the last
    connection ended at)
  The bucket's users channel '<tag>:users' carries each transition: '{"v":2,"type":"online" or
  "offline","user","since" or "lastSeenAt","at","epoch","seq","prev","mac"}', seq counted in the
  seq hash's field 'u'.

  Reply: {users who went online, users who went offline}
]]
-- @include "epoch"
local retention = tonumber(ARGV[3])

-- Whether (epoch, seq) comes after (epoch2, seq2): within an epoch by seq, across epochs by their
-- start (hex of Redis's time in µs, see epoch; an epoch starts after every one before it, even
-- when data was lost and the bucket's counter went back).
local function newer(epoch, seq, epoch2, seq2)
  if epoch == epoch2 then
    return seq > seq2
  end
  return tonumber(epoch, 16) > tonumber(epoch2, 16)
end

local function announce(user, kind, field, value)
  local epoch, _, key = Epoch.current()
  local seq = rcall('HINCRBY', seqKey, 'u', 1)
  local message = '{"v":2,"type":"' .. kind .. '","user":' .. cjson.encode(user) .. ',"' .. field .. '":' ..
    value .. ',"at":' .. now .. ',"epoch":"' .. epoch .. '","seq":' .. seq .. ',"prev":' .. (seq - 1) .. '}'
  local mac = redis.sha1hex(key .. message .. key)
  rcall('SPUBLISH', tag .. ':users', ssub(message, 1, -2) .. ',"mac":"' .. mac .. '"}')
end

-- A user online for long keeps the tombstones of the rooms they left: those older than a key
-- TTL (no reader of a stream lags that long; the stream itself expires after one) go, looked for
-- each time the hash doubles from 128 fields on, so that a user in many rooms pays for it once
-- per doubling, not per change.
local function prune(rooms)
  local size = rcall('HLEN', rooms)
  if size < 128 or bit.band(size, size - 1) ~= 0 then
    return
  end
  local all, old = rcall('HGETALL', rooms), {}
  for i = 1, #all, 2 do
    local at = string.match(all[i + 1], '^%-%x+:%d+:(%d+)$')
    if at and tonumber(at) + keyTtl < now then
      old[#old + 1] = all[i]
    end
  end
  if #old > 0 then
    rcall('HDEL', rooms, unpack(old))
  end
end

local online, offline = 0, 0
for i = 4, #ARGV do
  local sign, at, epoch, seq, user, room = string.match(ARGV[i], '^([+-])\n(%d+)\n(%x+)\n(%d+)\n([^\n]+)\n(.+)$')
  if not sign then
    return redis.error_reply('ERR rollcall: malformed user change ' .. ARGV[i])
  end
  at, seq = tonumber(at), tonumber(seq)
  local statusKey, rooms = tag .. ':p:' .. user, tag .. ':q:' .. user
  local stored = rcall('HGET', rooms, room)
  local was, epoch2, seq2 = nil, '', 0
  if stored then
    was, epoch2, seq2 = string.match(stored, '^([+-])(%x+):(%d+):')
    seq2 = tonumber(seq2)
  end
  if not stored or newer(epoch, seq, epoch2, seq2) then
    if rcall('HSET', rooms, room, sign .. epoch .. ':' .. seq .. ':' .. at) == 1 then
      prune(rooms)
    end
    local n, since, last, ended = 0, 0, 0, 0
    local status = rcall('GET', statusKey)
    if status then
      n, since, last, ended = string.match(status, '^(%d+):(%d+):(%d+):(%d+)$')
      n, since, last, ended = tonumber(n), tonumber(since), tonumber(last), tonumber(ended)
    end
    local delta = (sign == '+' and 1 or 0) - (was == '+' and 1 or 0)
    if sign == '-' then
      ended = math.max(ended, at)
    end
    if delta > 0 and n == 0 then
      since, ended = at, 0
      rcall('PERSIST', rooms)
      announce(user, 'online', 'since', since)
      online = online + 1
    elseif delta < 0 and n == 1 then
      last, since, ended = ended, 0, 0
      rcall('PEXPIRE', rooms, retention)
      announce(user, 'offline', 'lastSeenAt', last)
      offline = offline + 1
    elseif sign == '-' and n == 0 then
      -- A leave whose join this user's status never counted (lost before it was applied).
      last, ended = math.max(last, at), 0
    end
    n = math.max(0, n + delta)
    if n > 0 then
      rcall('SET', statusKey, n .. ':' .. since .. ':' .. last .. ':' .. ended)
    else
      rcall('SET', statusKey, n .. ':' .. since .. ':' .. last .. ':' .. ended, 'PX', retention)
      -- A leave first seen as a tombstone of a user never online here (a change applied out of
      -- order) expires with the rest.
      rcall('PEXPIRE', rooms, retention)
    end
  end
end
return { online, offline }
