// The pure parts of rollcall/hocuspocus: the member state mirrored from awareness, and the
// throttle that sends it at most once per interval.
import { install, type Clock } from "@sinonjs/fake-timers";
import { expect } from "chai";
import {
  clientsOf,
  MAX_CLIENTS,
  MIN_STATE_BYTES,
  mirroredState,
  Throttle,
} from "../../src/hocuspocus/state.js";
import { encodeState } from "../../src/protocol/state.js";

describe("rollcall/hocuspocus: the mirrored awareness state", () => {
  it("keeps the client ids and the fields that fit, in key order", () => {
    const awareness = { user: { name: "ann" }, big: "x".repeat(300), cursor: { x: 1 } };
    const state = mirroredState([7, 9], awareness, 200);
    expect(state).to.deep.equal({
      clients: [7, 9],
      awareness: { cursor: { x: 1 }, user: { name: "ann" } },
    });
    expect(encodeState(state, 200).length).to.be.at.most(200);
    expect(mirroredState([7], awareness, 1_024).awareness).to.have.keys("big", "cursor", "user");
  });

  it("leaves out what JSON cannot carry, bad client ids, and ids past the limit", () => {
    const ids = Array.from({ length: MAX_CLIENTS + 5 }, (_, i) => 4_294_967_295 - i);
    const state = mirroredState([...ids, -1, 1.5], { n: Number.NaN, ok: true }, MIN_STATE_BYTES);
    expect(state.clients).to.deep.equal(ids.slice(0, MAX_CLIENTS));
    expect(state.awareness).to.deep.equal({ ok: true });
    expect(mirroredState([], null, MIN_STATE_BYTES)).to.deep.equal({ clients: [], awareness: {} });
  });

  it("reads the client ids back from a member state, and none from any other", () => {
    expect(clientsOf(mirroredState([3, 4], {}, 1_024))).to.deep.equal([3, 4]);
    expect(clientsOf({ clients: [1, "2", -3] })).to.deep.equal([1]);
    expect(clientsOf({ status: "online" })).to.deep.equal([]);
    expect(clientsOf(null)).to.deep.equal([]);
  });
});

describe("rollcall/hocuspocus: the state throttle", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setTimeout", "clearTimeout"] })));
  afterEach(() => clock.uninstall());

  it("sends a key's first change at once, and the changes of the next interval once at its end", () => {
    const sent: [string, number][] = [];
    const throttle = new Throttle<string>(1_000, (key) => sent.push([key, clock.now]));
    throttle.changed("ann");
    for (let i = 0; i < 10; i++) throttle.changed("ann");
    throttle.changed("bob");
    expect(sent).to.deep.equal([
      ["ann", 0],
      ["bob", 0],
    ]);
    clock.tick(999);
    expect(sent).to.have.length(2);
    clock.tick(1);
    expect(sent).to.deep.equal([
      ["ann", 0],
      ["bob", 0],
      ["ann", 1_000],
    ]);
    clock.tick(5_000); // nothing waits: nothing more is sent, and the next change goes at once
    throttle.changed("ann");
    expect(sent.at(-1)).to.deep.equal(["ann", 6_000]);
  });

  it("drops a waiting change when a key is forgotten or the throttle cleared", () => {
    const sent: string[] = [];
    const throttle = new Throttle<string>(1_000, (key) => sent.push(key));
    throttle.changed("ann");
    throttle.changed("ann");
    throttle.changed("bob");
    throttle.changed("bob");
    throttle.forget("ann");
    throttle.clear();
    clock.tick(2_000);
    expect(sent).to.deep.equal(["ann", "bob"]);
  });
});
