-- What only a change needs, sent as one argument (ARGV[4]) and read here once:
-- 'eventRosterLimit logLength leaveGraceMs replayWindowMs'.
-- @include "modules"
do
  local a, b, c, d = string.match(ARGV[4], '^(%d+) (%d+) (%d+) (%d+)$')
  bucket.eventRosterLimit, bucket.logLength, bucket.leaveGrace, bucket.replayWindow =
    tonumber(a), tonumber(b), tonumber(c), tonumber(d)
end
