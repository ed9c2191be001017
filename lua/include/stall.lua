--[[
  Redis's bad days: a stall (CLIENT PAUSE, a stopped or busy server, a restart loading its data,
  a failover) stops every heartbeat at once, and when Redis is back every connection whose
  deadline passed meanwhile looks dead, though its holder kept trying. Like etcd, which extends
  every lease when a new leader takes over, the bucket then holds such connections for one more
  presence window from the end of the stall: those whose holders are alive beat again by then,
  and those that really died leave once, a window after Redis came back.

  A stall is what the sweeps see: every sweep of the bucket notes when it ran ('sw' in the seq
  hash, rewritten once it is STALE_AFTER / 4 old), and a sweep finding the previous one older than
  STALE_AFTER (a third of the presence window, at least a second) records the gap as the stall
  ('sf' its start, 'su' its end; 'si' the sweepers' pause between passes, when longer than a third
  of the window, sets the threshold at three such pauses instead; a stall that begins while the previous one's hold still runs
  extends that hold). A holder that beats every third of a window (the default) loses a
  connection only to a longer stall. Until a sweep has run, any script seeing the last sweep
  older than STALE_AFTER takes the time since as a stall still going on. A gateway cut off from
  Redis alone is no stall: the other instances' sweeps go on, and its members expire on time.
  A gap longer than LONGEST (ten windows, or the key TTL if shorter) is no stall either: sweepers
  gone for good must not hold connections for ever, and a stall that long is not held. With no
  sweeper at all, nothing is held. Gaps are measured on Redis's own clock (TIME), which a test's
  moved clock does not move: time a test skips is no stall.
]]
-- @include "modules"
local Stall = defineModule('Stall', function(bucket)
  local rcall, now, presenceWindow = redis.call, bucket.now, bucket.presenceWindow
  local LONGEST = math.min(10 * presenceWindow, bucket.keyTtl)
  local t = rcall('TIME')
  local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local swept, from, to, every = unpack(rcall('HMGET', bucket.seq, 'sw', 'sf', 'su', 'si'))
  swept, from, to, every = tonumber(swept), tonumber(from), tonumber(to), tonumber(every) or 0
  -- The longest gap between sweeps that is no stall, for sweepers that pause `every` ms.
  local function staleAfter()
    return math.max(1000, math.floor(presenceWindow / 3), 3 * every)
  end
  -- How long no sweep has run, and if that is a stall, its start, on the call's clock.
  local gap, stalled
  local function measure()
    gap = swept and clock - swept
    stalled = gap and gap > staleAfter() and gap < LONGEST and now - gap
  end
  measure()

  -- When a connection (or a leave grace) due at `at` expires: a deadline that fell in or after
  -- the stall recorded, or the one going on, is held until a presence window after its end.
  local function hold(at)
    local held = at
    if to and at >= from then
      held = math.max(at, to + presenceWindow)
    end
    if stalled and held >= stalled then
      held = math.max(held, now + presenceWindow)
    end
    return held
  end

  -- A sweep of the bucket ran now, by a sweeper that pauses `interval` ms between passes (0:
  -- none said): noted, with the stall it ends, if any.
  local function sweeping(interval)
    if interval > every then
      every = interval
      measure()
    end
    if stalled then
      local start = (to and to + presenceWindow > stalled) and from or stalled
      rcall('HSET', bucket.seq, 'sw', clock, 'si', interval, 'sf', start, 'su', now)
      from, to, stalled = start, now, false
    elseif not gap or gap >= staleAfter() / 4 then
      rcall('HSET', bucket.seq, 'sw', clock, 'si', interval)
    end
    swept, gap = clock, 0
  end

  return { hold = hold, sweeping = sweeping }
end)
