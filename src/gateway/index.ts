export { Gateway, type GatewayOptions } from "./gateway.js";
export {
  bearerToken,
  refreshOf,
  type Authenticate,
  type JsonWebKeySet,
  type JwtOptions,
} from "./auth.js";
export { AuthError, type Claims, type Identity } from "../runtime/identity.js";
export { DEFAULT_LIMITS, type Limits } from "../runtime/limits.js";
export type { Origins, RefusalReason } from "./upgrade.js";
export { CLOSE } from "../runtime/session.js";
export * from "../protocol/frames.js";
