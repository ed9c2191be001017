--[[
  Replies that survive a resend. A client whose connection dropped before the reply arrived sends
  the same call again: it gets the first run's reply, and nothing runs twice.
  Each instance numbers its calls; a generation of GENERATION calls keeps its replies in this
  bucket in one string (KEYS[4]), ARGV[2] being the call's number in it. The string starts with
  the highest call number that kept a reply in it (2 bytes): a call above it is a first run, and
  looks no further (the string grows with every change a generation makes: reading it whole at
  every call cost a join tens of µs). Then only what a second run would not say again: one entry
  per outcome, ENTRY_BYTES each, appended
    call 2 bytes | index in a batch 2 | outcome 1 | seq 6 | epoch ordinal 2 (see events)
  and the string expires the replay window after its last entry.
]]
-- @include "options"
local Replay = defineModule('Replay', function(bucket)
  local rcall, spack, sunpack, replayKey = redis.call, struct.pack, struct.unpack, bucket.replay
  local ENTRY, ENTRY_BYTES, TOP = '>I2I2BI6I2', 13, '>I2'
  local callNumber = tonumber(ARGV[2])
  local kept = {}
  -- The highest call number with a reply kept in the string, once read.
  local top

  -- The entries an earlier run of this call kept, as {index, outcome, seq, ordinal}, or nil.
  local function found()
    local head = rcall('GETRANGE', replayKey, 0, 1)
    top = head == '' and -1 or sunpack(TOP, head)
    if callNumber > top then
      return nil
    end
    local all = rcall('GET', replayKey)
    local prefix, entries, from = spack(TOP, callNumber), nil, 3
    while true do
      local at = string.find(all, prefix, from, true)
      if not at then
        break
      end
      if (at - 3) % ENTRY_BYTES == 0 then
        local _, index, outcome, seq, ordinal = sunpack(ENTRY, all, at)
        entries = entries or {}
        entries[#entries + 1] = { index, outcome, seq, ordinal }
        from = at + ENTRY_BYTES
      else
        from = at + 1
      end
    end
    return entries
  end

  -- Keeps one outcome of this call, written by save().
  local function keep(index, outcome, seq, ordinal)
    kept[#kept + 1] = spack(ENTRY, callNumber, index, outcome, seq, ordinal)
  end

  local function save()
    if #kept == 0 then
      return
    end
    if top == nil then
      found()
    end
    if callNumber > top then
      rcall('SETRANGE', replayKey, 0, spack(TOP, callNumber))
    end
    rcall('APPEND', replayKey, table.concat(kept))
    rcall('PEXPIRE', replayKey, bucket.replayWindow)
  end

  return { found = found, keep = keep, save = save }
end)
