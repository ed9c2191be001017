import { expect } from "chai";
import { RoomFeed } from "../../src/runtime/feed.js";
import type { PresenceEvent } from "../../src/protocol/events.js";

function join(user: string, seq: number, prev: number, epoch = "e"): PresenceEvent {
  const base = { v: 2, room: "r", user, at: 1, epoch, seq, prev } as const;
  return { ...base, type: "join", state: null, roster: [], count: seq };
}

const snapshot = (seq: number, epoch = "e") =>
  ({ room: "r", epoch, seq, count: seq, members: [], typing: [] }) as const;

/** A room feed with one follower ("s"), and what the room heard (Sink.heard), as user:seq. */
function feed() {
  const heard: string[] = [];
  const sent: string[] = [];
  const f = new RoomFeed<string>(
    "r",
    {
      events: (_to, batch) => sent.push(...batch.events.map((e) => `${e.user}:${e.seq}`)),
      snapshot: () => undefined,
      heard: (room, events) => heard.push(...events.map((e) => `${room} ${e.user}:${e.seq}`)),
    },
    { fromMembers: 1_000, intervalMs: 50 },
  );
  f.follows.set("s", { types: null, last: null });
  return { f, heard, sent };
}

describe("what a room heard (Sink.heard)", () => {
  it("is every event its first snapshot covers since it was subscribed, then those it passes on, once each", () => {
    const { f, heard, sent } = feed();
    f.receive(join("a", 1, 0)); // before the first follower's snapshot, which has it
    f.restart("s", snapshot(2));
    f.receive(join("b", 2, 1)); // on its way while the snapshot was read: it has it too
    f.receive(join("a", 1, 0)); // delivered twice
    f.receive(join("c", 3, 2));
    f.receive(join("b", 2, 1)); // and again, after the snapshot's chain moved on
    expect(heard).to.deep.equal(["r a:1", "r b:2", "r c:3"]);
    expect(sent).to.deep.equal(["c:3"]);
  });

  it("leaves out held events of another epoch, and covers nothing once the snapshot's chain moved on", () => {
    const { f, heard } = feed();
    f.receive(join("old", 9, 8, "e0"));
    f.receive(join("a", 1, 0));
    f.restart("s", snapshot(1));
    f.receive(join("b", 2, 1));
    f.receive(join("x", 1, 0)); // claims a number the snapshot covers: not rollcall's, not heard
    expect(heard).to.deep.equal(["r a:1", "r b:2"]);
  });
});
