import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { Rollcall } from "../src/index.js";
import { HEARTBEAT_BATCH } from "../src/engine/rollcall.js";
import { buildDist, expectBuilt, ROOT } from "../test/kit/build.js";
import { NaiveTracker } from "../test/kit/naive.js";
import { forEachInFlight } from "./drive.js";
import type { Lab } from "./lab.js";
import { members, STEADY } from "./population.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";

const exec = promisify(execFile);

export interface CountsResults {
  connections: number;
  rooms: number;
  /** `rollcall stats --json`, the whole command (process start included), wall ms, per run. */
  statsMs: number[];
  /** What it printed in total, and whether that is exactly what was made. */
  total: { rooms: number; users: number; connections: number };
  exact: boolean;
  /** The baseline's only way to the same totals: SCAN its keys, ZCARD each room; wall ms. */
  naiveMs: number[];
}

export function countsSteps(): number {
  return 3;
}

/**
 * `rollcall stats` over many connections: the engine keeps per-bucket counts, so the command
 * reads one hash per bucket however many rooms there are. Timed as a user runs it, built, in a
 * new process each time.
 */
export async function benchCounts(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<CountsResults> {
  const { connections, roomSize, runs } = profile.counts;
  const population = members(connections / roomSize, roomSize);
  await lab.flush();
  await progress.step(`counts: ${connections} connections, both layouts`, async () => {
    const client = lab.connect({ enableAutoPipelining: true });
    const rollcall = new Rollcall(client, STEADY);
    const batches = Array.from({ length: Math.ceil(population.length / HEARTBEAT_BATCH) }, (_, i) =>
      population.slice(i * HEARTBEAT_BATCH, (i + 1) * HEARTBEAT_BATCH),
    );
    await forEachInFlight(batches, 8, (batch) => rollcall.heartbeatMany(batch));
    const tracker = new NaiveTracker(client, STEADY.presenceWindowMs! / 1000);
    await forEachInFlight(population, 256, (m) => tracker.updatePresence(m.room, m.user));
    lab.release(client);
    await lab.dropReplies();
  });
  await progress.step("counts: build the CLI", async () => {
    await buildDist();
    expectBuilt("cli");
  });
  return progress.step(`counts: rollcall stats, ${runs} runs`, async () => {
    const statsMs: number[] = [];
    const naiveMs: number[] = [];
    let printed: CountsResults["total"] | undefined;
    for (let run = 0; run < runs; run++) {
      const started = performance.now();
      const { stdout } = await exec(process.execPath, [
        join(ROOT, "dist/cli/main.js"),
        "--redis",
        lab.url,
        "stats",
        "--json",
      ]);
      statsMs.push(performance.now() - started);
      printed = (JSON.parse(stdout) as { total: CountsResults["total"] }).total;
      naiveMs.push(await naiveCount(lab));
    }
    const total = {
      rooms: printed!.rooms,
      users: printed!.users,
      connections: printed!.connections,
    };
    const exact =
      total.rooms === connections / roomSize &&
      total.users === connections &&
      total.connections === connections;
    if (!exact) throw new Error(`rollcall stats printed ${JSON.stringify(total)}`);
    await lab.flush();
    return { connections, rooms: connections / roomSize, statsMs, total, exact, naiveMs };
  });
}

/** The baseline's rooms are sorted sets named by conversation: SCAN them, ZCARD each. */
async function naiveCount(lab: Lab): Promise<number> {
  const started = performance.now();
  let members = 0;
  const probe = new NaiveTracker(lab.admin);
  for await (const batch of lab.admin.scanStream({ match: probe.presenceKey("*"), count: 1_000 })) {
    const sizes = await Promise.all((batch as string[]).map((key) => lab.admin.zcard(key)));
    members += sizes.reduce((a, b) => a + b, 0);
  }
  if (members === 0) throw new Error("the baseline's rooms are gone");
  return performance.now() - started;
}
