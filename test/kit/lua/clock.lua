-- Redis's clock, in integer milliseconds, as the test clock of the script's bucket says (see
-- test/kit/clock.ts): '<ms>' moves it on by an offset, '@<ms>' stops it at that time. Tests
-- move time instead of waiting for it to pass.
local now
do
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local tag = string.match(KEYS[1], '^{[^}]*}')
  local set = tag and redis.call('GET', tag .. ':test-clock')
  if set then
    local stopped = string.match(set, '^@(%d+)$')
    now = stopped and tonumber(stopped) or now + tonumber(set)
  end
end
