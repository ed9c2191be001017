// One Socket.IO instance as a process of its own, for bench/socketio.ts (to SIGSTOP): an
// application's server with @socket.io/redis-adapter and rollcall presence (test/kit/socketio.ts),
// its config as JSON in ROLLCALL_IO. Over IPC it says its port, and on `measure` times
// `fetchSockets()` of a room (what users do today) and `roster()` of it (one read through
// rollcall), one call after another.
import { startIo, type IoConfig } from "../test/kit/socketio.js";

export interface Measure {
  type: "measure";
  room: string;
  samples: number;
}

export interface Measured {
  /** ms per fetchSockets() call that answered, and the sockets the last one found. */
  fetch: number[];
  fetchFound: number;
  /** Calls that failed, their ms, and the first error. */
  failed: number[];
  error: string | null;
  /** ms per roster() read, and the count the last one said. */
  roster: number[];
  rosterCount: number;
}

const instance = await startIo(JSON.parse(process.env.ROLLCALL_IO ?? "{}") as IoConfig);

async function measure({ room, samples }: Measure): Promise<Measured> {
  const result: Measured = {
    fetch: [],
    fetchFound: 0,
    failed: [],
    error: null,
    roster: [],
    rosterCount: 0,
  };
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    try {
      result.fetchFound = (await instance.io.in(room).fetchSockets()).length;
      result.fetch.push(performance.now() - started);
    } catch (error) {
      result.failed.push(performance.now() - started);
      result.error ??= error instanceof Error ? error.message : String(error);
    }
  }
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    result.rosterCount = (await instance.rollcall.roster(room)).count;
    result.roster.push(performance.now() - started);
  }
  return result;
}

process.on("message", (message: Measure) => {
  void measure(message).then((result) => process.send?.(result));
});
process.on("disconnect", () => void instance.close().finally(() => process.exit(0)));
process.send?.({ port: instance.port });
