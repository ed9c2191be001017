import { expect } from "chai";
import WebSocket from "ws";
import type { GatewayError, Room } from "../../src/client/index.js";
import { BEARER_PROTOCOL, SUBPROTOCOL_V2, type ServerFrame } from "../../src/gateway/index.js";
import type { Rollcall } from "../../src/index.js";
import { closeGateways, connect, SHORT, startGateway, token } from "../kit/gateway.js";
import { caughtUp, listen } from "../kit/redis.js";
import { eventually } from "../kit/wait.js";

/** The gateway's engine keeps users' status: status() shows what an invisible join hides. */
const USER_STATUS = { ...SHORT, userStatus: true };

const users = (room: Room) => room.roster.members.map((m) => m.user);

/** The records of a room's invisible connections (the engine's hidden room, in its bucket). */
function hiddenKey(rollcall: Rollcall, room: string): string {
  return `${rollcall.layout.tag(rollcall.bucketOf(room))}:u:\u0001${room}`;
}

/** Whether a user holds a connection among a room's invisible ones. */
async function hidden(rollcall: Rollcall, room: string, user: string): Promise<boolean> {
  return (await rollcall.redis.hexists(hiddenKey(rollcall, room), user)) === 1;
}

/** What others read of a room: its members, its user count, and whether `user` is online. */
async function seen(rollcall: Rollcall, room: string, user: string) {
  await rollcall.applyUserChanges(rollcall.bucketOf(room));
  const [status] = await rollcall.status([user]);
  return {
    members: (await rollcall.roster(room)).members.map((m) => m.user),
    count: (await rollcall.count(room)).users,
    online: status!.online,
  };
}

/** A raw protocol socket: every frame it got. */
async function raw(url: string, user: string, claims: Record<string, unknown> = {}) {
  const ws = new WebSocket(url, [SUBPROTOCOL_V2, BEARER_PROTOCOL + (await token(user, claims))]);
  const frames: ServerFrame[] = [];
  ws.on("message", (data: Buffer) => frames.push(JSON.parse(data.toString()) as ServerFrame));
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  return {
    send: (frame: Record<string, unknown>) => ws.send(JSON.stringify(frame)),
    /** The reply to the request of `ref`. */
    reply: async (ref: string): Promise<ServerFrame> => {
      const answer = () => frames.find((f) => "ref" in f && f.ref === ref);
      await eventually(() => answer() !== undefined);
      return answer()!;
    },
    close: () => ws.close(),
  };
}

