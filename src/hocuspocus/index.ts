// rollcall/hocuspocus: presence for a Hocuspocus server, loaded only when this entry is imported
// (@hocuspocus/server 3.4 is an optional peer dependency).
export {
  HocuspocusPresence,
  type HocuspocusPresenceOptions,
  type IdentifyPayload,
} from "./extension.js";
export { clientsOf, type MirroredState } from "./state.js";
