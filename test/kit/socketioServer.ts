// A Socket.IO server with rollcall presence as a process of its own (./socketio.ts startIo, its
// config as JSON in ROLLCALL_IO), for the tests that SIGKILL an instance. It runs its scripts on
// the test clock, like the test process, and says its port over IPC.
import "./clock.js";
import { startIo, type IoConfig } from "./socketio.js";

const instance = await startIo(JSON.parse(process.env.ROLLCALL_IO ?? "{}") as IoConfig);
instance.presence.on("error", (error) => console.error(error));
process.on("disconnect", () => void instance.close().finally(() => process.exit(0)));
process.send?.({ port: instance.port });
