// eslint-disable-next-line @typescript-eslint/no-explicit-any -- listeners of any event, typed at on()
type AnyListener = (...args: any[]) => void;

/** A small typed event emitter for the browser (no Node built-ins). A listener that throws is
 * reported to the console and never stops the others. */
export class Emitter<Events extends Record<string, unknown[]>> {
  private readonly listeners = new Map<keyof Events, Set<AnyListener>>();

  on<K extends keyof Events>(name: K, listener: (...args: Events[K]) => void): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener);
    return () => this.off(name, listener);
  }

  off<K extends keyof Events>(name: K, listener: (...args: Events[K]) => void): void {
    this.listeners.get(name)?.delete(listener);
  }

  protected emit<K extends keyof Events>(name: K, ...args: Events[K]): void {
    for (const listener of [...(this.listeners.get(name) ?? [])]) {
      try {
        listener(...args);
      } catch (error) {
        console.error(error);
      }
    }
  }
}
