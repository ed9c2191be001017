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
