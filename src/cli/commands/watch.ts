import { RollcallError } from "../../protocol/errors.js";
import type { RosterChange } from "../../protocol/replica.js";
import { Subscriber } from "../../runtime/subscriber.js";
import type { RoomWatch, SyncReason } from "../../runtime/watch.js";
import type { Command } from "../args.js";
import { deploymentRollcall, targetName, withClient } from "../connect.js";
import { problem } from "../errors.js";
import { compactJson, paint, print, summary } from "../format.js";

const COLOURS = {
  join: "green",
  leave: "red",
  update: "yellow",
  "typing-start": "dim",
  "typing-stop": "dim",
} as const;

/**
 * `watch ROOM`: the room's snapshot, then each change as a RoomWatch applies it, with the roster
 * after it, until SIGINT or SIGTERM.
 */
export async function watch({ args: [room = ""], target }: Command): Promise<number> {
  await withClient(
    target,
    async (client) => {
      const subscriber = new Subscriber(await deploymentRollcall(client, target.prefix));
      // An outage fails every retry alike: each failure is said once, until the watch is back.
      let said = "";
      subscriber.on("error", (error) => {
        const retrying = error instanceof RollcallError && error.code === "REDIS_UNAVAILABLE";
        const text = `${problem(error)}${retrying ? " (retrying)" : ""}`;
        if (text !== said) process.stderr.write(`rollcall: ${text}\n`);
        said = text;
      });
      try {
        const roomWatch = await subscriber.watch(room);
        // Listeners go on before anything else can arrive: the snapshot's own changes came
        // before watch() resolved, and it is printed whole instead.
        roomWatch.on("change", (change) => print(line(change, roomWatch)));
        roomWatch.on("sync", (reason) => {
          said = "";
          resynced(reason, roomWatch);
        });
        const r = roomWatch.roster;
        print(paint("bold", `watching ${room} on ${targetName(target)}`));
        print(`${stamp(null)}  ${paint("dim", `epoch ${r.epoch}, seq ${r.seq}`)}  ${summary(r)}`);
        await stopped();
        await roomWatch.close();
      } finally {
        subscriber.close();
      }
    },
    { persistent: true },
  );
  return 0;
}

function line({ type, user, event }: RosterChange, roomWatch: RoomWatch): string {
  let detail = "";
  if (event === null) detail = "(seen in a snapshot)";
  else if (event.type === "leave" || event.type === "typing-stop") detail = event.reason;
  else if ((event.type === "join" || event.type === "update") && event.state !== null) {
    detail = compactJson(event.state);
  }
  const what = paint(COLOURS[type], `${type.padEnd(12)} ${user}`);
  return `${stamp(event?.at ?? null)}  ${what}${detail && ` ${paint("dim", detail)}`}  → ${summary(roomWatch.roster)}`;
}

function resynced(reason: SyncReason, roomWatch: RoomWatch): void {
  if (reason === "start") return;
  const r = roomWatch.roster;
  print(
    `${stamp(null)}  ${paint("cyan", `resync (${reason})`)} ${paint("dim", `epoch ${r.epoch}, seq ${r.seq}`)}  → ${summary(r)}`,
  );
}

/** An event's Redis time, UTC to the ms; blank for what has none (snapshots). */
function stamp(at: number | null): string {
  return at === null ? " ".repeat(12) : new Date(at).toISOString().slice(11, 23);
}

/** Resolves on the first SIGINT or SIGTERM, which then no longer end the process by default. */
function stopped(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
