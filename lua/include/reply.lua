-- A single call's reply, {outcome, seq of its event or 0, the event's epoch or ''}, kept for a
-- resend of the call when it changed something (see replay).
-- @include "replay"
-- @include "epoch"
local function remember(outcome, seq, epoch, ordinal)
  Replay.keep(0, outcome, seq or 0, ordinal or 0)
  Replay.save()
  return { outcome, seq or 0, epoch or '' }
end

-- The reply an earlier run of this call kept, or nil.
local function keptReply()
  local found = Replay.found()
  if found then
    local _, outcome, seq, ordinal = unpack(found[1])
    return { outcome, seq, Epoch.of(ordinal) }
  end
end
