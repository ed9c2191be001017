import { SignJWT } from "jose";
import WebSocket from "ws";
import { RollcallClient, type ClientOptions } from "../../src/client/index.js";
import { Gateway, type GatewayOptions } from "../../src/gateway/index.js";
import { Rollcall, type RollcallOptions } from "../../src/index.js";
import { IMMEDIATE, client } from "./redis.js";

export const SECRET = "a test secret that is long enough for HS256";
export const SHORT: RollcallOptions = {
  presenceWindowMs: 1_500,
  typingWindowMs: 500,
  keyTtlMs: 10_000,
};

const gateways = new Set<Gateway>();
const clients = new Set<RollcallClient>();

/** A signed HS256 token for a user, allowed in the given rooms (default: every room). */
export function token(
  user: string,
  claims: Record<string, unknown> = {},
  expires: string | number = "1h",
): Promise<string> {
  return new SignJWT({ rooms: ["*"], ...claims })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(user)
    .setExpirationTime(expires)
    .sign(new TextEncoder().encode(SECRET));
}

/** A gateway instance on its own Redis connection and port, closed after the test. */
export async function startGateway(
  options: Partial<GatewayOptions> = {},
  engine: RollcallOptions = SHORT,
): Promise<{ gateway: Gateway; url: string; rollcall: Rollcall }> {
  const rollcall = new Rollcall(client(), { ...IMMEDIATE, ...engine });
  const gateway = new Gateway(rollcall, {
    jwt: { secret: SECRET },
    sweeper: { intervalMs: 200 },
    ...options,
  });
  gateway.on("error", () => undefined);
  gateways.add(gateway);
  const { port } = await gateway.listen(0);
  return { gateway, url: `ws://127.0.0.1:${port}/presence`, rollcall };
}

/** The browser client, run in Node over `ws`, closed after the test. */
export function connect(url: string, user: string, options: ClientOptions = {}): RollcallClient {
  const c = new RollcallClient(url, {
    token: () => token(user),
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
    reconnectMs: { first: 50, max: 500 },
    ...options,
  });
  clients.add(c);
  return c;
}

export async function closeGateways(): Promise<void> {
  for (const c of clients) c.close();
  clients.clear();
  await Promise.all([...gateways].map((g) => g.close()));
  gateways.clear();
}
