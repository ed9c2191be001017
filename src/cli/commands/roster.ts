import type { Command } from "../args.js";
import { deploymentRollcall, withClient } from "../connect.js";
import { compactJson, duration, paint, print } from "../format.js";
import { table } from "../table.js";

/** `roster ROOM [--json]`: the room's members as a table, or roster() as JSON. */
export async function roster({ args: [room = ""], json, target }: Command): Promise<number> {
  await withClient(target, async (client) => {
    const rollcall = await deploymentRollcall(client, target.prefix);
    const r = await rollcall.roster(room);
    if (json) {
      print(JSON.stringify(r, null, 2));
      return;
    }
    const ago = (at: number) => `${duration(r.at - at)} ago`;
    print(
      `${paint("bold", room)}: ${r.count} present, ${r.typing.length} typing ` +
        paint("dim", `(epoch ${r.epoch}, seq ${r.seq})`),
    );
    if (r.members.length === 0) return;
    const [header = "", ...rows] = table(
      [
        ["user", "connections", "last seen", "joined", "typing", "state"],
        ...r.members.map((m) => [
          m.user,
          String(m.connections),
          ago(m.lastSeen),
          ago(m.joinedAt),
          m.typedAt === null ? "-" : `yes (${ago(m.typedAt)})`,
          m.state === null ? "-" : compactJson(m.state),
        ]),
      ],
      ["left", "right"],
    );
    print(paint("dim", header));
    rows.forEach((row) => print(row));
    if (r.count > r.members.length) {
      print(paint("dim", `(${r.members.length} of ${r.count} listed: the roster's limit)`));
    }
  });
  return 0;
}
