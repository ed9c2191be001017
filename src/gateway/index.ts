export { Gateway, type GatewayOptions } from "./gateway.js";
export {
  AuthError,
  bearerToken,
  type Authenticate,
  type Identity,
  type JwtOptions,
} from "./auth.js";
export { DEFAULT_LIMITS, type Limits } from "./limits.js";
export { CLOSE } from "./session.js";
export * from "../protocol/frames.js";
