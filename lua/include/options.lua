-- What only a change needs, sent as one argument (ARGV[4]) and read here once:
-- 'eventRosterLimit logLength leaveGraceMs replayWindowMs'.
-- @include "modules"
local eventRosterLimit, logLength, leaveGrace, replayWindow
do
  local a, b, c, d = string.match(ARGV[4], '^(%d+) (%d+) (%d+) (%d+)$')
  eventRosterLimit, logLength, leaveGrace, replayWindow = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  bucket.eventRosterLimit, bucket.logLength, bucket.leaveGrace, bucket.replayWindow =
    eventRosterLimit, logLength, leaveGrace, replayWindow
end
