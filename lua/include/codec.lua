--[[
  The member record as a table, for the slow paths: decoded, encoded, and when it next expires.
  The format and its offsets: see record.
]]
-- @include "record"
-- @include "modules"
-- @include "stall"
local Record = defineModule('Record', function(bucket)
  local spack, sunpack, ssub, schar, sbyte = struct.pack, struct.unpack, string.sub, string.char, string.byte
  local now, presenceWindow, typingWindow = bucket.now, bucket.presenceWindow, bucket.typingWindow
  local GRACE_REASONS = { 'explicit', 'expired', explicit = 1, expired = 2 }

  -- Where the connections start, how many there are, and the typing time or nil.
  local function recordHead(raw)
    local flags = sbyte(raw, FLAGS_AT)
    if flags >= TYPING then
      return FLAGS_AT + 1 + TIME_BYTES, flags - TYPING, (sunpack(TIME, raw, FLAGS_AT + 1))
    end
    return FLAGS_AT + 1, flags, nil
  end

  -- The connection at `pos`: its id, its last heartbeat, and where the next connection starts.
  local function connectionAt(raw, pos)
    local beatAt = pos + 1 + sbyte(raw, pos)
    return ssub(raw, pos + 1, beatAt - 1), (sunpack(TIME, raw, beatAt)), beatAt + TIME_BYTES
  end

  -- When what is due at `at` (a leave grace's end) expires: then, or, if that has passed,
  -- later still when a stall of Redis held it (see stall). Only what is overdue asks. And when a
  -- connection that last beat at `beat` expires: a presence window later, or so held.
  local function held(at)
    return at > now and at or bucket.Stall.hold(at)
  end
  local function expiresAt(beat)
    return held(beat + presenceWindow)
  end

  -- {j = joinedAt, t = typedAt or nil, ids = {...}, beats = {...}, g = grace end or nil,
  --  r = grace reason, s = state or ''}
  local function decode(raw)
    local pos, n, typedAt = recordHead(raw)
    local rec = { j = (sunpack(TIME, raw)), t = typedAt, ids = {}, beats = {} }
    for i = 1, n do
      local id, beat, nextPos = connectionAt(raw, pos)
      rec.ids[i], rec.beats[i], pos = id, beat, nextPos
    end
    if n == 0 then
      local g, r = sunpack(GRACE, raw, pos)
      rec.g, rec.r, pos = g, GRACE_REASONS[r], pos + GRACE_BYTES
    end
    rec.s = ssub(raw, pos)
    return rec
  end

  local function encode(rec)
    local n = #rec.ids
    local parts = { spack(TIME .. 'B', rec.j, n + (rec.t and TYPING or 0)) }
    if rec.t then
      parts[2] = spack(TIME, rec.t)
    end
    for i = 1, n do
      parts[#parts + 1] = schar(#rec.ids[i]) .. rec.ids[i] .. spack(TIME, rec.beats[i])
    end
    if n == 0 then
      parts[#parts + 1] = spack(GRACE, rec.g, GRACE_REASONS[rec.r])
    end
    parts[#parts + 1] = rec.s
    return table.concat(parts)
  end

  -- When something in a decoded record next expires: its leave grace, its oldest connection, or
  -- its typing mark.
  local function deadline(rec)
    if rec.g then
      return held(rec.g)
    end
    local at = expiresAt(math.min(unpack(rec.beats)))
    if rec.t and rec.t + typingWindow < at then
      at = rec.t + typingWindow
    end
    return at
  end

  -- The same deadline, read straight from a packed record: a sweep weighs every record of a
  -- room and decodes only those it expires.
  local function packedDeadline(raw)
    local pos, n, typedAt = recordHead(raw)
    local oldest
    for _ = 1, n do
      local _, beat, nextPos = connectionAt(raw, pos)
      if not oldest or beat < oldest then
        oldest = beat
      end
      pos = nextPos
    end
    if not oldest then
      return held((sunpack(TIME, raw, pos)))
    end
    local at = expiresAt(oldest)
    return typedAt and math.min(at, typedAt + typingWindow) or at
  end

  local function lastSeen(rec)
    return math.max(0, unpack(rec.beats))
  end

  return {
    decode = decode,
    encode = encode,
    deadline = deadline,
    packedDeadline = packedDeadline,
    lastSeen = lastSeen,
    expiresAt = expiresAt,
  }
end)
