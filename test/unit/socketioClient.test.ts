import { install, type Clock } from "@sinonjs/fake-timers";
import { expect } from "chai";
import { SocketPresence, type SocketLike } from "../../src/client/socketio.js";
import type { PresenceEvent } from "../../src/protocol/events.js";
import type { Snapshot } from "../../src/protocol/replica.js";

/** A socket.io-client socket as far as the helper uses it: what it emitted, and a way in. */
function fakeSocket() {
  const listeners = new Map<string, (...args: unknown[]) => void>();
  const emitted: unknown[][] = [];
  const socket: SocketLike = {
    on: (event, listener) => listeners.set(event, listener),
    emit: (...args) => emitted.push(args),
  };
  return {
    socket,
    emitted,
    receive: (event: string, ...args: unknown[]) => listeners.get(event)!(...args),
  };
}

const snapshot = (seq: number, users: string[]): Snapshot => ({
  room: "r",
  epoch: "e1",
  seq,
  count: users.length,
  members: users.map((user) => ({ user, joinedAt: 1, state: null })),
  typing: [],
});

function join(user: string, seq: number, prev: number, count: number): PresenceEvent {
  return {
    v: 2,
    type: "join",
    room: "r",
    user,
    at: seq,
    epoch: "e1",
    seq,
    prev,
    state: null,
    roster: [],
    count,
  };
}

describe("rollcall/socket.io/client", () => {
  let clock: Clock;
  beforeEach(() => (clock = install({ toFake: ["setTimeout", "clearTimeout", "Date"] })));
  afterEach(() => clock.uninstall());

  it("holds events until the room's first snapshot, then applies those that follow it", () => {
    const { socket, receive } = fakeSocket();
    const presence = new SocketPresence(socket);
    const changes: string[] = [];
    presence.on("change", (room, { type, user }) => changes.push(`${room}:${type}:${user}`));
    receive("rollcall:event", join("bob", 3, 2, 2)); // before the snapshot: held
    receive("rollcall:event", join("cat", 4, 3, 3), "offset-1"); // a recovery offset after it
    receive("rollcall:snapshot", snapshot(3, ["ann", "bob"]));
    expect(presence.roster("r")?.members.map((m) => m.user)).to.deep.equal(["ann", "bob", "cat"]);
    expect(presence.rooms).to.deep.equal(["r"]);
    expect(changes).to.deep.equal(["r:join:ann", "r:join:bob", "r:join:cat"]);
  });

  it("asks the server for a snapshot on a gap, spaced out when gaps keep coming", () => {
    const { socket, emitted, receive } = fakeSocket();
    const presence = new SocketPresence(socket);
    receive("rollcall:snapshot", snapshot(3, ["ann"]));
    receive("rollcall:event", join("bob", 5, 4, 2)); // 4 is missing
    clock.tick(0);
    expect(emitted).to.deep.equal([["rollcall:snapshot", "r"]]);
    receive("rollcall:snapshot", snapshot(5, ["ann", "bob"]));
    receive("rollcall:event", join("cat", 7, 6, 3)); // another gap at once
    clock.tick(99);
    expect(emitted).to.have.length(1);
    clock.tick(1);
    expect(emitted).to.have.length(2);
    // Events are held meanwhile; a disconnect holds them too, until the next snapshot.
    expect(presence.roster("r")?.count).to.equal(2);
    receive("disconnect");
    receive("rollcall:event", join("dan", 8, 7, 4));
    expect(presence.roster("r")?.members.map((m) => m.user)).to.deep.equal(["ann", "bob"]);
  });

  it("sends typing at most once per interval and a stop only after it, and acks state", async () => {
    const { socket, emitted } = fakeSocket();
    const presence = new SocketPresence(socket, 2_000);
    presence.stopTyping("r");
    presence.typing("r");
    presence.typing("r");
    clock.tick(2_000);
    presence.typing("r");
    presence.stopTyping("r");
    expect(emitted.map((e) => e[0])).to.deep.equal([
      "rollcall:typing",
      "rollcall:typing",
      "rollcall:typing-stop",
    ]);
    const saved = presence.setState("r", { s: 1 });
    const ack = emitted.at(-1)!.at(-1) as (reply: unknown) => void;
    ack({ ok: false, code: "NOT_JOINED", message: "not in presence room r" });
    const error = await saved.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).to.deep.include({ name: "PresenceError", code: "NOT_JOINED", room: "r" });
  });
});
