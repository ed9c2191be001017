/**
 * The scripts redis-benchmark runs beside rollcall's own, to put its cost in scale. Each replies
 * with a bare integer, as rollcall's steady heartbeat does: a table reply costs Redis more than
 * some of these scripts take to run.
 */

/**
 * The baseline's update_presence as one script: the time (Redis's, where the baseline reads its
 * own clock), then ZSCORE, ZADD, EXPIRE on the room's sorted set, exactly its three commands.
 * What the naive tracker's own work costs Redis, without its three round trips.
 * KEYS[1] presence:<room>:online   ARGV[1] user   ARGV[2] key TTL, s
 */
export const NAIVE_HEARTBEAT = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return previous and 0 or 1
`;

/** The floor: what any script that reads the time costs, called with the caller's arguments. */
export const TIME_ONLY = `
redis.call('TIME')
return 0
`;

/**
 * What keeping live rooms out of the sweep would add to every heartbeat at least: a look at the
 * room's entry in the bucket's due index. KEYS[1] due   ARGV[1] room
 */
export const TIME_ZSCORE = `
redis.call('TIME')
redis.call('ZSCORE', KEYS[1], ARGV[1])
return 0
`;

/**
 * The baseline's join as one script: update_presence (the time, ZSCORE, ZADD, EXPIRE), and for a
 * user it did not find, get_online_users (ZRANGEBYSCORE over the window) and the join published
 * with that list, as its WebSocket handler does in three more round trips.
 * KEYS[1] presence:<room>:online   KEYS[2] its channel   ARGV[1] user   ARGV[2] window, s
 */
export const NAIVE_JOIN = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2] * 3)
if previous then
  return 0
end
local online = redis.call('ZRANGEBYSCORE', KEYS[1], tonumber(now) - ARGV[2], '+inf')
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.join', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = tonumber(now), online = online }))
return 1
`;

/**
 * The baseline's clean leave as one script: remove_presence (ZREM), get_online_users and the
 * leave published with that list. Keys and arguments as NAIVE_JOIN's.
 */
export const NAIVE_LEAVE = `
local t = redis.call('TIME')
local now = tonumber(t[1] .. '.' .. string.format('%06d', t[2]))
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local online = redis.call('ZRANGEBYSCORE', KEYS[1], now - ARGV[2], '+inf')
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.leave', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = now, online = online }))
return 1
`;

/**
 * The baseline's typing frame as one script: set_typing (ZADD, EXPIRE) and the typing event.
 * KEYS[1] presence:<room>:typing   KEYS[2] the room's channel   ARGV[1] user   ARGV[2] expiry, s
 */
export const NAIVE_TYPING = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.typing', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = tonumber(now) }))
return 1
`;
