import { forEachInFlight } from "./drive.js";
import { beater } from "./heartbeat.js";
import { members, type Member } from "./population.js";
import type { Lab } from "./lab.js";
import type { Profile } from "./profile.js";
import type { Progress } from "./progress.js";
import { info } from "./stats.js";

/** Bytes per online connection, two ways. */
export interface Footprint {
  keys: number;
  /** Sum of MEMORY USAGE (SAMPLES 0: every element) over every key: values and key names. */
  memoryUsage: number;
  /** used_memory after minus before on an otherwise empty Redis: also the keyspace's own
   * entries and the allocator's rounding. */
  usedMemory: number;
  /** MEMORY USAGE by the last part of the key's name (`members`, `users`, … or `online`). */
  byKind: Record<string, number>;
}

export interface MemoryRow {
  roomSize: number;
  connections: number;
  rollcall: Footprint;
  naive: Footprint;
}

export function memorySteps(p: Profile): number {
  return 2 * p.memory.roomSizes.length;
}

/** Full rooms of each size, one connection per user, in rollcall's layout and in the seed's. */
export async function benchMemory(
  lab: Lab,
  profile: Profile,
  progress: Progress,
): Promise<MemoryRow[]> {
  const rows: MemoryRow[] = [];
  for (const roomSize of profile.memory.roomSizes) {
    const rooms = Math.max(1, Math.floor(profile.memory.connections / roomSize));
    const population = members(rooms, roomSize);
    const measure = (variant: "rollcall" | "naive") =>
      progress.step(`memory: rooms of ${roomSize}, ${variant}`, () =>
        footprint(lab, variant, population),
      );
    rows.push({
      roomSize,
      connections: population.length,
      rollcall: await measure("rollcall"),
      naive: await measure("naive"),
    });
  }
  return rows;
}

async function footprint(
  lab: Lab,
  variant: "rollcall" | "naive",
  population: readonly Member[],
): Promise<Footprint> {
  await lab.flush();
  const client = lab.connect({ enableAutoPipelining: true });
  await client.ping();
  const before = await usedMemory(lab);
  await forEachInFlight(population, 64, beater(variant, client));
  const after = await usedMemory(lab);
  lab.release(client);
  const n = population.length;
  let keys = 0;
  let bytes = 0;
  const byKind: Record<string, number> = {};
  for await (const batch of lab.admin.scanStream({ count: 1_000 })) {
    for (const key of batch as string[]) {
      const usage = (await lab.admin.memory("USAGE", key, "SAMPLES", 0)) ?? 0;
      const kind = key.slice(key.lastIndexOf(":") + 1);
      byKind[kind] = (byKind[kind] ?? 0) + usage / n;
      keys += 1;
      bytes += usage;
    }
  }
  return { keys, memoryUsage: bytes / n, usedMemory: (after - before) / n, byKind };
}

async function usedMemory(lab: Lab): Promise<number> {
  return Number((await info(lab.admin, "memory")).get("used_memory"));
}
