export { SocketIoPresence, EVENTS, type SocketIoPresenceOptions } from "./presence.js";
export type { FrameErrorCode } from "../protocol/frames.js";
export type { ReplicaRoster, ReplicaMember } from "../protocol/replica.js";
export type { PresenceEvent } from "../protocol/events.js";
