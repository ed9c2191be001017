import { expect } from "chai";
import { Rollcall } from "../src/rollcall.js";
import { client, eventually, listen } from "./support.js";

describe("smoke", () => {
  it("joins once", async () => {
    const rc = new Rollcall(client());
    const events = await listen([rc.channel("r")]);
    expect((await rc.heartbeat("r", "u", "c")).joined).to.equal(true);
    expect((await rc.heartbeat("r", "u", "c")).joined).to.equal(false);
    await eventually(() => events.length === 1);
    expect(events[0]!.type).to.equal("join");
  });
});
