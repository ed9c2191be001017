import type { Client } from "../../engine/script.js";
import type { Command } from "../args.js";
import { deploymentRollcall, withClient } from "../connect.js";
import { duration, paint, print } from "../format.js";
import { table } from "../table.js";

/**
 * `status USER... [--json]`: whether each user is online anywhere in the deployment, since when,
 * and when last seen, as a table, or status() as JSON.
 */
export async function status({ args: users, json, target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const rollcall = await deploymentRollcall(client, target.prefix);
    const statuses = await rollcall.status(users);
    if (json) {
      print(JSON.stringify(statuses, null, 2));
      return;
    }
    // Ages on Redis's clock, which wrote the times, never this machine's.
    const now = await redisTime(client);
    const time = (at: number) => new Date(at).toISOString();
    // No time: online with no period before this one, or offline and not seen within the
    // retention (userRetentionMs).
    const lastSeen = (at: number | null, online: boolean) =>
      at !== null ? `${time(at)} (${duration(now - at)} ago)` : online ? "-" : "never";
    const [header = "", ...rows] = table([
      ["user", "online", "since", "last seen"],
      ...statuses.map((s) => [
        s.user,
        s.online ? "yes" : "no",
        s.since === null ? "-" : time(s.since),
        lastSeen(s.lastSeenAt, s.online),
      ]),
    ]);
    print(paint("dim", header));
    rows.forEach((row) => print(row));
  });
  return 0;
}

/** Redis's TIME in ms: what the statuses' times are read against. */
async function redisTime(client: Client): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
}
