import { Presets, SingleBar } from "cli-progress";

/** One bar on stderr over every step of the run; cli-progress stays silent when not on a TTY. */
export class Progress {
  private readonly bar = new SingleBar(
    { stream: process.stderr, format: "{bar} {value}/{total} {step}", hideCursor: true },
    Presets.shades_classic,
  );

  constructor(total: number) {
    this.bar.start(total, 0, { step: "" });
  }

  /** Runs one step of work under its label. */
  async step<T>(label: string, work: () => Promise<T>): Promise<T> {
    this.bar.update({ step: label });
    const result = await work();
    this.bar.increment();
    return result;
  }

  stop(): void {
    this.bar.stop();
  }
}
