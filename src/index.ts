export { Rollcall, type Heartbeat, type HeartbeatOutcome } from "./engine/rollcall.js";
export { STATUS_LIMIT } from "./engine/users.js";
export type { UserStatus, StatusChange } from "./protocol/users.js";
export type { RollcallOptions, Settings } from "./engine/settings.js";
export { COMMAND_TIMEOUT_MS, REDIS_OPTIONS } from "./engine/redisOptions.js";
export type { HeartbeatFailure, HeartbeatResult } from "./engine/scripts/heartbeat.js";
export type { LeaveResult } from "./engine/scripts/leave.js";
export type { TypingResult } from "./engine/scripts/startTyping.js";
export type { StopTypingResult } from "./engine/scripts/stopTyping.js";
export type { StateResult } from "./engine/scripts/setState.js";
export type { Roster, RosterMember } from "./engine/scripts/roster.js";
export type { SweepCounts, SweepReply } from "./engine/scripts/sweep.js";
export type { Counts } from "./engine/scripts/count.js";
export type { BucketStats } from "./engine/scripts/stats.js";
export { Sweeper, type SweeperOptions, type PassStats } from "./runtime/sweeper.js";
export {
  Subscriber,
  type SubscriberOptions,
  type SubscribeOptions,
  type Subscription,
  type PresenceListener,
} from "./runtime/subscriber.js";
export { RoomWatch, type SyncReason } from "./runtime/watch.js";
export { UserWatch, WATCHED_USERS } from "./runtime/userWatch.js";
export {
  LogConsumer,
  type LogConsumerOptions,
  type LogEntry,
  type LogHandler,
} from "./runtime/log.js";
export {
  Replica,
  type ReplicaMember,
  type ReplicaRoster,
  type RosterChange,
  type Snapshot,
  type Outcome,
} from "./protocol/replica.js";
export { parseEvent, checkEvent, EVENT_TYPES } from "./protocol/events.js";
export type * from "./protocol/events.js";
export * from "./protocol/errors.js";
export { RedisCallError } from "./engine/errors.js";
export { RollcallWarning, type MemoryPolicy, type WarningCode } from "./engine/memoryPolicy.js";
export type { RollcallEvents } from "./engine/rollcall.js";
export type { MemberState, JsonValue } from "./protocol/state.js";
