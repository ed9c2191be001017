export { Gateway, type GatewayOptions } from "./gateway.js";
export {
  AuthError,
  bearerToken,
  refreshOf,
  type Authenticate,
  type Claims,
  type Identity,
  type JsonWebKeySet,
  type JwtOptions,
} from "./auth.js";
export { DEFAULT_LIMITS, type Limits } from "./limits.js";
export type { Origins, RefusalReason } from "./upgrade.js";
export { CLOSE } from "./session.js";
export * from "../protocol/frames.js";
