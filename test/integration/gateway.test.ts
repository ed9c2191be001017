import { expect } from "chai";
import type { RosterChange } from "../../src/client/index.js";
import { closeGateways, connect, startGateway } from "../support/gateway.js";
import { eventually, listen } from "../support/redis.js";

describe("gateway and client", () => {
  afterEach(closeGateways);

  it("shows a join on one gateway to a client of another, with states and typing", async () => {
    const east = await startGateway();
    const west = await startGateway();
    const ann = connect(east.url, "ann");
    const bob = connect(west.url, "bob");
    const annRoom = await ann.join("doc", { state: { status: "online" } });
    expect(annRoom.roster.members.map((m) => m.user)).to.deep.equal(["ann"]);
    const changes: string[] = [];
    annRoom.on("change", (c: RosterChange) => changes.push(`${c.type}:${c.user}`));
    const bobRoom = await bob.join("doc");
    expect(bobRoom.roster.members.map((m) => [m.user, m.state])).to.deep.equal([
      ["ann", { status: "online" }],
      ["bob", null],
    ]);
    await eventually(() => annRoom.roster.count === 2);
    bobRoom.typing();
    await eventually(() => annRoom.roster.typing.includes("bob"));
    bobRoom.stopTyping();
    await eventually(() => annRoom.roster.typing.length === 0);
    await bobRoom.setState({ status: "away" });
    await eventually(() => annRoom.roster.members[1]?.state?.status === "away");
    bob.close();
    await eventually(() => annRoom.roster.count === 1);
    expect(changes).to.deep.equal([
      "join:bob",
      "typing-start:bob",
      "typing-stop:bob",
      "update:bob",
      "leave:bob",
    ]);
  });

  it("announces every room of a socket that closes without a word", async () => {
    const { url, rollcall } = await startGateway();
    const events = await listen([rollcall.channel("a"), rollcall.channel("b")]);
    const cy = connect(url, "cy");
    await Promise.all([cy.join("a"), cy.join("b")]);
    // The naive handler's `finally`: the gateway leaves every room when the socket goes.
    cy.close();
    await eventually(() => events.filter((e) => e.type === "leave").length === 2);
    expect((await rollcall.roster("a")).count).to.equal(0);
  });
});
