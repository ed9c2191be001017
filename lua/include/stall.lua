--[[
  Redis's bad days: a stall (CLIENT PAUSE, a stopped or busy server, a restart loading its data,
  a failover) stops every heartbeat at once, and when Redis is back every connection whose
  deadline passed meanwhile looks dead, though its holder kept trying. Like etcd, which extends
  every lease when a new leader takes over, the bucket then holds such connections for one more
  presence window from the end of the stall: those whose holders are alive beat again by then,
  and those that really died leave once, a window after Redis came back.

  A stall is what the sweeps see: every sweep of the bucket notes when it ran ('sw' in the seq
  hash, rewritten once it is STALE_AFTER / 4 old), and a sweep finding the previous one older than
  STALE_AFTER (a third of the presence window, at least a second: only a longer stall can expire a
  holder that beats at least every two thirds of a window) records the gap as the stall ('sf' its
  start, 'su' its end). Until a sweep has run, any script seeing the last sweep older than
  STALE_AFTER takes the time since as a stall still going on. A gateway cut off from Redis alone
  is no stall: the other instances' sweeps go on, and its members expire on time. With no
  sweeper at all (or none for a key TTL), nothing is held. Gaps are measured on Redis's own
  clock (TIME), which a test's moved clock does not move: time a test skips is no stall.
]]
-- @include "modules"
local Stall = defineModule('Stall', function(bucket)
  local rcall, now, presenceWindow = redis.call, bucket.now, bucket.presenceWindow
  local STALE_AFTER = math.max(1000, math.floor(presenceWindow / 3))
  local t = rcall('TIME')
  local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local swept, from, to = unpack(rcall('HMGET', bucket.seq, 'sw', 'sf', 'su'))
  swept, from, to = tonumber(swept), tonumber(from), tonumber(to)
  -- How long no sweep has run, if that is a stall: its start, on the call's clock.
  local gap = swept and clock - swept
  local stalled = gap and gap > STALE_AFTER and gap < bucket.keyTtl and now - gap

  -- When a connection due at `at` expires: a deadline that fell in or after a stall is held
  -- until a presence window after its end.
  local function hold(at)
    if stalled then
      return at >= stalled and math.max(at, now + presenceWindow) or at
    end
    if to and at >= from then
      return math.max(at, to + presenceWindow)
    end
    return at
  end

  -- A sweep of the bucket ran now: noted, with the stall it ends, if any.
  local function sweeping()
    if stalled then
      rcall('HSET', bucket.seq, 'sw', clock, 'sf', stalled, 'su', now)
      from, to, stalled = stalled, now, false
    elseif not gap or gap >= STALE_AFTER / 4 then
      rcall('HSET', bucket.seq, 'sw', clock)
    end
    swept, gap = clock, 0
  end

  return { hold = hold, sweeping = sweeping }
end)