describe("invisible connections through the gateway", () => {
  afterEach(closeGateways);

  it("joins unseen by its join frame, hears the room, and leaves without a word", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    const events = await listen([rollcall.channel("doc")]);
    const bobRoom = await connect(url, "bob").join("doc");
    const eveRoom = await connect(url, "eve").join("doc", { invisible: true });
    expect(users(eveRoom)).to.deep.equal(["bob"]);
    expect(await hidden(rollcall, "doc", "eve")).to.equal(true);
    const danRoom = await connect(url, "dan").join("doc");
    bobRoom.typing();
    await eventually(() => eveRoom.roster.typing.includes("bob"));
    expect(users(eveRoom)).to.deep.equal(["bob", "dan"]);
    expect(await seen(rollcall, "doc", "eve")).to.deep.equal({
      members: ["bob", "dan"],
      count: 2,
      online: false,
    });
    expect(users(bobRoom)).to.deep.equal(["bob", "dan"]);
    // Answered once the leave is done: eve's connection is gone, not left to expire.
    await eveRoom.leave();
    expect(await hidden(rollcall, "doc", "eve")).to.equal(false);
    await danRoom.leave();
    await caughtUp(events);
    expect(events.map((e) => `${e.type}:${e.user}`)).to.deep.equal([
      "join:bob",
      "join:dan",
      "typing-start:bob",
      "leave:dan",
    ]);
  });

  it("makes every room of a token with the invisible claim unseen, and refuses its typing and state", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    const events = await listen([rollcall.channel("doc")]);
    const bobRoom = await connect(url, "bob").join("doc");
    const eve = connect(url, "eve", { token: () => token("eve", { invisible: true }) });
    const errors: GatewayError[] = [];
    eve.on("error", (error) => errors.push(error));
    const eveRoom = await eve.join("doc");
    expect(users(eveRoom)).to.deep.equal(["bob"]);
    expect(await seen(rollcall, "doc", "eve")).to.deep.equal({
      members: ["bob"],
      count: 1,
      online: false,
    });
    // The client does not know the token's claim: the gateway refuses what would show eve.
    eveRoom.typing();
    await eventually(() => errors.length === 1);
    expect(errors[0]).to.include({ code: "FORBIDDEN" });
    expect(errors[0]!.message).to.include("invisible members do not type");
    const refused = await eveRoom.setState({ status: "away" }).catch((e: GatewayError) => e);
    expect(refused).to.include({ code: "FORBIDDEN" });
    bobRoom.typing();
    await eventually(() => eveRoom.roster.typing.includes("bob"));
    eve.close();
    await eventually(async () => !(await hidden(rollcall, "doc", "eve")));
    await caughtUp(events);
    expect(events.map((e) => `${e.type}:${e.user}`)).to.deep.equal([
      "join:bob",
      "typing-start:bob",
    ]);
  });

  it("keeps an invisible socket unseen through the gateway's heartbeat rounds", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    await connect(url, "eve").join("doc", { invisible: true });
    const key = hiddenKey(rollcall, "doc");
    // The key's expiry, put off by a heartbeat: a round of the gateway's wheel (no frame is
    // sent) beats eve's connection in the hidden room, not in the room.
    const expiry = async () => Number(await rollcall.redis.call("PEXPIRETIME", key));
    const joined = await expiry();
    await eventually(async () => (await expiry()) > joined);
    expect(await seen(rollcall, "doc", "eve")).to.deep.equal({
      members: [],
      count: 0,
      online: false,
    });
  });

  it("shows a user whose other socket in the room is visible", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    const bobRoom = await connect(url, "bob").join("doc");
    const phone = await connect(url, "eve").join("doc", { invisible: true });
    const laptop = connect(url, "eve");
    await laptop.join("doc");
    await eventually(() => users(bobRoom).includes("eve"));
    expect(await seen(rollcall, "doc", "eve")).to.deep.equal({
      members: ["bob", "eve"],
      count: 2,
      online: true,
    });
    // The visible socket goes: eve leaves, as others see it; the invisible one stays, unseen.
    laptop.close();
    await eventually(() => !users(bobRoom).includes("eve"));
    expect(await seen(rollcall, "doc", "eve")).to.deep.equal({
      members: ["bob"],
      count: 1,
      online: false,
    });
    expect(await hidden(rollcall, "doc", "eve")).to.equal(true);
    expect(users(phone)).to.deep.equal(["bob"]);
  });

  it("switches a socket's visibility in a room it joins again: a leave, then a join", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    const events = await listen([rollcall.channel("doc")]);
    const ann = await raw(url, "ann");
    ann.send({ type: "join", room: "doc", ref: "seen" });
    await ann.reply("seen");
    ann.send({ type: "join", room: "doc", invisible: true, ref: "unseen" });
    const unseen = await ann.reply("unseen");
    expect(unseen.type === "snapshot" && unseen.roster.members).to.deep.equal([]);
    expect(await seen(rollcall, "doc", "ann")).to.deep.equal({
      members: [],
      count: 0,
      online: false,
    });
    expect(await hidden(rollcall, "doc", "ann")).to.equal(true);
    ann.send({ type: "typing", room: "doc", ref: "typing" });
    expect(await ann.reply("typing")).to.include({ type: "error", code: "FORBIDDEN" });
    ann.send({ type: "join", room: "doc", ref: "back" });
    await ann.reply("back");
    expect(await hidden(rollcall, "doc", "ann")).to.equal(false);
    expect(await seen(rollcall, "doc", "ann")).to.deep.include({ members: ["ann"], online: true });
    await caughtUp(events);
    expect(events.map((e) => `${e.type}:${e.user}`)).to.deep.equal([
      "join:ann",
      "leave:ann",
      "join:ann",
    ]);
  });

  it("counts invisible members apart from the room's capacity, and a switch into a full room out", async () => {
    const { url, rollcall } = await startGateway({ capacity: 1 }, USER_STATUS);
    await connect(url, "bob").join("doc");
    const ann = await raw(url, "ann");
    ann.send({ type: "join", room: "doc", invisible: true, ref: "unseen" });
    expect(await ann.reply("unseen")).to.include({ type: "snapshot" });
    ann.send({ type: "join", room: "doc", ref: "seen" });
    expect(await ann.reply("seen")).to.include({ type: "error", code: "ROOM_FULL" });
    // Out of the room, hidden or not: no heartbeat round of the gateway brings ann back.
    expect(await hidden(rollcall, "doc", "ann")).to.equal(false);
    ann.send({ type: "typing", room: "doc", ref: "typing" });
    expect(await ann.reply("typing")).to.include({ type: "error", code: "NOT_JOINED" });
    expect(await seen(rollcall, "doc", "ann")).to.deep.include({ members: ["bob"], online: false });
  });

  it("refuses an invisible that is not a boolean, in a frame, a token or an identity", async () => {
    const { url, rollcall } = await startGateway({}, USER_STATUS);
    const ann = await raw(url, "ann");
    ann.send({ type: "join", room: "doc", invisible: "yes", ref: "bad" });
    expect(await ann.reply("bad")).to.include({ type: "error", code: "BAD_FRAME" });
    ann.send({ type: "typing", room: "doc", ref: "typing" });
    expect(await ann.reply("typing")).to.include({ type: "error", code: "NOT_JOINED" });
    expect(await seen(rollcall, "doc", "ann")).to.deep.equal({
      members: [],
      count: 0,
      online: false,
    });
    expect(await hidden(rollcall, "doc", "ann")).to.equal(false);
    expect(await refusal(url, { invisible: "yes" })).to.equal("401 invalid-token");
    const hooked = await startGateway(
      {
        jwt: undefined,
        authenticate: () => ({ user: "ann", rooms: ["*"], invisible: "yes" as unknown as boolean }),
      },
      USER_STATUS,
    );
    const reported: Error[] = [];
    hooked.gateway.on("error", (error) => reported.push(error));
    // The hook's bug: refused as a token would be, and reported.
    expect(await refusal(hooked.url, {})).to.equal("401 refused");
    expect(reported.map((e) => e.message)).to.deep.equal([
      'an identity\'s invisible must be a boolean, got "yes"',
    ]);
  });
});

/** The upgrade of a token with these claims is refused: its HTTP status and the body's reason. */
async function refusal(url: string, claims: Record<string, unknown>): Promise<string> {
  const ws = new WebSocket(url, [SUBPROTOCOL_V2, BEARER_PROTOCOL + (await token("ann", claims))]);
  ws.on("error", () => undefined);
  return new Promise<string>((resolve) => {
    ws.once("open", () => {
      ws.close();
      resolve("101 opened");
    });
    ws.once("unexpected-response", (_request, response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve(`${response.statusCode} ${body.split(":")[0]}`));
    });
  });
}
