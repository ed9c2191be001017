export { RollcallClient, GatewayError, type ClientOptions, type Status } from "./client.js";
export { Room } from "./room.js";
export { RoomCount } from "./count.js";
export { UserList } from "./users.js";
export type { UserStatus } from "../protocol/users.js";
export type { ReplicaRoster, ReplicaMember, RosterChange } from "../protocol/replica.js";
export type { PresenceEvent, EventType } from "../protocol/events.js";
export type { MemberState } from "../protocol/state.js";
