import type { BucketStats } from "../../engine/scripts/stats.js";
import type { Command } from "../args.js";
import { deploymentRollcall, withClient } from "../connect.js";
import { duration, paint, print } from "../format.js";
import { table } from "../table.js";

type Counts = Omit<BucketStats, "bucket" | "epoch" | "events">;

/** `stats [--json]`: per bucket and in total. */
export async function stats({ json, target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const rollcall = await deploymentRollcall(client, target.prefix);
    const buckets = await rollcall.stats();
    const total = sum(buckets);
    if (json) print(JSON.stringify({ buckets, total }, null, 2));
    else render(buckets, total);
  });
  return 0;
}

/** The buckets added up: their counts and backlogs, and the longest lag. */
export function sum(buckets: readonly BucketStats[]): Counts {
  const total: Counts = { rooms: 0, users: 0, connections: 0, typing: 0, backlog: 0, lagMs: null };
  for (const b of buckets) {
    total.rooms += b.rooms;
    total.users += b.users;
    total.connections += b.connections;
    total.typing += b.typing;
    total.backlog += b.backlog;
    if (b.lagMs !== null) total.lagMs = Math.max(total.lagMs ?? 0, b.lagMs);
  }
  return total;
}

function render(buckets: readonly BucketStats[], total: Counts): void {
  const counts = (c: Counts) => [
    String(c.rooms),
    String(c.users),
    String(c.connections),
    String(c.typing),
    String(c.backlog),
    c.lagMs === null ? "-" : duration(c.lagMs),
  ];
  const lines = table(
    [
      ["bucket", "rooms", "users", "connections", "typing", "backlog", "lag", "events", "epoch"],
      ...buckets.map((b) => [String(b.bucket), ...counts(b), String(b.events), b.epoch ?? "-"]),
      ["total", ...counts(total), "", ""],
    ],
    ["right", "right", "right", "right", "right", "right", "right", "right"],
  );
  const header = lines.shift() ?? "";
  const last = lines.pop() ?? "";
  print(paint("dim", header));
  lines.forEach((line) => print(line));
  print(paint("bold", last));
}
