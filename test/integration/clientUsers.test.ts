import { expect } from "chai";
import WebSocket from "ws";
import type { GatewayError, UserList, UserStatus } from "../../src/client/index.js";
import type { Rollcall } from "../../src/index.js";
import { closeGateways, connect, startGateway, token } from "../kit/gateway.js";
import { eventually } from "../kit/wait.js";

/** Nobody expires while a test runs: every transition is one the test makes. */
const ENGINE = {
  presenceWindowMs: 60_000,
  typingWindowMs: 500,
  keyTtlMs: 180_000,
  userStatus: true,
};

/** A gateway that lets anyone follow anyone but `zed`. */
function gatewayOfContacts() {
  return startGateway(
    { authorizeUsers: (_identity, users) => users.filter((user) => user !== "zed") },
    ENGINE,
  );
}

/** A list's changes, as `online:bob` and `offline:bob`. */
function changesOf(list: UserList): string[] {
  const changes: string[] = [];
  list.on("change", (s: UserStatus) =>
    changes.push(`${s.online ? "online" : "offline"}:${s.user}`),
  );
  return changes;
}

const online = (list: UserList) => list.statuses.map((s) => [s.user, s.online]);

async function isOnline(rollcall: Rollcall, user: string): Promise<boolean> {
  return (await rollcall.status([user]))[0]!.online;
}

/** The ws WebSocket, each instance kept (the client's sockets, to cut), frames sent recorded. */
function tracking() {
  const sockets: WebSocket[] = [];
  const sent: string[] = [];
  class Tracked extends WebSocket {
    constructor(...args: ConstructorParameters<typeof WebSocket>) {
      super(...args);
      sockets.push(this);
    }
    override send(data: string): void {
      sent.push((JSON.parse(data) as { type: string }).type);
      super.send(data);
    }
  }
  return { sockets, sent, WebSocket: Tracked as unknown as typeof globalThis.WebSocket };
}

describe("the browser client's contact list (followUsers)", () => {
  afterEach(closeGateways);

  it("answers every user's status in the order asked, the denied apart, then each change", async () => {
    const { url, rollcall } = await gatewayOfContacts();
    await connect(url, "bob").join("lobby");
    await eventually(() => isOnline(rollcall, "bob"));
    const list = await connect(url, "ann").followUsers(["cy", "zed", "bob", "cy"]);
    expect(list.users).to.deep.equal(["cy", "zed", "bob"]);
    expect(online(list)).to.deep.equal([
      ["cy", false],
      ["bob", true],
    ]);
    expect(list.denied).to.deep.equal(["zed"]);
    expect(list.status("bob")!.since).to.be.a("number");
    expect(list.status("zed")).to.equal(undefined);
    const changes = changesOf(list);
    const cy = connect(url, "cy");
    await cy.join("lobby");
    await eventually(() => changes.length === 1);
    cy.close();
    await eventually(() => changes.length === 2);
    expect(changes).to.deep.equal(["online:cy", "offline:cy"]);
    expect(list.status("cy")!.lastSeenAt).to.be.at.least(list.status("bob")!.since!);
  });

  it("fails with the gateway's refusal: FORBIDDEN without an authorizeUsers hook", async () => {
    const { url } = await startGateway({}, ENGINE);
    const failure = await connect(url, "ann")
      .followUsers(["bob"])
      .catch((error: GatewayError) => error);
    expect(failure).to.include({ code: "FORBIDDEN" });
  });

  it("follows again after a reconnect, telling what changed meanwhile", async () => {
    const { url, rollcall } = await gatewayOfContacts();
    const bob = connect(url, "bob");
    await bob.join("lobby");
    await eventually(() => isOnline(rollcall, "bob"));
    // The reconnect waits for its token until the test lets it go.
    let letIn = () => undefined as void;
    let gate: Promise<void> = Promise.resolve();
    const { sockets, WebSocket } = tracking();
    const ann = connect(url, "ann", {
      WebSocket,
      token: async () => {
        await gate;
        return token("ann");
      },
    });
    const list = await ann.followUsers(["bob", "cy"]);
    const changes = changesOf(list);
    gate = new Promise((resolve) => (letIn = resolve));
    sockets[0]!.terminate();
    await eventually(() => ann.status === "reconnecting");
    bob.close();
    await connect(url, "cy").join("lobby");
    await eventually(async () => !(await isOnline(rollcall, "bob")));
    await eventually(() => isOnline(rollcall, "cy"));
    letIn();
    await eventually(() => changes.length === 2);
    expect(changes).to.deep.equal(["offline:bob", "online:cy"]);
    expect(online(list)).to.deep.equal([
      ["bob", false],
      ["cy", true],
    ]);
  });

  it("keeps one list per client: a later one replaces it, and close() unfollows", async () => {
    const { url, rollcall } = await gatewayOfContacts();
    const { sent, WebSocket } = tracking();
    const ann = connect(url, "ann", { WebSocket });
    // Replaced before its answer came: that answer is the first list's, never the second's.
    await eventually(() => ann.status === "open");
    const replaced = ann.followUsers(["zed", "bob"]).catch((error: GatewayError) => error);
    const first = await ann.followUsers(["bob"]);
    expect(await replaced).to.include({ code: "CLOSED" });
    expect(online(first)).to.deep.equal([["bob", false]]);
    expect(first.denied).to.deep.equal([]);
    const firstChanges = changesOf(first);
    const second = await ann.followUsers(["cy"]);
    const secondChanges = changesOf(second);
    // The first list's close leaves the second's follow alone: no unfollow goes out.
    await first.close();
    await connect(url, "bob").join("lobby");
    await connect(url, "cy").join("lobby");
    await eventually(() => secondChanges.length === 1);
    expect(await isOnline(rollcall, "bob")).to.equal(true);
    expect(firstChanges).to.deep.equal([]);
    expect(sent).to.deep.equal(["follow-users", "follow-users", "follow-users"]);
    await second.close();
    expect(sent.slice(3)).to.deep.equal(["unfollow-users"]);
    expect(await ann.followUsers(["bob"]).then(online)).to.deep.equal([["bob", true]]);
  });
});
