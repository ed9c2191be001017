// rollcall/fastify: rollcall's WebSocket protocol on a Fastify route (fastify 5 and
// @fastify/websocket 11 are optional peer dependencies, loaded only when this entry is imported).
export { fastifyPresence, websocketOptions, type FastifyPresenceOptions } from "./presence.js";
export { AuthError, type Identity } from "../runtime/identity.js";
