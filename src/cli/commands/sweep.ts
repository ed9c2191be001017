import { Sweeper } from "../../runtime/sweeper.js";
import type { Command } from "../args.js";
import { deploymentRollcall, withClient } from "../connect.js";
import { count, duration, print } from "../format.js";

/** `sweep`: one Sweeper pass, as any instance's sweeper runs it, and what it did. */
export async function sweep({ target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const pass = await new Sweeper(await deploymentRollcall(client, target.prefix)).sweepOnce();
    print(
      `swept ${count(pass.rooms, "room")} in ${duration(pass.durationMs)} (${count(pass.calls, "call")}): ` +
        `${count(pass.connections, "connection")} expired, ${count(pass.leaves, "leave")}, ` +
        `${count(pass.typingStops, "typing stop")} announced`,
    );
  });
  return 0;
}
