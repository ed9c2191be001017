import WebSocket, { type RawData } from "ws";
import {
  BEARER_PROTOCOL,
  SUBPROTOCOL_V2,
  type ClientFrame,
  type ServerFrame,
} from "../src/gateway/index.js";
import type { RollcallOptions } from "../src/index.js";
import { GatewayChild, token } from "../test/kit/gatewayChild.js";
import { BenchSocket } from "./benchSocket.js";
import { number, table } from "./format.js";
import type { Lab } from "./lab.js";
import type { Progress } from "./progress.js";
import type { Row, Section } from "./section.js";
import { median } from "./stats.js";

/**
 * How soon a crash reaches a socket that follows the user (`follow-users`): a user's socket is
 * joined to a room of one gateway process, a second socket follows the user on another, which
 * runs the Sweeper. Then either the user's gateway process is SIGKILLed (nothing leaves: the
 * user's connection expires a presence window after its last heartbeat, and the Sweeper ends it,
 * a leave grace later) or the user's socket is cut, TCP torn down without a close frame (the
 * gateway leaves at once: the Sweeper ends it a grace later). Timed from the kill to the
 * following socket's `users` frame that says offline, against the presence window, the grace
 * and a second (a Sweeper pass, and delivery).
 */

export interface UsersFollowProfile {
  trials: number;
  presenceWindowMs: number;
  leaveGraceMs: number;
  sweepIntervalMs: number;
}

export const CRASHES = ["process killed", "socket cut"] as const;
export type Crash = (typeof CRASHES)[number];

export interface CrashResult {
  crash: Crash;
  /** Per trial: ms from the kill to the follower's offline frame. */
  ms: number[];
}

export interface UsersFollowResults {
  presenceWindowMs: number;
  leaveGraceMs: number;
  sweepIntervalMs: number;
  /** presenceWindowMs + leaveGraceMs + 1 000. */
  targetMs: number;
  crashes: CrashResult[];
}

/** Past this beyond the target, a trial has failed: the run stops. */
const GIVE_UP_MS = 15_000;

/** A raw protocol version 2 socket: each user's status as its `users` frames say, and when. */
class Follower {
  /** Called with each status a `users` frame carries, and its arrival time. */
  onStatus: ((user: string, online: boolean, at: number) => void) | undefined;
  private readonly replies = new Map<string, (frame: ServerFrame) => void>();

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: RawData) => {
      const at = performance.now();
      const frame = JSON.parse((data as Buffer).toString("utf8")) as ServerFrame;
      if (frame.type === "users") {
        for (const s of frame.statuses) this.onStatus?.(s.user, s.online, at);
      }
      const ref = "ref" in frame ? frame.ref : undefined;
      if (ref !== undefined) this.replies.get(ref)?.(frame);
    });
  }

  static async open(url: string, user: string): Promise<Follower> {
    const ws = new WebSocket(url, [SUBPROTOCOL_V2, BEARER_PROTOCOL + (await token(user))], {
      perMessageDeflate: false,
    });
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    return new Follower(ws);
  }

  /** Sends a frame; resolves with its reply, rejects on an error frame. */
  request(frame: ClientFrame & { ref: string }): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      this.replies.set(frame.ref, (reply) => {
        this.replies.delete(frame.ref);
        if (reply.type === "error") reject(new Error(`${reply.code}: ${reply.message}`));
        else resolve(reply);
      });
      this.ws.send(JSON.stringify(frame));
    });
  }
}

/** Resolves with the time `user` is first seen with status `online` from now on. */
function seen(follower: Follower, user: string, online: boolean, withinMs: number) {
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`the follower never saw ${user} ${online ? "online" : "offline"}`));
    }, withinMs);
    follower.onStatus = (who, isOnline, at) => {
      if (who !== user || isOnline !== online) return;
      clearTimeout(timer);
      resolve(at);
    };
  });
}

