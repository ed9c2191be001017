import { parseEvent, Rollcall } from "../src/index.js";
import { populate } from "./heartbeat.js";
import { members, STEADY } from "./population.js";
import type { Lab } from "./lab.js";
import { NaiveTracker, type NaiveEvent } from "../test/kit/naive.js";
import type { Progress } from "./progress.js";
import type { Row, Section } from "./section.js";
import { number, percentileCells, PERCENTILES, table } from "./format.js";
import { histogram, percentiles, type Percentiles } from "./stats.js";

/** Events timed per variant, over this many rooms. */
export interface FanoutProfile {
  samples: number;
  rooms: number;
}

export type FanoutEvent = "join" | "typing" | "leave";

export interface FanoutResult {
  event: FanoutEvent;
  variant: "rollcall" | "naive";
  /** From the call on one connection to the event's arrival on another, µs. */
  us: Percentiles;
}

const TIMEOUT_MS = 5_000;

/** Arrival times of awaited events, keyed by who awaits them. */
export class Inbox {
  private readonly waiting = new Map<string, (at: number) => void>();

  expect(key: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        reject(new Error(`no ${key} event within ${TIMEOUT_MS} ms`));
      }, TIMEOUT_MS);
      this.waiting.set(key, (at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  }

  /** An event arrived (now, or at `at` when the receiver stamped it on arrival). */
  deliver(key: string, at = performance.now()): void {
    const arrived = this.waiting.get(key);
    this.waiting.delete(key);
    arrived?.(at);
  }
}

function fanoutSteps(): number {
  return 2;
}

/**
 * Join, typing and leave of a newcomer in rooms of 9 present users, one at a time: the instance
 * making the change and the subscriber each have their own connection, as on two servers.
 */
async function benchFanout(
  lab: Lab,
  profile: FanoutProfile,
  progress: Progress,
): Promise<FanoutResult[]> {
  const { samples, rooms: roomCount } = profile;
  const rooms = Array.from({ length: roomCount }, (_, i) => `fan-${i}`);
  const inbox = new Inbox();
  const rollcall = new Rollcall(lab.connect(), STEADY);
  const naive = new NaiveTracker(lab.connect(), STEADY.presenceWindowMs! / 1000);
  await progress.step("fan-out: rooms and subscribers", async () => {
    await lab.flush();
    await populate(lab, members(roomCount, 9, "fan"));
    const sharded = lab.connect();
    sharded.on("smessage", (_channel: string, message: string) => {
      const e = parseEvent(message);
      inbox.deliver(`rollcall ${e.type} ${e.room} ${e.user}`);
    });
    await sharded.ssubscribe(...rooms.map((room) => rollcall.channel(room)));
    const plain = lab.connect();
    plain.on("message", (_channel: string, message: string) => {
      const e = JSON.parse(message) as NaiveEvent;
      inbox.deliver(`naive ${e.type} ${e.conversation_id} ${e.user_id}`);
    });
    await plain.subscribe(...rooms.map((room) => naive.channel(room)));
  });

  const recorded = new Map<string, ReturnType<typeof histogram>>();
  const time = async (key: string, series: string, call: () => Promise<unknown>) => {
    const started = performance.now();
    const [arrival] = await Promise.all([inbox.expect(key), call()]);
    const h = recorded.get(series) ?? histogram();
    recorded.set(series, h);
    h.recordValue(Math.round((arrival - started) * 1000));
  };

  await progress.step("fan-out: join, typing, leave", async () => {
    for (let i = 0; i < samples; i++) {
      const room = rooms[i % rooms.length]!;
      const user = `newcomer-${i}`;
      const at = `${room} ${user}`;
      await time(`rollcall join ${at}`, "rollcall join", () =>
        rollcall.heartbeat(room, user, "conn-1"),
      );
      await time(`naive presence.join ${at}`, "naive join", () => naive.heartbeat(room, user));
      await time(`rollcall typing-start ${at}`, "rollcall typing", () =>
        rollcall.startTyping(room, user),
      );
      await time(`naive presence.typing ${at}`, "naive typing", () => naive.typing(room, user));
      await time(`rollcall leave ${at}`, "rollcall leave", () =>
        rollcall.leave(room, user, "conn-1"),
      );
      await time(`naive presence.leave ${at}`, "naive leave", () => naive.disconnect(room, user));
    }
  });

  const results: FanoutResult[] = [];
  for (const event of ["join", "typing", "leave"] as const) {
    for (const variant of ["rollcall", "naive"] as const) {
      results.push({ event, variant, us: percentiles(recorded.get(`${variant} ${event}`)!) });
    }
  }
  return results;
}

function fanoutSection(fanout: FanoutResult[]): string {
  return [
    "## Fan-out latency (µs, call on one connection to the event on another)",
    "",
    "A newcomer joins a room of 9, starts typing, leaves; rollcall publishes from the script " +
      "(SPUBLISH), the baseline after its own round trips (roster read, then PUBLISH).",
    "",
    table(
      ["event", "variant", ...PERCENTILES, "samples"],
      fanout.map((f) => [
        f.event,
        f.variant === "rollcall" ? "rollcall" : "baseline",
        ...percentileCells(f.us),
        number(f.us.count),
      ]),
    ),
  ].join("\n");
}

/** Join, typing and leave events from the call on one connection to the event on another. */
export const fanout: Section<FanoutProfile, FanoutResult[]> = {
  name: "fanout",
  profiles: { full: { samples: 2_000, rooms: 20 }, smoke: { samples: 30, rooms: 5 } },
  steps: fanoutSteps,
  run: benchFanout,
  report: fanoutSection,
  rows: (results) =>
    results.map((f): Row => ({
      name: `fan-out p50, ${f.event}, ${f.variant === "rollcall" ? "rollcall" : "baseline"}`,
      value: f.us.p50,
      unit: "µs",
      note: `p99 ${number(f.us.p99)} µs`,
    })),
};
