// A Fastify server with rollcall/fastify as a process of its own (./fastify.ts startFastify, its
// config as JSON in ROLLCALL_FASTIFY), for the tests that SIGKILL an instance. It runs its
// scripts on the test clock, like the test process, and says its port over IPC.
import "./clock.js";
import { startFastify, type FastifyConfig } from "./fastify.js";

const instance = await startFastify(
  JSON.parse(process.env.ROLLCALL_FASTIFY ?? "{}") as FastifyConfig,
);
process.on("disconnect", () => void instance.close().finally(() => process.exit(0)));
process.send?.({ port: instance.port });
