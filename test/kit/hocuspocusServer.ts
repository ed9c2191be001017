// One Hocuspocus instance as a process of its own, on the test's Redis (REDIS_URL) and test
// clock; it tells its parent its port over IPC, and stops on SIGTERM (its connections leave).
import "./clock.js";
import { startInstance } from "./hocuspocus.js";

const instance = await startInstance(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
process.send?.({ port: Number(new URL(instance.url).port) });
process.once("SIGTERM", () => {
  void instance.stop().finally(() => process.exit(0));
});
