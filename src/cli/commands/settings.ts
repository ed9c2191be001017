import { deleteSettings, deploymentKey, storedSettings } from "../../engine/deployment.js";
import { LAYOUT_VERSION } from "../../engine/settings.js";
import type { Client } from "../../engine/script.js";
import type { Command } from "../args.js";
import { deploymentRollcall, noDeployment, withClient } from "../connect.js";
import { CliError } from "../errors.js";
import { count, paint, print } from "../format.js";
import { table } from "../table.js";
import { sum } from "./stats.js";

/** What a deployment holds now: whether any instance may still run on its settings. */
interface Use {
  rooms: number;
  users: number;
  connections: number;
  /** Rooms with something overdue, that a sweep has yet to announce. */
  backlog: number;
}

/**
 * `settings [--json] [--delete]`: the settings the deployment stored, and whether it is in use;
 * with --delete, removes them, so that the next instance to start stores its own, unless it is
 * in use. In use means that its buckets count a room (a member, one in its leave grace
 * included), a connection, or a room with something due: instances run on these settings, or
 * stopped without their users announced gone yet.
 */
export async function settings({ json, remove, target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const key = deploymentKey(target.prefix);
    const stored = new Map<string, string>();
    const fields = await storedSettings(client, target.prefix);
    for (let i = 0; i + 1 < fields.length; i += 2) stored.set(fields[i]!, fields[i + 1]!);
    if (stored.size === 0) throw noDeployment(target.prefix);
    const use =
      stored.get("layout") === String(LAYOUT_VERSION) ? await inUse(client, target) : null;
    if (remove) {
      refuseInUse(key, stored.get("layout"), use);
      await deleteSettings(client, target.prefix);
      print(`deleted ${key}: the next instance to start stores its own settings`);
      return;
    }
    if (json) {
      const numbers = Object.fromEntries([...stored].map(([name, value]) => [name, Number(value)]));
      print(JSON.stringify({ key, settings: numbers, use, inUse: use && busy(use) }, null, 2));
      return;
    }
    print(paint("bold", key));
    table([...stored], ["left", "right"]).forEach((line) => print(`  ${line}`));
    print(use === null ? unknownUse(stored.get("layout")) : described(use));
  });
  return 0;
}

async function inUse(client: Client, target: Command["target"]): Promise<Use> {
  const { rooms, users, connections, backlog } = sum(
    await (await deploymentRollcall(client, target.prefix)).stats(),
  );
  return { rooms, users, connections, backlog };
}

const busy = (use: Use) => use.rooms + use.connections + use.backlog > 0;

function described(use: Use): string {
  if (!busy(use)) return "not in use: no room, no connection, nothing due";
  const counts = [
    count(use.rooms, "room"),
    count(use.users, "user"),
    count(use.connections, "connection"),
    `${use.backlog} due`,
  ];
  return `in use: ${counts.join(", ")}`;
}

function unknownUse(layout: string | undefined): string {
  return `stored by a release of layout ${layout ?? "unknown"} (this one is ${LAYOUT_VERSION}): whether it is in use is that release's to tell`;
}

function refuseInUse(key: string, layout: string | undefined, use: Use | null): void {
  if (use === null) {
    throw new CliError(1, `${key} is not deleted: it was ${unknownUse(layout)}`);
  }
  if (!busy(use)) return;
  throw new CliError(
    1,
    `${key} is not deleted: ${described(use)}. Instances run on these settings, or stopped ` +
      "less than a presence window and leave grace ago: once that passed, `rollcall sweep` " +
      "announces their users (`rollcall check --reconcile` recounts after keys expired unannounced)",
  );
}