async function benchUsersFollow(
  lab: Lab,
  profile: UsersFollowProfile,
  progress: Progress,
): Promise<UsersFollowResults> {
  const { trials, presenceWindowMs, leaveGraceMs, sweepIntervalMs } = profile;
  const engine: RollcallOptions = {
    presenceWindowMs,
    typingWindowMs: presenceWindowMs / 2,
    leaveGraceMs,
    prefix: "follow",
    userStatus: true,
  };
  const targetMs = presenceWindowMs + leaveGraceMs + 1_000;
  const watching = await progress.step("users follow: the following gateway", () =>
    GatewayChild.start(lab.url, false, {
      engine,
      gateway: { sweeper: { intervalMs: sweepIntervalMs } },
      followAnyone: true,
    }),
  );
  const crashes: CrashResult[] = [];
  try {
    const follower = await Follower.open(watching.url, "follower");
    for (const crash of CRASHES) {
      const ms: number[] = [];
      for (let trial = 0; trial < trials; trial++) {
        const label = `users follow: ${crash}, trial ${trial + 1}/${trials}`;
        ms.push(await progress.step(label, () => trialOf(crash, `${crash}-${trial}`)));
      }
      crashes.push({ crash, ms });
    }
    follower.ws.close();
    await watching.checkErrors();

    /** One crash of a user's only connection, timed until the follower hears them offline. */
    async function trialOf(crash: Crash, name: string): Promise<number> {
      const user = name.replaceAll(" ", "-");
      await follower.request({ type: "follow-users", users: [user], ref: user });
      // The socket cut is the following gateway's own: no process to start.
      const held =
        crash === "process killed"
          ? await GatewayChild.start(lab.url, false, { engine })
          : watching;
      try {
        const online = seen(follower, user, true, GIVE_UP_MS);
        const socket = await BenchSocket.open(held.url, user);
        await socket.request({ type: "join", room: `room-${user}` });
        await online;
        const offline = seen(follower, user, false, targetMs + GIVE_UP_MS);
        const killedAt = performance.now();
        if (crash === "process killed") await held.kill();
        else socket.ws.terminate();
        return (await offline) - killedAt;
      } finally {
        if (held !== watching) await held.kill();
      }
    }
  } finally {
    await watching.stop();
  }
  return { presenceWindowMs, leaveGraceMs, sweepIntervalMs, targetMs, crashes };
}

const maxOf = (ms: readonly number[]) => Math.max(...ms);

function report(r: UsersFollowResults): string {
  return [
    "## Users: a crash reaching a following socket",
    "",
    `A user's only socket, joined to a room, and a socket of another gateway process that ` +
      `follows the user (\`follow-users\`); that gateway runs the Sweeper (a pass every ` +
      `${number(r.sweepIntervalMs)} ms). Presence window ${number(r.presenceWindowMs)} ms, leave ` +
      `grace ${number(r.leaveGraceMs)} ms. *Process killed*: the user's gateway process is ` +
      `SIGKILLed, nothing leaves, the connection expires a window after its last heartbeat. ` +
      `*Socket cut*: the user's TCP connection is torn down without a close frame, the gateway ` +
      `leaves at once. Timed from the kill to the \`users\` frame saying offline, against the ` +
      `window + the grace + 1 s (${number(r.targetMs)} ms).`,
    "",
    table(
      ["crash", "trials", "p50 ms", "max ms", "target ms", "each trial, ms"],
      r.crashes.map((c) => [
        c.crash,
        c.ms.length,
        number(median(c.ms, (ms) => ms)),
        number(maxOf(c.ms)),
        `≤ ${number(r.targetMs)}`,
        c.ms.map((ms) => number(ms)).join(", "),
      ]),
    ),
    "",
  ].join("\n");
}

function rows(r: UsersFollowResults): Row[] {
  return r.crashes.map((c) => ({
    name:
      `an offline transition reaches a following socket within window + grace + 1 s of a ` +
      `crash (${c.crash}), max of ${c.ms.length}`,
    value: maxOf(c.ms),
    unit: "ms",
    note: `p50 ${number(median(c.ms, (ms) => ms))} ms`,
    target: { op: "≤", limit: r.targetMs },
  }));
}

/** How soon a following socket hears of a crash. */
export const usersFollow: Section<UsersFollowProfile, UsersFollowResults> = {
  name: "users-follow",
  profiles: {
    full: { trials: 8, presenceWindowMs: 2_000, leaveGraceMs: 500, sweepIntervalMs: 1_000 },
    smoke: { trials: 1, presenceWindowMs: 2_000, leaveGraceMs: 500, sweepIntervalMs: 1_000 },
  },
  steps: (p) => 1 + CRASHES.length * p.trials,
  run: benchUsersFollow,
  report,
  rows,
};
