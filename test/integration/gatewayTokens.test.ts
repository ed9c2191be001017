import { install } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { DataPointType, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { Redis } from "ioredis";
import WebSocket from "ws";
import { type GatewayError, type Status } from "../../src/client/index.js";
import { Gateway, refreshOf, type Identity, type JwtOptions } from "../../src/gateway/index.js";
import { InvalidInputError, Rollcall } from "../../src/index.js";
import { closeGateways, connect, SHORT, startGateway, token } from "../kit/gateway.js";
import { IMMEDIATE, client } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

class TestReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

const inSeconds = (s: number) => Math.floor(Date.now() / 1000) + s;

/** A WebSocket for the client that records the type of every frame the gateway sends it. */
function recording(received: string[]): typeof globalThis.WebSocket {
  class Recording extends WebSocket {
    constructor(...args: ConstructorParameters<typeof WebSocket>) {
      super(...args);
      this.on("message", (data: Buffer) =>
        received.push((JSON.parse(data.toString()) as { type: string }).type),
      );
    }
  }
  return Recording as unknown as typeof globalThis.WebSocket;
}

describe("gateway tokens, origins and refusals, with the browser client", () => {
  afterEach(closeGateways);

  it("sends the token as a subprotocol entry, never in the URL", async () => {
    const seen: IncomingMessage[] = [];
    const { url } = await startGateway({
      jwt: undefined,
      authenticate: (request) => {
        seen.push(request);
        return { user: "ann", rooms: ["*"] };
      },
    });
    const ann = connect(url, "ann", { token: () => "opaque-token" });
    await ann.join("doc");
    expect(seen[0]!.url).to.equal("/presence");
    expect(seen[0]!.headers["sec-websocket-protocol"]).to.equal(
      "rollcall.v2,rollcall.v1,rollcall.bearer.opaque-token",
    );
  });

  it("asks for a fresh token ahead of expiry and refreshes the socket: it outlives the first", async () => {
    // The gateway checks expiries against Date from an interval timer: both fake here, flowing
    // with real time until the test moves them past the first token's expiry.
    const timers = install({
      now: Date.now(),
      toFake: ["Date", "setInterval", "clearInterval"],
      shouldAdvanceTime: true,
    });
    try {
      const { url } = await startGateway();
      let tokens = 0;
      const statuses: Status[] = [];
      const received: string[] = [];
      const ann = connect(url, "ann", {
        token: () => token("ann", {}, inSeconds(tokens++ === 0 ? 2 : 3_600)),
        WebSocket: recording(received),
      });
      ann.on("status", (s: Status) => statuses.push(s));
      const room = await ann.join("doc");
      const firstExpiry = inSeconds(0) + 2;
      await eventually(() => received.includes("refreshed"), 5_000, "the refresh");
      expect(tokens).to.equal(2);
      timers.tick(firstExpiry * 1000 + 1_200 - Date.now());
      await room.setState({ after: "the first expiry" }); // answered on the same socket
      expect(statuses).to.deep.equal(["open"]);
      expect(ann.status).to.equal("open");
    } finally {
      await closeGateways(); // while its timers are the fake ones it set
      timers.uninstall();
    }
  });

  it("on 4001, reconnects at once with a fresh token, not after a backoff", async () => {
    const { url } = await startGateway({
      jwt: undefined,
      // Refreshes are refused: the socket expires, and a new upgrade gets a new identity.
      authenticate: (request) =>
        refreshOf(request) ? null : { user: "ann", rooms: ["*"], expiresAt: Date.now() + 1_500 },
    });
    const statuses: Status[] = [];
    const errors: GatewayError[] = [];
    const ann = connect(url, "ann", {
      token: () => "t",
      reconnectMs: { first: 20_000, max: 20_000 },
    });
    ann.on("status", (s: Status) => statuses.push(s));
    ann.on("error", (e: GatewayError) => errors.push(e));
    const room = await ann.join("doc");
    await eventually(() => statuses.length >= 3, 5_000);
    expect(statuses.slice(0, 3)).to.deep.equal(["open", "reconnecting", "open"]);
    expect(errors.map((e) => e.code)).to.deep.equal(["INVALID_TOKEN"]);
    await eventually(() => room.synced && room.roster.count === 1);
  });

  it("leaves, and tells the room, what a refreshed token no longer allows", async () => {
    const { url } = await startGateway();
    let tokens = 0;
    const ann = connect(url, "ann", {
      token: () =>
        tokens++ === 0
          ? token("ann", { rooms: ["doc", "team"] }, inSeconds(2))
          : token("ann", { rooms: ["doc"] }),
    });
    const [doc, team] = await Promise.all([ann.join("doc"), ann.join("team")]);
    const refused: GatewayError[] = [];
    team.on("error", (e: GatewayError) => refused.push(e));
    await eventually(() => refused.length === 1, 5_000);
    expect(refused[0]!.code).to.equal("FORBIDDEN");
    expect(doc.synced).to.equal(true);
    expect(ann.status).to.equal("open");
  });

  it("leaves other paths to the server's other upgrade listeners", async () => {
    const rollcall = new Rollcall(client(), { ...IMMEDIATE, ...SHORT });
    const gateway = new Gateway(rollcall, { jwt: { secret: "s".repeat(40) }, sweeper: false });
    const server = createServer();
    gateway.attach(server);
    const others: string[] = [];
    server.on("upgrade", (request: IncomingMessage, socket) => {
      if (request.url === "/presence") return;
      others.push(request.url!);
      socket.end("HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const status = await new Promise<number | undefined>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/chat`);
      ws.on("unexpected-response", (_q, response) => resolve(response.statusCode));
      ws.on("error", () => resolve(undefined));
    });
    expect([status, others]).to.deep.equal([418, ["/chat"]]);
    await gateway.close();
    server.close();
  });

  it("counts every refused upgrade by reason", async () => {
    const reader = new TestReader();
    const meter = new MeterProvider({ readers: [reader] }).getMeter("rollcall");
    const { url } = await startGateway({}, { ...SHORT, meter });
    const refuse = (headers: Record<string, string>, path = "/presence") =>
      new Promise<void>((resolve) => {
        const ws = new WebSocket(url.replace("/presence", path), ["rollcall.v1"], { headers });
        ws.on("unexpected-response", () => resolve());
        ws.on("error", () => resolve());
      });
    await refuse({});
    await refuse({ Origin: "https://evil.example", Authorization: `Bearer ${await token("a")}` });
    await refuse({}, "/elsewhere");
    const { resourceMetrics } = await reader.collect();
    const refusals = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .filter(
        (m) =>
          m.descriptor.name === "rollcall.gateway.refusals" &&
          m.dataPointType === DataPointType.SUM,
      )
      .flatMap((m) => m.dataPoints.map((p) => [p.attributes.reason, p.value]));
    expect(Object.fromEntries(refusals)).to.deep.equal({
      "no-token": 1,
      origin: 1,
      "not-found": 1,
    });
  });

  it("refuses bad gateway options with typed errors, bigints included", () => {
    const rollcall = new Rollcall(new Redis({ lazyConnect: true }));
    // Long enough for HS256: each option below is refused for its own fault.
    const s = "s".repeat(32);
    const bad: object[] = [
      { jwt: { secret: 10n } },
      { jwt: {} },
      { jwt: { secret: s, clockToleranceMs: 10n } },
      { jwt: { secret: s, allowNoExpiry: "yes" } },
      { jwt: { secret: s }, origins: ["https://app.example/path"] },
      { jwt: { secret: s }, origins: 10n },
      { jwt: { secret: s }, trustedProxies: ["proxy.example"] },
      { jwt: { secret: s }, limits: { maxSocketsPerUser: 10n } },
      { jwt: { secret: s }, authTimeoutMs: 10n },
      { jwt: { secret: s }, path: 10n },
      { jwt: { secret: s }, ids: "loose" },
    ];
    for (const options of bad) {
      expect(() => new Gateway(rollcall, options), JSON.stringify(Object.keys(options)))
        .to.throw(InvalidInputError)
        .with.property("code", "INVALID_OPTION");
    }
    // An HMAC secret shorter than its hash (RFC 7518 §3.2), for every algorithm allowed.
    const short: [JwtOptions, number][] = [
      [{ secret: "12345" }, 32],
      [{ secret: new Uint8Array(31) }, 32],
      [{ secret: s, algorithms: ["HS256", "HS512"] }, 64],
      [{ secret: "s".repeat(47), algorithms: ["HS384"] }, 48],
    ];
    for (const [jwt, needed] of short) {
      expect(() => new Gateway(rollcall, { jwt }))
        .to.throw(InvalidInputError, `at least ${needed} bytes`)
        .with.property("code", "INVALID_OPTION");
    }
    void new Gateway(rollcall, { jwt: { secret: new Uint8Array(32) }, sweeper: false }).close();
    for (const options of [
      { prefix: 10n },
      { buckets: 10n },
      { meter: 10n },
      { prefix: Object.create(null) as object },
    ]) {
      expect(() => new Rollcall(rollcall.redis, options as never))
        .to.throw(InvalidInputError)
        .with.property("code", "INVALID_OPTION");
    }
    rollcall.redis.disconnect();
  });

  it("takes an identity's expiry from the hook, and refuses one already past", async () => {
    const identities: Identity[] = [{ user: "ann", rooms: ["*"], expiresAt: Date.now() - 1 }];
    const { url } = await startGateway({ jwt: undefined, authenticate: () => identities.shift()! });
    const status = await new Promise<number | undefined>((resolve) => {
      const ws = new WebSocket(url, ["rollcall.v1"]);
      ws.on("unexpected-response", (_q, response) => resolve(response.statusCode));
    });
    expect(status).to.equal(401);
  });
});
