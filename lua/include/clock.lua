-- Redis's clock, in integer milliseconds: no instance's clock is ever used.
local now
do
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
